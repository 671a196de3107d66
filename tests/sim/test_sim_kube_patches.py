"""JSON merge, JSON (RFC 6902) and strategic merge patches of the local Kubernetes API."""

from __future__ import annotations

import pytest

from sim.kube.errors import ApiError
from sim.kube.patches import apply_patch, json_patch, merge_patch, strategic_merge_patch

POD = {
    "metadata": {"name": "p", "labels": {"a": "1"}, "finalizers": ["x/one"]},
    "spec": {
        "containers": [
            {"name": "app", "image": "app:1", "env": [{"name": "A", "value": "1"}]},
            {"name": "sidecar", "image": "side:1"},
        ],
        "tolerations": [{"key": "t1", "operator": "Exists"}],
    },
    "status": {"conditions": [{"type": "Ready", "status": "False"}, {"type": "PodScheduled", "status": "True"}]},
}


def test_merge_patch_merges_maps_and_deletes_nulls() -> None:
    result = merge_patch(POD, {"metadata": {"labels": {"a": None, "b": "2"}}, "spec": {"tolerations": []}})
    assert result["metadata"]["labels"] == {"b": "2"}
    assert result["spec"]["tolerations"] == []
    assert POD["metadata"]["labels"] == {"a": "1"}  # the original is untouched


def test_json_patch_operations() -> None:
    result = json_patch(POD, [
        {"op": "add", "path": "/metadata/labels/b~1c", "value": "2"},
        {"op": "replace", "path": "/spec/containers/0/image", "value": "app:2"},
        {"op": "remove", "path": "/spec/containers/1"},
        {"op": "add", "path": "/metadata/finalizers/-", "value": "x/two"},
        {"op": "test", "path": "/metadata/name", "value": "p"},
        {"op": "copy", "from": "/metadata/name", "path": "/metadata/annotations"},
        {"op": "move", "from": "/metadata/annotations", "path": "/metadata/generateName"},
    ])
    assert result["metadata"]["labels"] == {"a": "1", "b/c": "2"}
    assert [c["image"] for c in result["spec"]["containers"]] == ["app:2"]
    assert result["metadata"]["finalizers"] == ["x/one", "x/two"]
    assert result["metadata"]["generateName"] == "p" and "annotations" not in result["metadata"]


@pytest.mark.parametrize("ops", [
    [{"op": "test", "path": "/metadata/name", "value": "other"}],
    [{"op": "remove", "path": "/metadata/missing"}],
    [{"op": "replace", "path": "/spec/nothing", "value": 1}],
    [{"op": "jump", "path": "/a"}],
])
def test_json_patch_failures_are_invalid(ops: list) -> None:
    with pytest.raises(ApiError) as excinfo:
        json_patch(POD, ops)
    assert excinfo.value.status == 422


def test_strategic_merge_merges_lists_by_their_keys() -> None:
    result = strategic_merge_patch(POD, {
        "spec": {"containers": [{"name": "app", "image": "app:2", "env": [{"name": "B", "value": "2"}]}]},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        "metadata": {"finalizers": ["x/two"]},
    })
    app = result["spec"]["containers"][0]
    assert [c["name"] for c in result["spec"]["containers"]] == ["app", "sidecar"]
    assert app["image"] == "app:2" and [e["name"] for e in app["env"]] == ["A", "B"]
    assert {c["type"]: c["status"] for c in result["status"]["conditions"]} == {"Ready": "True", "PodScheduled": "True"}
    assert result["metadata"]["finalizers"] == ["x/one", "x/two"]


def test_strategic_merge_replaces_atomic_lists_like_taints_and_tolerations() -> None:
    node = {"spec": {"taints": [{"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "NoSchedule"}]}}
    result = strategic_merge_patch(node, {"spec": {"taints": [{"key": "c", "effect": "NoExecute"}]}})
    assert result["spec"]["taints"] == [{"key": "c", "effect": "NoExecute"}]
    result = strategic_merge_patch(POD, {"spec": {"tolerations": [{"key": "t2", "operator": "Exists"}]}})
    assert result["spec"]["tolerations"] == [{"key": "t2", "operator": "Exists"}]


def test_strategic_merge_directives() -> None:
    result = strategic_merge_patch(POD, {
        "spec": {"containers": [{"name": "sidecar", "$patch": "delete"}]},
        "metadata": {"labels": {"$patch": "replace", "only": "this"}},
        "$setElementOrder/containers": [{"name": "app"}],
    })
    assert [c["name"] for c in result["spec"]["containers"]] == ["app"]
    assert result["metadata"]["labels"] == {"only": "this"}
    result = strategic_merge_patch(POD, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["x/one"]}})
    assert result["metadata"]["finalizers"] == []
    result = strategic_merge_patch(POD, {"status": {"$patch": "delete"}})
    assert "status" not in result
    result = strategic_merge_patch(POD, {"spec": {"containers": [{"$patch": "replace"}, {"name": "new", "image": "n"}]}})
    assert result["spec"]["containers"] == [{"name": "new", "image": "n"}]


def test_apply_patch_rejects_unknown_types() -> None:
    with pytest.raises(ApiError) as excinfo:
        apply_patch(POD, {}, "xml")
    assert excinfo.value.status == 415
