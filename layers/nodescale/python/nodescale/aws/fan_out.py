"""Start another invocation of a function without waiting for it (Lambda's asynchronous Invoke).

The disruption function uses it to run the slices of a pass in parallel (usecases/disrupt/slices.py).
An asynchronous invocation is queued by Lambda and retried by it; the answer here only says it was
accepted (202).
"""

from __future__ import annotations

import json
from typing import Any

from . import clients


class FanOutError(RuntimeError):
    """Lambda did not accept the invocation."""


def invoke_async(function_arn: str, event: dict[str, Any], lambda_client: Any = None) -> None:
    """Queue ``event`` for ``function_arn`` (InvocationType Event); raises FanOutError unless accepted."""
    client = lambda_client if lambda_client is not None else clients.client("lambda")
    answer = client.invoke(FunctionName=function_arn, InvocationType="Event", Payload=json.dumps(event).encode())
    status = answer.get("StatusCode")
    if status != 202:
        raise FanOutError(f"Lambda answered {status} to the asynchronous invocation of {function_arn}")
