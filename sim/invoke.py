"""Invoke the Lambda handlers in-process the way their triggers would: a schedule tick, an EventBridge event, or
(the interruption function) an SQS batch from its queue's event source mapping.

Used by the demo and the end-to-end tests, so they run exactly the code the functions run, with a
Lambda context that tells the handler how much time it has left.
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
import os
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LAMBDAS = ROOT / "lambdas"
EVENTS = ROOT / "tests" / "fixtures" / "events"
ACCOUNT = "123456789012"  # moto's account, and the one the recorded events name
REGION = "us-east-1"

_LOADED: dict[str, ModuleType] = {}


def handler_module(function: str) -> ModuleType:
    """``lambdas/<function>/handler.py`` as its own module (the directories are not packages)."""
    if function not in _LOADED:
        path = LAMBDAS / function / "handler.py"
        spec = importlib.util.spec_from_file_location(f"nodescale_lambda_{function}", path)
        if spec is None or spec.loader is None:
            raise FileNotFoundError(f"no handler at {path}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _LOADED[function] = module
    return _LOADED[function]


@dataclass
class LambdaContext:
    """The parts of the Lambda context object the handlers and Powertools read."""

    function: str
    timeout_seconds: float = 60.0
    cluster: str = "demo-cluster"
    started: float = field(default_factory=time.monotonic)
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    memory_limit_in_mb: int = 512
    function_version: str = "$LATEST"

    @property
    def function_name(self) -> str:
        return f"nodescale-{self.cluster}-{self.function}"

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{self.function_name}"

    @property
    def log_group_name(self) -> str:
        return f"/aws/lambda/{self.function_name}"

    @property
    def log_stream_name(self) -> str:
        return "local"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.timeout_seconds - (time.monotonic() - self.started)) * 1000))


def scheduled_tick(cluster: str = "demo-cluster", rule: str = "poll") -> dict[str, Any]:
    event = load_event("scheduled-tick.json")
    event["id"] = str(uuid.uuid4())
    event["time"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    event["resources"] = [f"arn:aws:events:{REGION}:{ACCOUNT}:rule/nodescale-{cluster}-{rule}"]
    return event


def load_event(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / name).read_text())


def event_for_instance(name: str, instance_id: str, when: datetime | None = None) -> dict[str, Any]:
    """A recorded event sample retargeted at ``instance_id``, with a fresh event id."""
    event = copy.deepcopy(load_event(name))
    text = json.dumps(event).replace("i-0a1b2c3d4e5f60718", instance_id)
    event = json.loads(text)
    event["id"] = str(uuid.uuid4())
    if when is not None:
        event["time"] = when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return event


# ------------------------------------------------------------------------------- the interruption queue


def queue_arn(cluster: str = "demo-cluster") -> str:
    from nodescale.names import interruption_queue_name

    return f"arn:aws:sqs:{REGION}:{ACCOUNT}:{interruption_queue_name(cluster)}"


def sqs_batch(events: list[dict[str, Any]], cluster: str = "demo-cluster") -> dict[str, Any]:
    """The event Lambda's event source mapping hands the interruption function for these EventBridge events,
    each as EventBridge put it in the queue (the body is the event's JSON): the recorded shape of
    tests/fixtures/events/sqs/sqs-batch.json, with fresh ids and times."""
    now = int(time.time() * 1000)
    messages = [{"MessageId": str(uuid.uuid4()), "ReceiptHandle": uuid.uuid4().hex, "Body": json.dumps(e),
                 "Attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": str(now),
                                "ApproximateFirstReceiveTimestamp": str(now)}} for e in events]
    return batch_of_messages(messages, cluster)


def batch_of_messages(messages: list[dict[str, Any]], cluster: str = "demo-cluster") -> dict[str, Any]:
    """Lambda's SQS event for messages as ReceiveMessage returned them (``MessageId``, ``ReceiptHandle``, ``Body``,
    ``Attributes``...): the keys renamed as Lambda renames them, the queue's ARN and region added."""
    template = json.loads((EVENTS / "sqs" / "sqs-batch.json").read_text())["Records"][0]
    records = []
    for message in messages:
        body = message["Body"]
        records.append({
            **template,
            "messageId": message["MessageId"],
            "receiptHandle": message["ReceiptHandle"],
            "body": body,
            "attributes": {**template["attributes"], **(message.get("Attributes") or {})},
            "messageAttributes": message.get("MessageAttributes") or {},
            "md5OfBody": message.get("MD5OfBody") or hashlib.md5(body.encode()).hexdigest(),
            "eventSourceARN": queue_arn(cluster),
            "awsRegion": REGION,
        })
    return {"Records": records}


def send_to_queue(sqs: Any, queue_url: str, events: list[dict[str, Any]]) -> None:
    """What AWS does with these events (EC2's, Health's): each goes on the default bus, and the stack's rule whose
    pattern matches delivers its JSON to the queue as the rule (aws:SourceArn), which the queue's policy lets
    through (sim/aws/eventbridge.py). A plain SendMessage to the queue is refused, even the administrator's."""
    answer = _sim_control(sqs, "/sim/v1/aws-events", {"events": events})
    if answer["refused"] or answer["delivered"] != len(events):
        raise RuntimeError(f"EventBridge delivered {answer['delivered']} of {len(events)} events to {queue_url}: "
                           f"{answer['refused']}")


