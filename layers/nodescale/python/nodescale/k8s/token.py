"""The EKS bearer token, made from the functions' own AWS credentials.

EKS authenticates a caller by replaying a presigned STS GetCallerIdentity request whose signed
headers include `x-k8s-aws-id: <cluster>`. The token is that URL, base64url-encoded without padding
and prefixed `k8s-aws-v1.`. EKS accepts it for 15 minutes whatever `X-Amz-Expires` says, so it is
cached and replaced a little before that.
"""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config

TOKEN_PREFIX = "k8s-aws-v1."
CLUSTER_ID_HEADER = "x-k8s-aws-id"
PRESIGN_EXPIRES_SECONDS = 60
# EKS honours a token for 15 minutes from signing; a minute is kept in reserve for clock skew.
TOKEN_LIFETIME_SECONDS = 14 * 60
REFRESH_MARGIN_SECONDS = 60


class TokenError(RuntimeError):
    """No token can be made: no AWS credentials, or STS cannot be resolved for the region."""


@dataclass(frozen=True)
class Token:
    value: str
    expires_at: float  # time.monotonic() after which EKS no longer accepts it

    def fresh(self, now: float, margin: float = REFRESH_MARGIN_SECONDS) -> bool:
        return now < self.expires_at - margin


def presigned_caller_identity_url(cluster_name: str, region: str, session: boto3.Session | None = None) -> str:
    """A GetCallerIdentity URL for the region's own STS endpoint, signed with the cluster id header."""
    if not cluster_name:
        raise TokenError("cannot make an EKS token: the cluster name is empty")
    if not region:
        raise TokenError("cannot make an EKS token: the region is empty")
    session = session or boto3.Session()
    if session.get_credentials() is None:
        raise TokenError("cannot make an EKS token: no AWS credentials found in the environment")
    # EKS only trusts the partition's real STS hosts, so a local endpoint override (AWS_ENDPOINT_URL,
    # used to reach sim/) must not leak into the token; the regional endpoint is the one botocore
    # resolves for the region's partition.
    sts = session.client(
        "sts",
        region_name=region,
        config=Config(ignore_configured_endpoint_urls=True, signature_version="v4"),
    )
    if _is_global_sts(sts.meta.endpoint_url):
        sts = session.client(
            "sts",
            region_name=region,
            endpoint_url=_regional_endpoint(sts.meta.endpoint_url, region),
            config=Config(ignore_configured_endpoint_urls=True, signature_version="v4"),
        )

    def add_cluster_header(request: Any, **_: Any) -> None:
        request.headers[CLUSTER_ID_HEADER] = cluster_name

    sts.meta.events.register("before-sign.sts.GetCallerIdentity", add_cluster_header)
    return sts.generate_presigned_url(
        "get_caller_identity", Params={}, ExpiresIn=PRESIGN_EXPIRES_SECONDS, HttpMethod="GET"
    )


def _is_global_sts(endpoint_url: str) -> bool:
    host = endpoint_url.split("://", 1)[-1].split("/", 1)[0]
    return host.split(".")[0] == "sts" and host.count(".") == 2 and host.endswith("amazonaws.com")


def _regional_endpoint(global_url: str, region: str) -> str:
    # Only reached when AWS_STS_REGIONAL_ENDPOINTS=legacy makes botocore pick the global host for
    # us-east-1 and friends; the regional host is the same name with the region inserted.
    scheme, rest = global_url.split("://", 1)
    return f"{scheme}://sts.{region}.{rest.split('.', 1)[1]}"


def encode_token(presigned_url: str) -> str:
    encoded = base64.urlsafe_b64encode(presigned_url.encode()).decode().rstrip("=")
    return TOKEN_PREFIX + encoded


def decode_token(token: str) -> str:
    """The presigned URL inside a token (for tests and for operators checking a token by hand)."""
    if not token.startswith(TOKEN_PREFIX):
        raise TokenError(f"not an EKS token: it must start with {TOKEN_PREFIX!r}")
    body = token[len(TOKEN_PREFIX) :]
    return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()


class TokenSource:
    """Thread-safe cache of the cluster's bearer token, re-signed before EKS stops accepting it."""

    def __init__(
        self,
        cluster_name: str,
        region: str,
        session: boto3.Session | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cluster_name = cluster_name
        self.region = region
        self._session = session
        self._clock = clock
        self._lock = threading.Lock()
        self._token: Token | None = None

    def token(self) -> str:
        with self._lock:
            now = self._clock()
            if self._token is None or not self._token.fresh(now):
                url = presigned_caller_identity_url(self.cluster_name, self.region, self._session)
                self._token = Token(encode_token(url), now + TOKEN_LIFETIME_SECONDS)
            return self._token.value
