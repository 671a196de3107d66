"""The launch lease on moto's DynamoDB (#27.7): renewed while held, on the project's clock; a holder that
lost it (frozen past its TTL while another took it) cannot renew it and its check refuses; a failed
renewal is a refusal too. Without a table it stays this process's own lock."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws

from nodescale import clock
from nodescale.aws import leases

# moto, sim/, a local server or a subprocess: the adapter suite, not `make test-fast`.
pytestmark = pytest.mark.adapter

TABLE = "nodescale-leases-test"
START = 1_700_000_000.0


class FastClock:
    """The project's clock running ``speed`` times faster than real time (as sim's can), pushed by ``jump``."""

    def __init__(self, speed: float) -> None:
        self.speed = speed
        self.real = time.monotonic()
        self.jumped = 0.0

    def epoch(self) -> float:
        return START + (time.monotonic() - self.real) * self.speed + self.jumped

    def jump(self, seconds: float) -> None:
        self.jumped += seconds


@pytest.fixture
def dynamodb() -> Iterator[object]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(
            TableName=TABLE, KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST",
        )
        yield client


def fast_clock(monkeypatch: pytest.MonkeyPatch, speed: float) -> FastClock:
    fake = FastClock(speed)
    monkeypatch.setattr(clock, "epoch", fake.epoch)
    return fake


def owner_of(dynamodb: object, name: str = "launch") -> str | None:
    item = dynamodb.get_item(TableName=TABLE, Key={"pk": {"S": leases.PREFIX + name}}).get("Item")  # type: ignore[attr-defined]
    return item["owner"]["S"] if item else None


def test_a_slow_holder_keeps_its_lease_past_the_ttl(dynamodb: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """#27.7: the lease is renewed while its block runs, on the project's clock (here 60 times real time,
    as sim's may run): a holder slower than three TTLs still holds it and another invocation cannot take
    it. Before, the 60 s TTL was never renewed and the second invocation took the lease."""
    fast_clock(monkeypatch, speed=60.0)
    with leases.hold(dynamodb, TABLE, "launch", ttl_seconds=60) as mine:
        time.sleep(3.0)  # 180 s on the clock
        with pytest.raises(leases.LeaseBusy), leases.hold(dynamodb, TABLE, "launch", wait_seconds=0, ttl_seconds=60):
            pass
        assert mine.renewals >= 3 and mine.lost is None
        mine.check()
        assert owner_of(dynamodb) == mine.owner
    assert owner_of(dynamodb) is None
    with leases.hold(dynamodb, TABLE, "launch", wait_seconds=0) as next_one:
        assert owner_of(dynamodb) == next_one.owner


def test_a_holder_frozen_past_its_ttl_cannot_act_once_another_took_the_lease(
    dynamodb: object, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """#27.7: a frozen process renews nothing; once its lease expired and another invocation took it, its
    check (the fence before each CreateFleet) refuses and its renewal never succeeds again, even later;
    its release leaves the new holder's lease alone."""
    fake = fast_clock(monkeypatch, speed=1.0)
    frozen = leases.hold(dynamodb, TABLE, "launch", ttl_seconds=60)
    mine = frozen.__enter__()
    mine.stop()  # frozen: its heartbeat does not run
    fake.jump(61)
    with leases.hold(dynamodb, TABLE, "launch", wait_seconds=0, ttl_seconds=60) as theirs:
        with pytest.raises(leases.LeaseLost, match="taken by another invocation"):
            mine.check()
        assert "taken by another invocation" in (mine.lost or "")
        with pytest.raises(leases.LeaseLost):
            mine.renew()
        frozen.__exit__(None, None, None)
        assert owner_of(dynamodb) == theirs.owner
        theirs.check()


def test_a_lease_that_expired_untaken_is_still_its_holders(dynamodb: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """No one took it, so no one launched under it: renewing it is safe (the condition is the owner)."""
    fake = fast_clock(monkeypatch, speed=1.0)
    with leases.hold(dynamodb, TABLE, "launch", ttl_seconds=60) as mine:
        mine.stop()
        fake.jump(600)
        mine.check()
        with pytest.raises(leases.LeaseBusy), leases.hold(dynamodb, TABLE, "launch", wait_seconds=0):
            pass


def test_a_failed_renewal_refuses_to_act(dynamodb: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """#27.7: a holder that cannot show it still holds the lease (the table does not answer) must not launch."""
    fast_clock(monkeypatch, speed=1.0)
    with leases.hold(dynamodb, TABLE, "launch") as mine:
        dynamodb.delete_table(TableName=TABLE)  # type: ignore[attr-defined]
        with pytest.raises(leases.LeaseLost, match=r"could not be renewed \(ResourceNotFoundException\)"):
            mine.check()


def test_without_a_table_the_lease_is_this_process_lock() -> None:
    """The CLI/local case is unchanged: an in-process lock, nothing to renew, nothing to lose."""
    with leases.hold(None, None, "local-test") as mine:
        mine.check()
        busy: list[Exception] = []

        def other() -> None:
            try:
                with leases.hold(None, None, "local-test", wait_seconds=0.1):
                    pass
            except leases.LeaseBusy as exc:
                busy.append(exc)

        t = threading.Thread(target=other)
        t.start()
        t.join(5)
        assert len(busy) == 1
    with leases.hold(None, None, "local-test", wait_seconds=0.1):
        pass


def test_a_lease_needs_a_positive_ttl(dynamodb: object) -> None:
    with pytest.raises(ValueError, match="ttl_seconds=0"), leases.hold(dynamodb, TABLE, "launch", ttl_seconds=0):
        pass
