"""The RBAC custom resource's handler and use-case: clear errors, a retried access entry, a cluster already gone."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from nodescale.k8s import manifests
from nodescale.k8s.client import KubeConfigError
from nodescale.usecases import rbac

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "infra" / "manifests" / "rbac.yaml"
CONTEXT = SimpleNamespace(function_name="rbac", memory_limit_in_mb=256, aws_request_id="req-1",
                          invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:rbac")


def handler_module() -> Any:
    spec = importlib.util.spec_from_file_location("rbac_handler", ROOT / "lambdas" / "rbac" / "handler.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("event", "message"),
    [
        ({"RequestType": "Create", "ResourceProperties": {}}, r"ResourceProperties\.ClusterName is required"),
        ({"RequestType": "Replace", "ResourceProperties": {"ClusterName": "c"}}, r"RequestType='Replace'"),
        ("not an event", "expected a CloudFormation custom resource event"),
    ],
)
def test_events_it_cannot_act_on_fail_with_the_field_named(event: Any, message: str) -> None:
    module = handler_module()
    with pytest.raises(module.RbacEventError, match=message):
        module.handler(event, CONTEXT)


def test_the_handler_applies_the_repositorys_manifest_in_a_checkout() -> None:
    assert handler_module().MANIFEST.resolve() == MANIFEST.resolve()


def test_a_delete_when_the_cluster_is_gone_succeeds(monkeypatch: pytest.MonkeyPatch) -> None:
    module = handler_module()
    monkeypatch.setenv("CLUSTER_NAME", "c")
    monkeypatch.setenv("AWS_REGION", "us-east-1")

    def gone(settings: Any) -> Any:
        raise KubeConfigError("eks:DescribeCluster for cluster 'c' in us-east-1 failed: ResourceNotFoundException")

    monkeypatch.setattr(module, "build_api_client", gone)
    answer = module.handler({"RequestType": "Delete", "ResourceProperties": {"ClusterName": "c"},
                             "PhysicalResourceId": "nodescale-rbac-c"}, CONTEXT)
    assert answer == {"PhysicalResourceId": "nodescale-rbac-c", "Data": {"Objects": ""}}
    with pytest.raises(KubeConfigError):
        module.handler({"RequestType": "Create", "ResourceProperties": {"ClusterName": "c"}}, CONTEXT)


def test_a_refusal_is_retried_while_the_access_entry_propagates(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = [ApiException(status=401), ApiException(status=403)]
    calls: list[str] = []

    def apply(api: Any, doc: dict[str, Any]) -> dict[str, Any]:
        calls.append(manifests.describe(doc))
        if answers:
            raise answers.pop(0)
        return doc

    monkeypatch.setattr(manifests, "apply", apply)
    slept: list[float] = []
    applied = rbac.apply(object(), rbac.load(MANIFEST), wait_seconds=60, sleep=slept.append)
    assert applied == ["ClusterRole/nodescale", "ClusterRoleBinding/nodescale"]
    assert calls == ["ClusterRole/nodescale"] * 3 + ["ClusterRoleBinding/nodescale"] and len(slept) == 2


def test_other_errors_and_refusals_past_the_wait_fail_with_the_object_named(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(api: Any, doc: dict[str, Any]) -> Any:
        raise ApiException(status=422, reason="Unprocessable Entity")

    monkeypatch.setattr(manifests, "apply", refuse)
    with pytest.raises(rbac.RbacError, match=r"apply ClusterRole/nodescale: 422"):
        rbac.apply(object(), rbac.load(MANIFEST), wait_seconds=60, sleep=lambda _: None)