def deliver_as_rule(sqs: Any, rule: str, bodies: list[str]) -> None:
    """The rule's delivery of these message bodies, as they are, to its queue: for a body no AWS service emits
    (a poison record), which only a rule the queue's policy trusts could put there."""
    answer = _sim_control(sqs, "/sim/v1/rule-deliveries", {"rule": rule, "bodies": bodies})
    if answer["refused"] or answer["delivered"] != len(bodies):
        raise RuntimeError(f"the rule {rule} delivered {answer['delivered']} of {len(bodies)}: {answer['refused']}")


def _sim_control(client: Any, path: str, payload: dict[str, Any]) -> dict[str, Any]:
    import urllib.request

    request = urllib.request.Request(f"{client.meta.endpoint_url.rstrip('/')}{path}", data=json.dumps(payload).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=60) as answer:
        return json.loads(answer.read())


@dataclass
class Poll:
    """One poll of the event source mapping: what it received, what the function answered, what it deleted."""

    received: int
    response: Any
    deleted: list[str]
    failed: list[str]


def poll_queue(function: str, queue_url: str, *, batch_size: int | None = None, timeout_seconds: float = 60.0,
               cluster: str = "demo-cluster") -> Poll:
    """Do what the function's SQS event source mapping does, once: receive up to ``batch_size`` messages (ten per
    ReceiveMessage, SQS's limit) with the function's own credentials (the mapping polls as the function's role,
    which sim holds to the stack's policy), invoke the handler with the batch, then delete every message the
    response does not name in ``batchItemFailures``; those stay in the queue for a later receive (and after the
    redrive policy's receives, the dead-letter queue)."""
    from nodescale.aws import clients
    from nodescale.interruption import queue as interruption_queue

    size = batch_size or interruption_queue.BATCH_SIZE
    with _credentials_of(function):
        sqs = clients.client("sqs")
        messages: list[dict[str, Any]] = []
        while len(messages) < size:
            answer = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=min(10, size - len(messages)),
                                         AttributeNames=["All"], MessageAttributeNames=["All"], WaitTimeSeconds=0)
            if not answer.get("Messages"):
                break
            messages.extend(answer["Messages"])
    if not messages:
        return Poll(0, None, [], [])
    response = invoke(function, batch_of_messages(messages, cluster), timeout_seconds, cluster)
    failures = response.get("batchItemFailures") if isinstance(response, dict) else None
    if failures is None:
        failed = [m["MessageId"] for m in messages]  # not a partial batch response: Lambda retries the whole batch
    else:
        failed = [f["itemIdentifier"] for f in failures]
    done = [m for m in messages if m["MessageId"] not in failed]
    with _credentials_of(function):
        sqs = clients.client("sqs")
        for start in range(0, len(done), 10):
            sqs.delete_message_batch(QueueUrl=queue_url, Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done[start:start + 10])])
    return Poll(len(messages), response, [m["MessageId"] for m in done], failed)


def invoke(function: str, event: dict[str, Any], timeout_seconds: float = 60.0, cluster: str = "demo-cluster") -> Any:
    """Run the handler as its Lambda runs it. With a sim/ environment's settings applied (the CLI's
    operator credentials of DIR/env), the call is made with that function's own credentials, which sim
    holds to that function's role: a grant one function lacks fails that function's test."""
    module = handler_module(function)
    with _credentials_of(function):
        return module.handler(event, LambdaContext(function, timeout_seconds, cluster))


@contextmanager
def _credentials_of(function: str) -> Iterator[None]:
    """This thread runs `function`: its clients and runtime use that function's credentials (a context-local
    setting, so the demo's provisioner thread and an interruption thread each keep their own role)."""
    from nodescale.aws import clients
    from sim.aws.constants import FUNCTION_CREDENTIALS, OPERATOR_CREDENTIALS

    credentials = FUNCTION_CREDENTIALS.get(function)
    if credentials is None or os.environ.get("AWS_ACCESS_KEY_ID") != OPERATOR_CREDENTIALS["aws_access_key_id"]:
        yield
        return
    token = clients.CREDENTIALS.set((credentials["aws_access_key_id"], credentials["aws_secret_access_key"]))
    try:
        yield
    finally:
        clients.CREDENTIALS.reset(token)


@contextmanager
def product_environment(settings: Mapping[str, str], **overrides: str) -> Iterator[None]:
    """The process set up as a Lambda of this deployment would be: its settings (``settings``, e.g. a sim/
    environment's ``env``, plus ``overrides``) in ``os.environ`` and fresh process-wide clients and runtime;
    everything restored afterwards, so the next user of this process sees none of it."""
    from nodescale import base_runtime
    from nodescale.aws import clients

    saved = dict(os.environ)
    os.environ.update(settings)
    os.environ.update(overrides)
    base_runtime.reset()
    clients.reset()
    try:
        yield
    finally:
        base_runtime.reset()
        clients.reset()
        os.environ.clear()
        os.environ.update(saved)
