"""sim's API validates built-in kinds as kube-apiserver does (#28, Kubernetes: "objects are not validated").

Driven through the official `kubernetes` client as the administrator: a refusal is a 422 `Invalid`
Status whose `details.causes` name each field, reason and message as kube-apiserver's
`apierrors.NewInvalid` does; nothing is stored.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from tests.integration.conftest_kube import KubeHarness, running_harness

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def kube() -> Iterator[KubeHarness]:
    yield from running_harness()


def _container(**fields: Any) -> dict[str, Any]:
    return {"name": "app", "image": "nginx", **fields}


def _pod(name: str = "p", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"containers": [_container()], **spec}}


def _refused(create: Callable[[], Any], status: int = 422) -> dict[str, Any]:
    with pytest.raises(ApiException) as refused:
        create()
    assert refused.value.status == status, refused.value.body
    return json.loads(refused.value.body)


def _causes(body: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(c["field"], c["reason"], c["message"]) for c in body["details"]["causes"]]


def test_a_negative_cpu_request_is_invalid_and_not_stored(kube: KubeHarness) -> None:
    """#28 (Kubernetes, validation): a pod asking for `cpu: "-1"` is refused as kube-apiserver refuses it."""
    ns = kube.namespace()
    body = _refused(lambda: kube.core.create_namespaced_pod(
        ns, _pod("neg", containers=[_container(resources={"requests": {"cpu": "-1"}})])))
    assert body["reason"] == "Invalid"
    assert body["message"] == ('Pod "neg" is invalid: spec.containers[0].resources.requests[cpu]: Invalid value: '
                               '"-1": must be greater than or equal to 0')
    assert body["details"]["name"] == "neg" and body["details"]["kind"] == "Pod"
    assert _causes(body) == [("spec.containers[0].resources.requests[cpu]", "FieldValueInvalid",
                              'Invalid value: "-1": must be greater than or equal to 0')]
    assert kube.core.list_namespaced_pod(ns).items == []


def test_requests_above_limits_and_malformed_quantities(kube: KubeHarness) -> None:
    """#28 (Kubernetes, validation): requests > limits is 422; a quantity that does not parse is the
    decoder's 400."""
    ns = kube.namespace()
    over = _container(resources={"requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}})
    body = _refused(lambda: kube.core.create_namespaced_pod(ns, _pod("over", containers=[over])))
    assert _causes(body) == [("spec.containers[0].resources.requests", "FieldValueInvalid",
                              'Invalid value: "2Gi": must be less than or equal to memory limit of 1Gi')]
    garbled = _container(resources={"requests": {"cpu": "lots"}})
    body = _refused(lambda: kube.core.create_namespaced_pod(ns, _pod("garbled", containers=[garbled])), 400)
    assert body["reason"] == "BadRequest" and "quantities must match the regular expression" in body["message"]


def test_every_problem_of_a_pod_is_a_cause(kube: KubeHarness) -> None:
    """#28 (Kubernetes, validation): container names unique and DNS labels, image required, ports in
    range, restartPolicy and toleration enums, label syntax: one cause each, in one 422."""
    ns = kube.namespace()
    pod = {
        "metadata": {"name": "many", "labels": {"bad key!": "v", "ok": "-bad-"}},
        "spec": {
            "containers": [_container(ports=[{"containerPort": 70000}]), {"name": "app", "image": ""},
                           {"name": "Bad_Name", "image": "x"}],
            "restartPolicy": "Sometimes",
            "tolerations": [{"key": "k", "operator": "Exists", "value": "v", "effect": "NoWhere"}],
        },
    }
    body = _refused(lambda: kube.core.create_namespaced_pod(ns, pod))
    fields = {(field, reason) for field, reason, _ in _causes(body)}
    assert fields == {
        ("metadata.labels", "FieldValueInvalid"),
        ("metadata.labels[ok]", "FieldValueInvalid"),
        ("spec.containers[0].ports[0].containerPort", "FieldValueInvalid"),
        ("spec.containers[1].name", "FieldValueDuplicate"),
        ("spec.containers[1].image", "FieldValueRequired"),
        ("spec.containers[2].name", "FieldValueInvalid"),
        ("spec.restartPolicy", "FieldValueNotSupported"),
        ("spec.tolerations[0].operator", "FieldValueInvalid"),
        ("spec.tolerations[0].effect", "FieldValueNotSupported"),
    }
    assert ('spec.restartPolicy', 'FieldValueNotSupported',
            'Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"') in _causes(body)
    assert body["message"].startswith('Pod "many" is invalid: [')


def test_annotations_over_256_kib_are_too_long(kube: KubeHarness) -> None:
    """#28 (Kubernetes, validation): apimachinery's TotalAnnotationSizeLimitB, on create and on patch."""
    ns = kube.namespace()
    big = {"metadata": {"name": "big", "annotations": {"a": "x" * (256 * 1024)}}}
    body = _refused(lambda: kube.core.create_namespaced_config_map(ns, big))
    assert _causes(body) == [("metadata.annotations", "FieldValueTooLong", "Too long: must have at most 262144 bytes")]
    kube.core.create_namespaced_config_map(ns, {"metadata": {"name": "small", "annotations": {"a": "x"}}})
    _refused(lambda: kube.core.patch_namespaced_config_map(
        "small", ns, {"metadata": {"annotations": {"a": "x" * (256 * 1024)}}}))
    assert kube.core.read_namespaced_config_map("small", ns).metadata.annotations == {"a": "x"}


def test_node_taints_need_a_known_effect(kube: KubeHarness) -> None:
    """#28 (Kubernetes, validation): validateNodeTaints, on create and on a patch (as a cordon adds taints)."""
    body = _refused(lambda: kube.core.create_node(
        {"metadata": {"name": "tainted"}, "spec": {"taints": [{"key": "k", "effect": "NoWay"}]}}))
    assert _causes(body) == [("spec.taints[0].effect", "FieldValueNotSupported",
                              'Unsupported value: "NoWay": supported values: "NoSchedule", "PreferNoSchedule", '
                              '"NoExecute"')]
    kube.core.create_node({"metadata": {"name": "plain-v"}})
    body = _refused(lambda: kube.core.patch_node("plain-v", {"spec": {"taints": [{"key": "k"}]}}))
    assert _causes(body) == [("spec.taints[0].effect", "FieldValueRequired", "Required value")]
    kube.core.delete_node("plain-v")


def test_workloads_need_a_selector_matching_their_template(kube: KubeHarness) -> None:
    """#28 (Kubernetes, validation): apps' ValidateDeploymentSpec: selector matches the template's
    labels, a template restarts Always; the group is in the message."""
    ns = kube.namespace()
    deployment = {
        "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "other"}},
                              "spec": {"containers": [_container()], "restartPolicy": "Never"}}},
    }
    body = _refused(lambda: kube.apps.create_namespaced_deployment(ns, deployment))
    assert body["details"]["group"] == "apps"
    assert body["message"].startswith('Deployment.apps "web" is invalid: [')
    assert {(f, r) for f, r, _ in _causes(body)} == {
        ("spec.template.metadata.labels", "FieldValueInvalid"),
        ("spec.template.spec.restartPolicy", "FieldValueNotSupported"),
    }


