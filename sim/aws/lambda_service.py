"""sim's Lambda service: the stack's functions, invoked asynchronously over the wire and queued for a runner.

The disruption function fans a split pass out by invoking itself (aws/fan_out.py: Invoke with
InvocationType Event). On sim that call reaches the AWS endpoint like any other: signed, held to the
caller's policy as `lambda:InvokeFunction` on the function's ARN (sim/aws/iam_enforcement.py), then
answered here as Lambda answers it: 202 and the event queued; 404 for a function the stack does not
have; 400 for a payload that is not JSON; 413 above the asynchronous payload limit. sim does not run
the handlers itself (they run where the caller's settings and credentials are): whoever drives the
functions takes the queued invocations and runs them (bench/scalerun.py; control API below).

    GET    /sim/v1/lambda-invocations  -> {"invocations": [...]} queued, oldest first
    DELETE /sim/v1/lambda-invocations  -> {"invocations": [...]} taken: returned and removed from the queue

Each invocation: {"function": "disruption", "functionName": "nodescale-<cluster>-disruption",
"qualifier": "", "payload": {...}, "requestId": "...", "time": <wall-clock seconds>}.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from sim.aws.constants import FUNCTIONS
from sim.aws.iam_enforcement import lambda_function_arn

# Lambda's limit for an asynchronous invocation's payload (Lambda quotas: 256 KB).
ASYNC_PAYLOAD_LIMIT = 256 * 1024
_INVOKE_PATH = "/2015-03-31/functions/"

Answer = tuple[int, dict[str, str], bytes]


class LambdaService:
    """The functions of one deployment (by their physical names) and the queue of their asynchronous invocations."""

    def __init__(self, cluster: str) -> None:
        from nodescale.names import physical_name

        self.functions = {physical_name(cluster, fn): fn for fn in FUNCTIONS}
        self._queue: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def answer(self, action: str, path: str, headers: Any, body: bytes) -> Answer:
        """Lambda's answer to one (already authorized) call: (status, headers, body)."""
        url = urlsplit(path)
        if action != "Invoke" or not url.path.startswith(_INVOKE_PATH):
            return _error("InvalidRequestContentException", f"sim's Lambda serves Invoke only, not {action}", 400)
        requested = unquote(url.path[len(_INVOKE_PATH):].split("/", 1)[0])
        arn = lambda_function_arn(requested, parse_qs(url.query).get("Qualifier", [""])[0])
        name, _, qualifier = arn.split(":function:", 1)[1].partition(":")
        if name not in self.functions or qualifier not in ("", "$LATEST"):
            return _error("ResourceNotFoundException", f"Function not found: {arn}", 404)
        kind = headers.get("X-Amz-Invocation-Type") or "RequestResponse"
        if kind == "DryRun":
            return 204, _headers(), b""
        if kind != "Event":
            # Only asynchronous invocations are served: a synchronous one would need the handler run here.
            return _error("InvalidParameterValueException",
                          f"sim's Lambda runs asynchronous invocations only (InvocationType Event), not {kind}", 400)
        if len(body) > ASYNC_PAYLOAD_LIMIT:
            return _error("RequestEntityTooLargeException",
                          f"{len(body)} byte payload is too large for the Event invocation type "
                          f"(limit {ASYNC_PAYLOAD_LIMIT} bytes)", 413)
        try:
            payload = json.loads(body or b"{}")
        except (ValueError, UnicodeDecodeError):
            return _error("InvalidRequestContentException", "Could not parse request body into json", 400)
        request_id = str(uuid.uuid4())
        with self._lock:
            self._queue.append({"function": self.functions[name], "functionName": name, "qualifier": qualifier,
                                "payload": payload, "requestId": request_id, "time": time.time()})
        return 202, _headers(request_id), b""

    def queued(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._queue)

    def take(self) -> list[dict[str, Any]]:
        """The queued invocations, removed from the queue (each is run once, by whoever took it)."""
        with self._lock:
            taken, self._queue = self._queue, []
        return taken

    def routes(self) -> dict[str, Any]:
        """The control routes, for the AWS endpoint's proxy (sim/aws/faults.FaultProxy)."""
        return {"GET /sim/v1/lambda-invocations": lambda: {"invocations": self.queued()},
                "DELETE /sim/v1/lambda-invocations": lambda: {"invocations": self.take()}}


def _headers(request_id: str | None = None) -> dict[str, str]:
    return {"Content-Type": "application/json", "x-amzn-RequestId": request_id or str(uuid.uuid4())}


def _error(code: str, message: str, status: int) -> Answer:
    # Lambda's REST-JSON errors: the code in x-amzn-ErrorType (botocore reads it there), Type/message in the body.
    headers = {**_headers(), "x-amzn-ErrorType": code}
    return status, headers, json.dumps({"Type": "User", "message": message}).encode()
