"""boto3 clients built once per process, with adaptive retries and bounded timeouts.

A Lambda container serves many invocations: building a session and its clients costs tens of
milliseconds each, so they are kept for the life of the process. ``AWS_ENDPOINT_URL`` (and the
per-service ``AWS_ENDPOINT_URL_<SERVICE>``) is honoured by botocore itself, which is how ``sim/``
and the tests reach moto with exactly these clients.
"""

from __future__ import annotations

import os
import threading
from contextvars import ContextVar
from typing import Any

import boto3
from botocore.config import Config

MAX_ATTEMPTS = 5
CONNECT_TIMEOUT_SECONDS = 5.0
READ_TIMEOUT_SECONDS = 30.0

_LOCK = threading.Lock()
_SESSIONS: dict[tuple[str | None, str | None], boto3.session.Session] = {}
_CLIENTS: dict[tuple[str, str | None, str | None], Any] = {}
# In Lambda each function has processes of its own and takes its role's credentials from the environment.
# sim/ runs several functions side by side in one process (the demo, the tests), each with its own role:
# there, the credentials of the function a thread runs are set here (access key, secret), and sessions,
# clients and the shared runtime are kept apart by them. Unset (None) everywhere else.
CREDENTIALS: ContextVar[tuple[str, str] | None] = ContextVar("nodescale_credentials", default=None)


def client_config() -> Config:
    """Adaptive retries back off on throttling across every call of the process (client-side rate
    limiting), which matters when a burst of launches hits CreateFleet's request-rate limit."""
    return Config(
        retries={"mode": "adaptive", "total_max_attempts": MAX_ATTEMPTS},
        connect_timeout=CONNECT_TIMEOUT_SECONDS,
        read_timeout=READ_TIMEOUT_SECONDS,
        tcp_keepalive=True,
    )


def _region(region: str | None) -> str | None:
    return region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or None


def session(region: str | None = None) -> boto3.session.Session:
    region = _region(region)
    credentials = CREDENTIALS.get()
    key = (region, credentials[0] if credentials else None)
    with _LOCK:
        sess = _SESSIONS.get(key)
        if sess is None:
            given = {"aws_access_key_id": credentials[0], "aws_secret_access_key": credentials[1]} if credentials else {}
            sess = _SESSIONS[key] = boto3.session.Session(region_name=region, **given)
        return sess


def client(service: str, region: str | None = None) -> Any:
    """The process-wide client for ``service`` in ``region`` (default: the environment's region)."""
    region = _region(region)
    credentials = CREDENTIALS.get()
    key = (service, region, credentials[0] if credentials else None)
    with _LOCK:
        found = _CLIENTS.get(key)
        if found is not None:
            return found
    # Built outside the lock: client creation loads service models and can take ~50 ms.
    made = session(region).client(service, config=client_config())
    with _LOCK:
        return _CLIENTS.setdefault(key, made)


SERVICES = ("ec2", "ssm", "eks", "dynamodb", "iam", "sqs")


class AwsClients:
    """The clients the launch code needs, passed around explicitly so tests can hand in their own."""

    ec2: Any
    ssm: Any
    eks: Any
    dynamodb: Any
    iam: Any
    sqs: Any  # None where nothing reads a queue (tests that build their own clients)

    def __init__(self, ec2: Any, ssm: Any, eks: Any, dynamodb: Any, iam: Any, sqs: Any = None) -> None:
        self.ec2, self.ssm, self.eks, self.dynamodb, self.iam, self.sqs = ec2, ssm, eks, dynamodb, iam, sqs

    @classmethod
    def for_region(cls, region: str | None = None) -> AwsClients:
        """EC2 is built now (every function calls it on its first event); the others on first use.

        Deferred for cold start: SSM, EKS and IAM are only called when a launch resolves an AMI, the
        cluster or an instance profile, DynamoDB only by the functions that keep state, SQS only by the
        interruption function when a record fails, and each client
        costs ~10 ms of service-model loading. They are built with the region and credentials in force
        here, so a deferred client is the one this call would have built.
        """
        made = cls.__new__(cls)
        made.__dict__["_deferred"] = (_region(region), CREDENTIALS.get())
        made.ec2 = client("ec2", region)
        return made

    def __getattr__(self, name: str) -> Any:
        # Only reached for an attribute not set yet: a client for_region left for its first use.
        deferred = self.__dict__.get("_deferred")
        if deferred is None or name not in SERVICES:
            raise AttributeError(name)
        region, credentials = deferred
        token = CREDENTIALS.set(credentials)
        try:
            made = client(name, region)  # process-wide: threads racing here get the same client
        finally:
            CREDENTIALS.reset(token)
        self.__dict__[name] = made
        return made


def reset() -> None:
    """Forget every cached session and client (tests that switch endpoints or credentials)."""
    with _LOCK:
        _SESSIONS.clear()
        _CLIENTS.clear()
