"""Nodes that can join, and the functions' access to the cluster matching the shipped RBAC manifest."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from infra.cluster_access import FUNCTIONS_GROUP, NODE_MANAGED_POLICIES
from infra.function_specs import FUNCTION_SPECS
from infra.layers import REPO_ROOT
from tests.cdk.conftest import Synth

MANIFESTS = REPO_ROOT / "infra" / "manifests"
FUNCTIONS = [spec.name for spec in FUNCTION_SPECS]


def _entries(synth: Synth) -> dict[str, dict]:
    """Node entries by type (one each); the functions' STANDARD entries are in `_function_entries`."""
    return {e["Properties"]["Type"]: e["Properties"] for e in synth.resources("AWS::EKS::AccessEntry").values()}


def _function_entries(synth: Synth) -> list[dict]:
    return [e["Properties"] for e in synth.resources("AWS::EKS::AccessEntry").values()
            if e["Properties"]["Type"] == "STANDARD"]


def test_node_role_profile_and_linux_entry(default: Synth) -> None:
    role_id = default.logical_id(default.stack.nodes.linux.role)
    role = default.json["Resources"][role_id]["Properties"]
    assert role["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {"Service": "ec2.amazonaws.com"}
    policies = sorted(p["Fn::Join"][1][-1] for p in role["ManagedPolicyArns"])
    assert policies == sorted(f":iam::aws:policy/{p}" for p in NODE_MANAGED_POLICIES)
    default.template.has_resource_properties("AWS::IAM::InstanceProfile", {"Roles": [{"Ref": role_id}]})
    entries = _entries(default)
    assert sorted(entries) == ["EC2_LINUX", "STANDARD"]
    assert entries["EC2_LINUX"]["ClusterName"] == "demo-cluster"
    assert entries["EC2_LINUX"]["PrincipalArn"] == {"Fn::GetAtt": [role_id, "Arn"]}


def test_windows_nodes_get_their_own_role_and_entry(full: Synth, synths) -> None:
    entries = _entries(full)
    assert sorted(entries) == ["EC2_LINUX", "EC2_WINDOWS", "STANDARD"]
    assert entries["EC2_LINUX"]["PrincipalArn"] == "arn:aws:iam::111122223333:role/KarpenterNodeRole-full-cluster"
    assert entries["EC2_WINDOWS"]["PrincipalArn"] != entries["EC2_LINUX"]["PrincipalArn"]
    # -c windows=true alone asks for it too
    assert "EC2_WINDOWS" in _entries(synths("china"))


def test_an_existing_node_role_is_not_changed(full: Synth) -> None:
    roles = [r["Properties"].get("RoleName") for r in full.resources("AWS::IAM::Role").values()]
    assert "KarpenterNodeRole-full-cluster" not in roles
    profiles = full.resources("AWS::IAM::InstanceProfile").values()
    assert all("KarpenterNodeInstanceProfile" not in str(p) for p in profiles)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_each_function_role_has_an_entry_in_the_rbac_group(default: Synth, name: str) -> None:
    role_arn = {"Fn::GetAtt": [default.logical_id(default.stack.roles[name]), "Arn"]}
    (entry,) = [e for e in _function_entries(default) if e["PrincipalArn"] == role_arn]
    assert entry["ClusterName"] == "demo-cluster"
    assert entry["KubernetesGroups"] == [FUNCTIONS_GROUP]
    assert "AccessPolicies" not in entry  # Kubernetes RBAC decides, not an EKS access policy
    role, binding = yaml.safe_load_all((MANIFESTS / "rbac.yaml").read_text())
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": FUNCTIONS_GROUP}]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]


def test_one_entry_per_function_and_no_other(default: Synth) -> None:
    assert len(_function_entries(default)) == len(FUNCTIONS) == 4


def test_rbac_grants_exactly_what_the_functions_do() -> None:
    role, _ = yaml.safe_load_all((MANIFESTS / "rbac.yaml").read_text())
    granted = {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    expected = {("", "nodes", v) for v in ("get", "list", "watch", "patch", "delete")}
    expected |= {("", "pods", v) for v in ("get", "list", "watch", "delete")}  # delete: forced drains
    expected |= {("", "pods/eviction", "create")}
    expected |= {(g, "events", v) for g in ("", "events.k8s.io") for v in ("create", "get", "patch")}
    expected |= {("apps", "daemonsets", "list")}
    expected |= {("policy", "poddisruptionbudgets", "list")}
    expected |= {("karpenter.sh", r, v) for r in ("nodepools", "provisioners", "nodeoverlays")
                 for v in ("get", "list", "watch")}
    expected |= {("karpenter.k8s.aws", r, v) for r in ("ec2nodeclasses", "awsnodetemplates")
                 for v in ("get", "list", "watch")}
    # CapacityBuffers, the PodTemplates they name, and (get only) the workloads a scalableRef names.
    expected |= {(g, r, v) for g, r in (("autoscaling.x-k8s.io", "capacitybuffers"), ("", "podtemplates"))
                 for v in ("get", "list", "watch")}
    expected |= {("apps", r, "get") for r in ("deployments", "statefulsets", "replicasets")}
    # #30.3: the termination waits for VolumeAttachments (and reads the claims of pods left on the node);
    # deleted NodeClaims lose their finalizer.
    expected |= {("storage.k8s.io", "volumeattachments", v) for v in ("get", "list", "watch")}
    expected |= {("", "persistentvolumeclaims", "get")}
    # #31.1: volume topology lists the claims, PersistentVolumes and StorageClasses.
    expected |= {("", "persistentvolumeclaims", "list"), ("", "persistentvolumes", "list"),
                 ("storage.k8s.io", "storageclasses", "list")}
    # #31.1: volume attachment limits list the CSINodes.
    expected |= {("storage.k8s.io", "csinodes", "list")}
    expected |= {("karpenter.sh", "nodeclaims", v) for v in ("get", "list", "watch", "patch")}
    # #30.1: one NodeClaim per launch (created before the Fleet call, deleted when the launch fails), its status.
    expected |= {("karpenter.sh", "nodeclaims", v) for v in ("create", "update", "delete")}
    expected |= {("karpenter.sh", "nodeclaims/status", "patch")}
    # #30.2: NodePool and EC2NodeClass status, through their status subresource.
    expected |= {("karpenter.sh", "nodepools/status", "patch"), ("karpenter.k8s.aws", "ec2nodeclasses/status", "patch")}
    assert granted == expected


def test_crds_for_every_api_generation() -> None:
    served = {}
    for path in sorted(Path(MANIFESTS / "crds").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        spec = crd["spec"]
        assert crd["metadata"]["name"] == f"{spec['names']['plural']}.{spec['group']}"
        # Karpenter's kinds are cluster-scoped; a CapacityBuffer lives in the namespace of its pods.
        assert spec["scope"] == ("Namespaced" if spec["names"]["kind"] == "CapacityBuffer" else "Cluster")
        assert sum(v["storage"] for v in spec["versions"]) == 1
        for version in spec["versions"]:
            schema = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
            # #28.4: structural, as Karpenter's CRDs are (tests/unit/test_crd_schemas.py checks the fields).
            assert schema["type"] == "object" and schema["properties"]
            assert "x-kubernetes-preserve-unknown-fields" not in schema
            served[(spec["group"], version["name"], spec["names"]["kind"])] = True
    assert set(served) == {
        ("karpenter.sh", "v1", "NodePool"), ("karpenter.sh", "v1beta1", "NodePool"),
        ("karpenter.sh", "v1alpha5", "Provisioner"),
        ("karpenter.sh", "v1alpha1", "NodeOverlay"),
        ("karpenter.sh", "v1", "NodeClaim"),  # #30.1: written by the functions
        ("karpenter.k8s.aws", "v1", "EC2NodeClass"), ("karpenter.k8s.aws", "v1beta1", "EC2NodeClass"),
        ("karpenter.k8s.aws", "v1alpha1", "AWSNodeTemplate"),
        *(("autoscaling.x-k8s.io", v, "CapacityBuffer") for v in ("v1", "v1beta1", "v1alpha1")),
    }
