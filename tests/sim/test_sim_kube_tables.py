"""The Table conversion behind `kubectl get`: kube-apiserver's columns and cells per kind."""

from __future__ import annotations

from datetime import UTC, datetime

from nodescale.config.nodeclaim_schema import PRINTER_COLUMNS
from sim.kube.tables import human_duration, table, wants_table

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
KUBECTL_ACCEPT = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"


def _columns(result: dict) -> list[tuple[str, int]]:
    return [(c["name"], c["priority"]) for c in result["columnDefinitions"]]


def test_accept_negotiation() -> None:
    assert wants_table(KUBECTL_ACCEPT) == "meta.k8s.io/v1"
    assert wants_table("application/json;as=Table;v=v1beta1;g=meta.k8s.io") == "meta.k8s.io/v1beta1"
    assert wants_table("application/json") is None
    assert wants_table(None) is None
    assert wants_table("application/json, application/json;as=Table;v=v1;g=meta.k8s.io") is None


def test_human_duration_matches_kubes() -> None:
    cases = {0: "0s", 45: "45s", 119: "119s", 200: "3m20s", 180: "3m", 720: "12m", 5 * 3600 + 360: "5h6m",
             20 * 3600: "20h", 3 * 86400 + 4 * 3600: "3d4h", 40 * 86400: "40d", 3 * 365 * 86400: "3y"}
    for seconds, text in cases.items():
        assert human_duration(seconds) == text, seconds


def test_pod_columns_and_cells() -> None:
    pod = {
        "metadata": {"name": "web-1", "namespace": "default", "creationTimestamp": "2026-01-01T11:55:00Z"},
        "spec": {"nodeName": "node-a", "containers": [{"name": "a"}, {"name": "b"}]},
        "status": {"phase": "Running", "podIP": "10.0.0.7", "containerStatuses": [
            {"name": "a", "ready": True, "restartCount": 2}, {"name": "b", "ready": False, "restartCount": 1}]},
    }
    pending = {"metadata": {"name": "web-2", "creationTimestamp": "2026-01-01T12:00:00Z",
                            "deletionTimestamp": "2026-01-01T12:00:00Z"},
               "spec": {"containers": [{"name": "a"}]}, "status": {"phase": "Pending"}}
    result = table("", "Pod", [pod, pending], NOW, {"resourceVersion": "9"})
    assert result["kind"] == "Table" and result["apiVersion"] == "meta.k8s.io/v1"
    assert result["metadata"] == {"resourceVersion": "9"}
    assert _columns(result) == [("Name", 0), ("Ready", 0), ("Status", 0), ("Restarts", 0), ("Age", 0), ("IP", 1),
                                ("Node", 1), ("Nominated Node", 1), ("Readiness Gates", 1)]
    assert result["rows"][0]["cells"] == ["web-1", "1/2", "Running", "3", "5m", "10.0.0.7", "node-a", "<none>", "<none>"]
    assert result["rows"][1]["cells"][:3] == ["web-2", "0/1", "Terminating"]
    assert result["rows"][0]["object"] == {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                                           "metadata": pod["metadata"]}
    assert "object" not in table("", "Pod", [pod], NOW, {}, include_object="None")["rows"][0]


def test_node_columns_status_and_roles() -> None:
    node = {
        "metadata": {"name": "n1", "creationTimestamp": "2026-01-01T10:00:00Z",
                     "labels": {"node-role.kubernetes.io/worker": "", "node-role.kubernetes.io/infra": ""}},
        "spec": {"unschedulable": True},
        "status": {"conditions": [{"type": "Ready", "status": "False"}],
                   "addresses": [{"type": "InternalIP", "address": "10.0.1.2"}],
                   "nodeInfo": {"kubeletVersion": "v1.31.0", "osImage": "AL2023", "kernelVersion": "6.1",
                                "containerRuntimeVersion": "containerd://1.7"}},
    }
    result = table("", "Node", [node], NOW, {})
    assert [name for name, priority in _columns(result) if priority == 0] == ["Name", "Status", "Roles", "Age", "Version"]
    assert [name for name, priority in _columns(result) if priority == 1] == [
        "Internal-IP", "External-IP", "OS-Image", "Kernel-Version", "Container-Runtime"]
    assert result["rows"][0]["cells"] == ["n1", "NotReady,SchedulingDisabled", "infra,worker", "120m", "v1.31.0",
                                          "10.0.1.2", "<none>", "AL2023", "6.1", "containerd://1.7"]


