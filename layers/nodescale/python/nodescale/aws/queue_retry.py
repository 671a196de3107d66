"""Records of the interruption queue that failed come back soon: ChangeMessageVisibility on their receipts.

Lambda's event source mapping leaves a record named in ``batchItemFailures`` in the queue, invisible until the
queue's visibility timeout runs out (six times the function's timeout: 15 minutes at the default), which is
longer than a spot notice. The function shortens it for those records (``interruption.queue``'s
RETRY_VISIBILITY_SECONDS), so a retry happens within the notice and a record that keeps failing reaches the
dead-letter queue after the redrive policy's receives. If this call fails the record still comes back, after
the full visibility timeout, and the queue keeps it long enough for that (``queue.retention_seconds``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

log = logging.getLogger(__name__)

# ChangeMessageVisibilityBatch takes ten entries at a time.
_BATCH = 10


def queue_url(sqs: Any, queue_arn: str) -> str | None:
    """The URL of the queue ``arn:<partition>:sqs:<region>:<account>:<name>`` at the client's endpoint (SQS's
    ``https://sqs.<region>.<domain>/<account>/<name>``, or sim's); None for anything else."""
    parts = queue_arn.split(":")
    if len(parts) != 6 or parts[0] != "arn" or parts[2] != "sqs" or not parts[4] or not parts[5]:
        return None
    return f"{str(sqs.meta.endpoint_url).rstrip('/')}/{parts[4]}/{parts[5]}"


def retry_soon(sqs: Any, receipts: Iterable[tuple[str, str, str]], seconds: int) -> list[str]:
    """Make each ``(message_id, queue_arn, receipt_handle)`` visible again in ``seconds``; the message ids done.
    Never raises: a record not done comes back after the queue's own visibility timeout."""
    by_queue: dict[str, list[tuple[str, str]]] = {}
    for message_id, arn, handle in receipts:
        url = queue_url(sqs, arn) if handle else None
        if url is None:
            log.warning("a failed record cannot be made visible again soon: no queue ARN or receipt handle",
                        extra={"message_id": message_id})
            continue
        by_queue.setdefault(url, []).append((message_id, handle))
    done: list[str] = []
    for url, entries in by_queue.items():
        for start in range(0, len(entries), _BATCH):
            done += _change(sqs, url, entries[start:start + _BATCH], seconds)
    return done


def _change(sqs: Any, url: str, entries: list[tuple[str, str]], seconds: int) -> list[str]:
    ids = {str(i): message_id for i, (message_id, _) in enumerate(entries)}
    try:
        answer = sqs.change_message_visibility_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "ReceiptHandle": handle, "VisibilityTimeout": seconds}
            for i, (_, handle) in enumerate(entries)])
    except Exception:
        log.exception("making failed records visible again soon failed: they return after the visibility timeout",
                      extra={"message_ids": list(ids.values())})
        return []
    for failed in answer.get("Failed") or []:
        log.warning("a failed record was not made visible again soon", extra={
            "message_id": ids.get(str(failed.get("Id")), ""), "code": failed.get("Code"),
            "reason": failed.get("Message")})
    return [ids[str(ok["Id"])] for ok in answer.get("Successful") or [] if str(ok.get("Id")) in ids]


__all__ = ["queue_url", "retry_soon"]
