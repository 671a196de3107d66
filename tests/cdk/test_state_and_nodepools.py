"""The state table and the NodePool parameters."""

from __future__ import annotations

from tests.cdk.conftest import FIXTURES, Synth


def test_table_on_demand_with_ttl_pk_and_pitr(default: Synth) -> None:
    _, table = default.one("AWS::DynamoDB::Table")
    props = table["Properties"]
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["KeySchema"] == [{"AttributeName": "pk", "KeyType": "HASH"}]
    assert props["TimeToLiveSpecification"] == {"AttributeName": "expiresAt", "Enabled": True}
    assert props["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
    assert props["TableName"] == "nodescale-demo-cluster-state"
    # Only short-lived records: removing the stack leaves nothing behind.
    assert table["DeletionPolicy"] == "Delete"


def test_no_nodepool_parameters_unless_files_are_given(default: Synth) -> None:
    assert default.resources("AWS::SSM::Parameter") == {}


def test_each_nodepool_file_becomes_one_parameter_under_the_path(full: Synth) -> None:
    parameters = {p["Properties"]["Name"]: p["Properties"] for p in full.resources("AWS::SSM::Parameter").values()}
    assert sorted(parameters) == ["/nodescale/full-cluster/nodepools/default", "/nodescale/full-cluster/nodepools/windows"]
    assert parameters["/nodescale/full-cluster/nodepools/default"]["Value"] == (FIXTURES / "default.yaml").read_text()
    assert parameters["/nodescale/full-cluster/nodepools/windows"]["Value"] == (FIXTURES / "windows.yaml").read_text()
    assert {p["Type"] for p in parameters.values()} == {"String"}
