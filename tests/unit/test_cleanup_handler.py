"""The cleanup custom resource's handler: clear errors for events it cannot act on."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONTEXT = SimpleNamespace(function_name="cleanup", memory_limit_in_mb=512, aws_request_id="req-1",
                          invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:cleanup")


def handler_module() -> Any:
    spec = importlib.util.spec_from_file_location("cleanup_handler", ROOT / "lambdas" / "cleanup" / "handler.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("event", "message"),
    [
        ({"RequestType": "Delete", "ResourceProperties": {}}, "ResourceProperties.ClusterName is required"),
        ({"RequestType": "Delete", "ResourceProperties": {"ClusterName": "c", "RetainNodes": "maybe"}},
         "RetainNodes='maybe': allowed are 'true', 'false'"),
        ({"RequestType": "Replace", "ResourceProperties": {"ClusterName": "c"}}, "RequestType='Replace'"),
        ("not an event", "expected a CloudFormation custom resource event"),
    ],
)
def test_events_it_cannot_act_on_fail_with_the_field_named(event: Any, message: str) -> None:
    module = handler_module()
    with pytest.raises(module.CleanupEventError, match=message.replace("(", r"\(").replace(")", r"\)")):
        module.handler(event, CONTEXT)


def test_create_names_the_resource_without_touching_anything(monkeypatch: pytest.MonkeyPatch) -> None:
    module = handler_module()
    monkeypatch.setattr(module, "run_cleanup", lambda *a: pytest.fail("Create must not clean up"))
    out = module.handler({"RequestType": "Create", "ResourceProperties": {"ClusterName": "demo"}}, CONTEXT)
    assert out == {"PhysicalResourceId": "nodescale-cleanup-demo"}
    same = module.handler({"RequestType": "Update", "PhysicalResourceId": "x",
                           "ResourceProperties": {"ClusterName": "demo"}}, CONTEXT)
    assert same == {"PhysicalResourceId": "x"}
