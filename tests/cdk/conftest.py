"""One synth per configuration per test session, shared by every CDK test that needs it."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Environment
from aws_cdk.assertions import Template

from infra.app import build
from infra.stack import NodescaleStack

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "1")

FIXTURES = Path(__file__).parent / "fixtures"

# name -> (context, region or None for an environment-agnostic template)
CONFIGURATIONS: dict[str, tuple[dict[str, Any], str | None]] = {
    "default": ({"clusterName": "demo-cluster"}, None),
    "second": ({"clusterName": "other-cluster"}, None),
    "full": (
        {
            "clusterName": "full-cluster",
            "nodePoolFiles": f"{FIXTURES / 'default.yaml'},{FIXTURES / 'windows.yaml'}",
            "nodePoolSources": "ssm,cluster",
            "nodeRoleArn": "arn:aws:iam::111122223333:role/KarpenterNodeRole-full-cluster",
            "instanceProfileName": "KarpenterNodeInstanceProfile-full-cluster",
            "vpcSubnetIds": "subnet-0123456789abcdef0,subnet-0fedcba9876543210",
            "vpcSecurityGroupIds": "sg-0123456789abcdef0",
            "clusterLimits": '{"cpu":"2000","pricePerHour":"50"}',
            "pricePerHourAlarm": "40",
            "alarmEmail": "platform@example.com",
            "retainNodesOnDestroy": "true",
            "logRetentionDays": "7",
            "featureGates": "NodeRepair=true,SpotToSpotConsolidation=true",
        },
        None,
    ),
    "china": ({"clusterName": "cn-cluster", "windows": "true"}, "cn-north-1"),
    # The stack applies the functions' RBAC (a custom resource with its own access entry); once in a VPC.
    "rbac": ({"clusterName": "rbac-cluster", "applyRbac": "true"}, None),
    "rbac-vpc": (
        {
            "clusterName": "rbac-vpc-cluster",
            "applyRbac": "yes",
            "vpcSubnetIds": "subnet-0123456789abcdef0",
            "vpcSecurityGroupIds": "sg-0123456789abcdef0",
        },
        "eu-west-1",
    ),
    # Function sizes set per cluster (issue 18 item 4): one on the command line's form, one as JSON.
    "sized": (
        {
            "clusterName": "sized-cluster",
            "functionMemory": "provisioner=2048,disruption=3008",
            "functionTimeout": {"disruption": 900, "interruption": 120},
        },
        None,
    ),
    # docs/deploy.md's first deploy: the stack's own node role, and a NodePool file whose EC2NodeClass names
    # Karpenter's; -c nodeRoles for node classes that live in the cluster (#28.1).
    "named-roles": (
        {
            "clusterName": "demo-cluster",
            "nodePoolFiles": str(Path(__file__).parents[1] / "fixtures/examples/karpenter-v1/system.yaml"),
            "nodeRoles": "ClusterNodeClassRole,arn:aws:iam::111122223333:role/eks/OtherNodeRole",
        },
        None,
    ),
    # Customer-managed KMS keys (#28.2): SecureString NodePool parameters' key, the account's default EBS key, and
    # the keys the NodePool file's node classes name for their volumes.
    "kms": (
        {
            "clusterName": "kms-cluster",
            "nodePoolFiles": str(FIXTURES / "encrypted.yaml"),
            "nodePoolParameterKey": "arn:aws:kms:us-west-2:111122223333:key/0987dcba-09fe-87dc-65ba-ab0987654321",
            "ebsKmsKey": ["arn:aws:kms:us-west-2:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab",
                          "arn:aws:kms:us-west-2:444455556666:key/mrk-0000abcd12ab34cd56ef1234567890ab"],
        },
        "us-west-2",
    ),
    # An existing alarm topic, and an existing node role given without its instance profile (the stack makes one).
    "topic": (
        {
            "clusterName": "topic-cluster",
            "alarmTopicArn": "arn:aws:sns:us-west-2:111122223333:platform-alarms",
            "nodeRoleArn": "arn:aws:iam::111122223333:role/eks/KarpenterNodeRole-topic-cluster",
        },
        "us-west-2",
    ),
}


@dataclass
class Synth:
    stack: NodescaleStack
    template: Template
    json: dict[str, Any]
    report: dict[str, Any]  # cdk-nag's validation report
    region: str | None  # the stack's region, None for an environment-agnostic template

    def resources(self, type_: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.json["Resources"].items() if v["Type"] == type_}

    def one(self, type_: str) -> tuple[str, dict[str, Any]]:
        found = self.resources(type_)
        assert len(found) == 1, f"expected one {type_}, found {sorted(found)}"
        return next(iter(found.items()))

    def logical_id(self, construct: Any) -> str:
        return self.stack.get_logical_id(construct.node.default_child)


class Synths:
    def __init__(self, outdir: Path) -> None:
        self._outdir = outdir
        self._cache: dict[str, Synth] = {}

    def __call__(self, name: str) -> Synth:
        if name not in self._cache:
            context, region = CONFIGURATIONS[name]
            outdir = self._outdir / name
            # Staging would copy the 40 MB dependencies layer into every assembly; templates are the same.
            app = App(context={**context, "aws:cdk:disable-asset-staging": True}, outdir=str(outdir))
            stack = build(app, env=Environment(region=region) if region else None)
            try:
                app.synth()
            except RuntimeError as exc:
                # cdk-nag findings fail the synth; the template and report are written all the same, so
                # the other tests still run and test_nag says which findings.
                if "ValidationFailed" not in str(exc):
                    raise
            template_json = json.loads((outdir / f"{stack.stack_name}.template.json").read_text())
            report = json.loads((outdir / "validation-report.json").read_text())
            self._cache[name] = Synth(stack, Template.from_json(template_json), template_json, report, region)
        return self._cache[name]


@pytest.fixture(scope="session")
def synths(tmp_path_factory: pytest.TempPathFactory) -> Synths:
    return Synths(tmp_path_factory.mktemp("cdk"))


@pytest.fixture(scope="session")
def default(synths: Synths) -> Synth:
    return synths("default")


@pytest.fixture(scope="session")
def full(synths: Synths) -> Synth:
    return synths("full")


@pytest.fixture(scope="session")
def china(synths: Synths) -> Synth:
    return synths("china")
