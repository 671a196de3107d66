"""Hostile SQS records at the extremes of nesting, size and number length: each one acts or is dropped with its
reason, quickly, and never touches the other records of its batch (issue #27's acceptance, for the SQS batch
reader and the EventBridge event parser; #27.4)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodescale.interruption import events, queue

EVENTS = Path(__file__).parent.parent / "fixtures" / "events"
TEMPLATE = json.loads((EVENTS / "sqs" / "sqs-batch.json").read_text())["Records"][0]
WARNING = json.loads((EVENTS / "spot-interruption-warning.json").read_text())
ACCOUNT, REGION = WARNING["account"], WARNING["region"]

# JSON text a hostile sender could put in a body: nesting up to far past any recursion limit, numbers up to far
# past Python's 4,300-digit limit, strings up to the queue's size.
nested = st.builds(lambda depth, open_, close: open_ * depth + close * depth,
                   st.integers(0, 200_000), st.sampled_from(["[", '{"a":']), st.just("")).map(
    lambda text: text + ("]" * text.count("[") if "[" in text else "1" + "}" * text.count("{")))
long_number = st.builds(lambda digits, sign: '{"n": ' + sign + "9" * digits + "}",
                        st.integers(1, 100_000), st.sampled_from(["", "-", "0."]))
big_string = st.builds(lambda size: json.dumps({"s": "x" * size}), st.integers(0, 400_000))
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=50),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5),
    max_leaves=50,
)
# A spot warning with any field replaced by any JSON value, any time string, or any nesting inside detail.
FIELDS = ("id", "detail-type", "source", "account", "region", "time", "resources", "detail")


def mangled_warning(field: str, value: Any) -> str:
    return json.dumps({**WARNING, field: value})


def deep_detail(depth: int) -> str:
    detail: Any = {"instance-id": "i-0123456789abcdef0"}
    for _ in range(depth):
        detail = {"x": detail}
    return json.dumps({**WARNING, "detail": detail})


hostile_body = st.one_of(
    nested, long_number, big_string,
    st.builds(mangled_warning, st.sampled_from(FIELDS), json_values),
    st.builds(lambda t: mangled_warning("time", t), st.text(max_size=80)
              | st.sampled_from(["9999-12-31T23:59:59Z", "0001-01-01T00:00:00+14:00",
                                 "Sat, 21 Nov 99999999999999999999 15:10:09 GMT"])),
    st.builds(lambda v: json.dumps({**WARNING, "detail": {**WARNING["detail"], "instance-id": v}}), json_values),
    st.builds(deep_detail, st.integers(0, 900)),
)


def record(message_id: str, body: str) -> dict[str, Any]:
    return {**TEMPLATE, "messageId": message_id, "body": body}


def outcome(message: queue.Message) -> tuple[str, Any]:
    """What one record comes to: dropped with its reason, ignored with its reason, or intents."""
    if message.event is None:
        return "dropped", message.dropped
    parsed = events.read(message.event, ACCOUNT, REGION).result
    if isinstance(parsed, events.Ignored):
        return "ignored", parsed.reason
    return "acts", parsed


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(hostile_body, min_size=1, max_size=4), st.integers(0, 4))
def test_every_hostile_record_acts_or_is_dropped_with_a_reason_in_time_and_alone(bodies: list[str], at: int) -> None:
    """#27.4 and the acceptance's property: a batch of hostile bodies with a valid spot warning among them."""
    warning = record("warning", json.dumps(WARNING))
    records = [record(f"m{i}", body) for i, body in enumerate(bodies)]
    records.insert(min(at, len(records)), warning)
    for rec in records:
        started = time.monotonic()
        kind, what = outcome(queue.read_record(rec))
        assert time.monotonic() - started < 1.0, (kind, rec["body"][:200])
        assert kind == "acts" or (isinstance(what, str) and what and len(what) < 400), (kind, what)
    # The warning acts exactly as it does alone, whatever is beside it.
    alone = outcome(queue.read_record(warning))
    batch = {rec["messageId"]: outcome(m) for rec, m in zip(records, queue.read_batch({"Records": records}),
                                                          strict=True)}
    assert alone[0] == "acts" and batch["warning"] == alone