def test_event_and_deployment_and_default_tables() -> None:
    event = {"metadata": {"name": "n1.1"}, "type": "Normal", "reason": "Launched", "message": "launched i-1",
             "involvedObject": {"kind": "Node", "name": "n1"}, "source": {"component": "nodescale"},
             "firstTimestamp": "2026-01-01T11:00:00Z", "lastTimestamp": "2026-01-01T11:59:30Z", "count": 3}
    events = table("", "Event", [event], NOW, {})
    assert [name for name, priority in _columns(events) if priority == 0] == [
        "Last Seen", "Type", "Reason", "Object", "Message"]
    cells = dict(zip([c["name"] for c in events["columnDefinitions"]], events["rows"][0]["cells"], strict=True))
    assert cells["Last Seen"] == "30s" and cells["Object"] == "node/n1" and cells["Count"] == 3
    deployment = {"metadata": {"name": "web", "creationTimestamp": "2026-01-01T11:00:00Z"},
                  "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "web"}},
                           "template": {"spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}},
                  "status": {"readyReplicas": 2, "updatedReplicas": 4, "availableReplicas": 2}}
    deployments = table("apps", "Deployment", [deployment], NOW, {})
    assert _columns(deployments) == [("Name", 0), ("Ready", 0), ("Up-to-date", 0), ("Available", 0), ("Age", 0),
                                     ("Containers", 1), ("Images", 1), ("Selector", 1)]
    assert deployments["rows"][0]["cells"] == ["web", "2/4", 4, 2, "60m", "c", "nginx:1", "app=web"]
    generic = table("karpenter.sh", "NodePool", [{"metadata": {"name": "default"}}], NOW, {})
    assert _columns(generic) == [("Name", 0), ("Age", 0)]
    assert generic["rows"][0]["cells"] == ["default", "<unknown>"]


def test_a_custom_resource_gets_its_crds_printer_columns() -> None:
    """#30.7: kube-apiserver's custom resource table convertor (apiextensions-apiserver tableconvertor): Name, then
    each additionalPrinterColumn's JSONPath evaluated on the object (escaped dots in label keys, a filter over
    conditions); nothing found is an empty (nil) cell; a date column is an age."""
    claim = {"metadata": {"name": "default-ab12c", "creationTimestamp": "2026-01-01T11:00:00Z",
                          "labels": {"node.kubernetes.io/instance-type": "m5.large", "karpenter.sh/capacity-type": "spot",
                                     "topology.kubernetes.io/zone": "us-east-1a", "karpenter.sh/nodepool": "default"}},
             "spec": {"nodeClassRef": {"name": "default"}},
             "status": {"providerID": "aws:///us-east-1a/i-1", "nodeName": "ip-10-0-0-1.ec2.internal",
                        "conditions": [{"type": "Launched", "status": "True"}, {"type": "Ready", "status": "True"}]}}
    launching = {"metadata": {"name": "default-zz999", "creationTimestamp": "2026-01-01T11:59:30Z"}}
    result = table("karpenter.sh", "NodeClaim", [claim, launching], NOW, {}, printer_columns=tuple(
        PRINTER_COLUMNS["nodeclaims"]))
    assert _columns(result) == [("Name", 0), ("Type", 0), ("Capacity", 0), ("Zone", 0), ("Node", 0), ("Ready", 0),
                                ("Age", 0), ("ImageID", 1), ("ID", 1), ("NodePool", 1), ("NodeClass", 1),
                                ("Drifted", 1)]
    assert result["columnDefinitions"][6]["type"] == "date"
    assert result["rows"][0]["cells"] == ["default-ab12c", "m5.large", "spot", "us-east-1a",
                                          "ip-10-0-0-1.ec2.internal", "True", "60m", None, "aws:///us-east-1a/i-1",
                                          "default", "default", None]
    assert result["rows"][1]["cells"] == ["default-zz999"] + [None] * 5 + ["30s"] + [None] * 5
    assert _columns(table("karpenter.sh", "NodeClaim", [claim], NOW, {})) == [("Name", 0), ("Age", 0)]


def test_a_statefulset_table_has_kubectls_columns() -> None:
    """#31.2: `kubectl get sts` as kube-apiserver's printer (pkg/printers/internalversion printers.go
    statefulSetColumnDefinitions, TestPrintStatefulSet): Name, Ready (ready/desired), Age, and Containers and
    Images with -o wide."""
    sts = {"metadata": {"name": "db", "creationTimestamp": "2026-01-01T11:00:00Z"},
           "spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "pg", "image": "postgres:16"}]}}},
           "status": {"readyReplicas": 1}}
    result = table("apps", "StatefulSet", [sts], NOW, {})
    assert _columns(result) == [("Name", 0), ("Ready", 0), ("Age", 0), ("Containers", 1), ("Images", 1)]
    assert result["rows"][0]["cells"] == ["db", "1/3", "60m", "pg", "postgres:16"]
