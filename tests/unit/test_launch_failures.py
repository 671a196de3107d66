"""The per-pool record of the last launch failure (#28.1): what status and explain read in another process."""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws

from nodescale.aws import launchfailures
from nodescale.aws.launchfailures import TTL_SECONDS, LaunchFailure
from nodescale.names import TABLE_KEY, TABLE_TTL

# moto, sim/, a local server or a subprocess: the adapter suite, not `make test-fast`.
pytestmark = pytest.mark.adapter

DENIED = LaunchFailure("web", "AccessDenied", "role 'X': cannot list its instance profiles (AccessDenied)", 1000.0)


@pytest.fixture
def table() -> Iterator[tuple[object, str]]:
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        ddb.create_table(TableName="t", KeySchema=[{"AttributeName": TABLE_KEY, "KeyType": "HASH"}],
                         AttributeDefinitions=[{"AttributeName": TABLE_KEY, "AttributeType": "S"}],
                         BillingMode="PAY_PER_REQUEST")
        yield ddb, "t"


@pytest.fixture(autouse=True)
def _forget() -> Iterator[None]:
    launchfailures.clear_local()
    yield
    launchfailures.clear_local()


@pytest.mark.parametrize("where", ["table", "memory"])
def test_a_failure_is_read_back_until_the_pool_launches_or_it_ages_out(table: tuple[object, str], where: str) -> None:
    ddb, name = table if where == "table" else (None, None)
    launchfailures.record(ddb, name, DENIED)
    assert launchfailures.failing(ddb, name, ["web", "other"], now=1010.0) == {"web": DENIED}
    assert launchfailures.failing(ddb, name, ["web"], now=1000.0 + TTL_SECONDS) == {}
    assert DENIED.describe() == f"launch failing: AccessDenied: {DENIED.message}"
    launchfailures.clear(ddb, name, "web")
    assert launchfailures.failing(ddb, name, ["web"], now=1010.0) == {}


def test_the_item_expires_by_the_tables_ttl(table: tuple[object, str]) -> None:
    ddb, name = table
    launchfailures.record(ddb, name, DENIED)
    item = ddb.get_item(TableName=name, Key={TABLE_KEY: {"S": "launchfailure#web"}})["Item"]  # type: ignore[attr-defined]
    assert item[TABLE_TTL]["N"] == str(int(1000 + TTL_SECONDS))
    assert DENIED.to_dict() == {"nodePool": "web", "code": "AccessDenied", "message": DENIED.message,
                                "since": "1970-01-01T00:16:40Z"}
