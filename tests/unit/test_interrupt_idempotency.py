"""Each event id is acted on once, recorded in a table shaped like the shared one (pk, TTL on expiresAt)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from nodescale.aws import idempotency
from tests import fakes

# moto, sim/, a local server or a subprocess: the adapter suite, not `make test-fast`.
pytestmark = pytest.mark.adapter

TABLE = "nodescale-demo-cluster"


@pytest.fixture
def dynamodb() -> Iterator[Any]:
    with fakes.state_table(TABLE) as client:
        yield client


@dataclass(frozen=True)
class Doc:
    """A summary as the use-case hands it over: stored as its JSON document."""

    fields: dict

    def to_json(self) -> dict:
        return dict(self.fields)


def counting(result: dict | None = None, fail: bool = False):
    calls: list[dict] = []

    def run(event: dict) -> Doc:
        calls.append(event)
        if fail:
            raise ConnectionError("API server unavailable")
        return Doc(result or {"eventId": event["id"], "run": len(calls)})

    return run, calls


def test_the_same_event_three_times_runs_once_and_answers_the_first_summary(dynamodb: Any) -> None:
    run, calls = counting()
    event = {"id": "8a2f3c1e-1111", "detail-type": "EC2 Spot Instance Interruption Warning"}
    answers = [idempotency.once_per_event(run, dict(event), table=TABLE, dynamodb=dynamodb) for _ in range(3)]
    assert len(calls) == 1
    # The first run answers its own summary; the repeats the stored document, marked as such (issue #17: replay
    # names duplicates; #29.3: a Repeat keeps the stored document as it is).
    assert answers[0] == Doc({"eventId": "8a2f3c1e-1111", "run": 1})
    assert answers[1:] == [idempotency.Repeat({"eventId": "8a2f3c1e-1111", "run": 1})] * 2
    assert [a.to_json() for a in answers[1:]] == [{"eventId": "8a2f3c1e-1111", "run": 1, "duplicate": True}] * 2
    other = idempotency.once_per_event(run, {**event, "id": "another"}, table=TABLE, dynamodb=dynamodb)
    assert other == Doc({"eventId": "another", "run": 2})


def test_records_use_the_tables_key_and_expire_through_its_ttl_attribute(dynamodb: Any) -> None:
    run, _ = counting()
    idempotency.once_per_event(run, {"id": "e-1"}, table=TABLE, dynamodb=dynamodb)
    (item,) = dynamodb.scan(TableName=TABLE)["Items"]
    assert item["pk"]["S"].startswith("interruption#")
    expires = int(item["expiresAt"]["N"])
    assert time.time() + idempotency.EXPIRES_AFTER_SECONDS - 60 < expires <= time.time() + idempotency.EXPIRES_AFTER_SECONDS
    assert item["status"]["S"] == "COMPLETED"


def test_a_failed_run_is_forgotten_so_the_retry_runs_again(dynamodb: Any) -> None:
    failing, failed = counting(fail=True)
    with pytest.raises(ConnectionError):
        idempotency.once_per_event(failing, {"id": "e-2"}, table=TABLE, dynamodb=dynamodb)
    run, calls = counting()
    assert idempotency.once_per_event(run, {"id": "e-2"}, table=TABLE, dynamodb=dynamodb).to_json()["run"] == 1
    assert len(failed) == 1 and len(calls) == 1


def test_without_a_table_or_an_event_id_every_delivery_runs(dynamodb: Any) -> None:
    run, calls = counting({"ok": True})
    for _ in range(2):
        idempotency.once_per_event(run, {"id": "e-3"}, table=None, dynamodb=None)
        idempotency.once_per_event(run, {"detail-type": "x"}, table=TABLE, dynamodb=dynamodb)
    assert len(calls) == 4
    assert dynamodb.scan(TableName=TABLE)["Items"] == []