def test_pdb_cannot_set_both_min_available_and_max_unavailable(kube: KubeHarness) -> None:
    """#28 (Kubernetes, validation): policy's ValidatePodDisruptionBudgetSpec."""
    ns = kube.namespace()
    pdb = {"metadata": {"name": "both"},
           "spec": {"minAvailable": 1, "maxUnavailable": "150%", "selector": {"matchLabels": {"app": "a"}}}}
    body = _refused(lambda: kube.policy.create_namespaced_pod_disruption_budget(ns, pdb))
    assert [(f, r) for f, r, _ in _causes(body)] == [("spec", "FieldValueInvalid"),
                                                     ("spec.maxUnavailable", "FieldValueInvalid")]


def test_names_follow_each_kinds_rule(kube: KubeHarness) -> None:
    """#28 (Kubernetes, validation): a namespace's name is a DNS label, a service's a DNS-1035 label."""
    body = _refused(lambda: kube.core.create_namespace({"metadata": {"name": "a.b"}}))
    assert [f for f, _, _ in _causes(body)] == ["metadata.name"]
    ns = kube.namespace()
    service = {"metadata": {"name": "1svc"}, "spec": {"ports": [{"port": 80}]}}
    body = _refused(lambda: kube.core.create_namespaced_service(ns, service))
    assert [f for f, _, _ in _causes(body)] == ["metadata.name"]


def test_events_of_cluster_scoped_objects_belong_in_default(kube: KubeHarness) -> None:
    """#28 (Kubernetes, validation): legacyValidateEvent: an event about a Node outside "default" is refused."""
    ns = kube.namespace()
    event = {"metadata": {"name": "n.1"}, "involvedObject": {"kind": "Node", "name": "n"}, "reason": "R",
             "message": "m", "type": "Normal"}
    body = _refused(lambda: kube.core.create_namespaced_event(ns, event))
    assert _causes(body) == [("involvedObject.namespace", "FieldValueInvalid",
                              'Invalid value: "": does not match event.namespace')]
    kube.core.create_namespaced_event("default", {**event, "metadata": {"name": f"n.{ns}"}})
