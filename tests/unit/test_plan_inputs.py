"""`nodescale plan` inputs: workloads expanded to pods, DaemonSets as overhead, Nodes with their pods, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nodescale.cli import main
from nodescale.config.documents import parse_documents
from nodescale.scheduling.workloads import WorkloadError, read_workloads

EXAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "examples"
DEFAULT_SPOT = EXAMPLES / "karpenter-v1alpha5" / "default-spot.yaml"
# A current-API spot pool: unlike v1alpha5 it adds no default instance categories the kwok types lack.
SPOT_POOL = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [spot]}]
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-demo-cluster
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo-cluster}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo-cluster}}]
"""

KWOK_TYPES = [
    {
        "name": name,
        "architecture": "amd64",
        "operatingSystems": ["linux"],
        "resources": {"cpu": str(cpu), "memory": f"{cpu * 4}Gi", "pods": "110"},
        "offerings": [
            {
                "Price": price * (0.3 if ct == "spot" else 1),
                "Available": True,
                "Requirements": [
                    {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]},
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": [ct]},
                ],
            }
            for zone in ("test-zone-a", "test-zone-b")
            for ct in ("spot", "on-demand")
        ],
    }
    for name, cpu, price in (("kwok-2", 2, 0.1), ("kwok-4", 4, 0.2), ("kwok-16", 16, 0.8))
]


def docs(text: str) -> list[tuple[str, dict]]:
    return parse_documents(text, "test.yaml")


def run_plan(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, dict | str, str]:
    code = main(["plan", *args])
    captured = capsys.readouterr()
    try:
        return code, json.loads(captured.out), captured.err
    except ValueError:
        return code, captured.out, captured.err


def test_replicated_workloads_expand_to_their_replicas():
    work = read_workloads(docs("""
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: data}
spec:
  replicas: 3
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: c, resources: {requests: {cpu: 500m}}}]}
---
apiVersion: batch/v1
kind: Job
metadata: {name: batch}
spec:
  parallelism: 5
  completions: 2
  template:
    spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: rs}
spec:
  template:
    spec: {containers: [{name: c}]}
"""))
    names = [p.key for p in work.pending]
    assert names == ["data/db-0", "data/db-1", "data/db-2", "default/batch-0", "default/batch-1", "default/rs-0"]
    db = work.pending[0]
    assert db.labels == {"app": "db"} and db.requests["cpu"] == 500 and db.owner_kind == "StatefulSet"


def test_daemonsets_are_overhead_and_nodes_keep_their_bound_pods():
    work = read_workloads(docs("""
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: kube-system}
spec:
  template:
    spec: {containers: [{name: a, resources: {requests: {cpu: 100m}}}]}
---
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {karpenter.sh/nodepool: default}}
spec:
  taints: [{key: dedicated, value: x, effect: NoSchedule}]
status:
  capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  allocatable: {cpu: 3920m, memory: 15Gi, pods: "110"}
---
apiVersion: v1
kind: Pod
metadata: {name: bound, namespace: default}
spec:
  nodeName: n1
  containers: [{name: c, resources: {requests: {cpu: "1"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: done}
spec: {containers: [{name: c}]}
status: {phase: Succeeded}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: pdb}
spec: {maxUnavailable: 1}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: ignored}
"""))
    assert [d.name for d in work.daemons] == ["agent-daemon"] and work.daemons[0].is_daemon
    node = work.nodes[0]
    assert node.nodepool == "default"
    assert node.allocatable["cpu"] == 3920 and node.capacity["cpu"] == 4000
    assert [p.name for p in node.pods] == ["bound"]
    assert str(node.taints[0]) == "dedicated=x:NoSchedule"
    assert work.pending == []
    assert len(work.pdbs) == 1
    assert work.ignored == [("test.yaml#5", "ConfigMap")]


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("kind: Deployment\nmetadata: {name: d}\nspec: {replicas: -1}\n", "spec.replicas"),
        ("kind: Deployment\nmetadata: {name: d}\nspec: {template: {spec: {containers: []}}}\n",
         "spec.template.spec.containers"),
        ("kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, resources: {requests: {cpu: lots}}}]}\n",
         "spec"),
        ("kind: Pod\nmetadata: {name: p}\nspec: {nodeName: ghost, containers: [{name: c}]}\n", "spec.nodeName"),
        ("kind: Node\nmetadata: {name: n}\nstatus: {capacity: {cpu: many}}\n", "status.capacity.cpu"),
    ],
)
def test_bad_workloads_name_the_document_and_field(text, field):
    with pytest.raises(WorkloadError) as err:
        read_workloads(docs(text))
    assert str(err.value).startswith("test.yaml#0: ")
    assert field in str(err.value)


def test_plan_fills_existing_nodes_first_and_reports_them(capsys, tmp_path):
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "cluster.yaml").write_text("""
apiVersion: v1
kind: Node
metadata:
  name: spot-node-1
  labels: {karpenter.sh/nodepool: default, karpenter.sh/capacity-type: spot, topology.kubernetes.io/zone: test-zone-a,
           kubernetes.io/arch: amd64, kubernetes.io/os: linux}
status:
  allocatable: {cpu: "3", memory: 12Gi, pods: "110"}
""")
    (tmp_path / "types.json").write_text(json.dumps(KWOK_TYPES))
    (manifests / "pool.yaml").write_text(SPOT_POOL)
    code, out, err = run_plan(
        capsys, "-f", str(EXAMPLES / "workloads" / "inflate.yaml"), "-f", str(manifests),
        "--instance-types", str(tmp_path / "types.json"), "-o", "json",
    )
    assert code == 0, err
    assert out["existingNodes"] == [
        {"name": "spot-node-1", "inFlight": False, "pods": ["default/inflate-0", "default/inflate-1", "default/inflate-2"]}
    ]
    placed = [p for c in out["nodeClaims"] for p in c["pods"]]
    assert sorted(placed) == ["default/inflate-3", "default/inflate-4"]
    for claim in out["nodeClaims"]:
        assert set(claim["instanceTypes"]) <= {"kwok-2", "kwok-4", "kwok-16"}
        assert set(claim["zones"]) <= {"test-zone-a", "test-zone-b"}
        assert claim["capacityTypes"] == ["spot"]


def test_a_daemonset_makes_new_nodes_bigger(capsys, tmp_path):
    (tmp_path / "types.json").write_text(json.dumps(KWOK_TYPES))
    (tmp_path / "pool.yaml").write_text(SPOT_POOL)
    (tmp_path / "ds.yaml").write_text("""
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: heavy, namespace: kube-system}
spec:
  selector: {matchLabels: {app: heavy}}
  template:
    metadata: {labels: {app: heavy}}
    spec: {containers: [{name: a, resources: {requests: {cpu: 1500m}}}]}
""")
    base = ["-f", str(tmp_path / "pool.yaml"), "-f", str(EXAMPLES / "workloads" / "inflate.yaml"),
            "--instance-types", str(tmp_path / "types.json"), "-o", "json"]
    _, without, _ = run_plan(capsys, *base)
    _, with_ds, _ = run_plan(capsys, *base, "-f", str(tmp_path / "ds.yaml"))
    assert with_ds["stats"]["pricePerHour"] > without["stats"]["pricePerHour"]
    for claim in with_ds["nodeClaims"]:
        assert claim["instanceTypes"][0] != "kwok-2"  # 2 CPU cannot hold a 1 CPU pod beside 1.5 CPU of daemon


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["-f", "/nonexistent/nowhere.yaml"], "/nonexistent/nowhere.yaml: no such file or folder"),
        (["-f", str(DEFAULT_SPOT), "--instance-types", "/nonexistent/types.json"], "--instance-types:"),
        (["-f", str(DEFAULT_SPOT), "--region", "xx-nowhere-1"], "--region:"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(capsys, args, expected):
    code, out, err = run_plan(capsys, *args)
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1 and expected in err


def test_invalid_nodepool_exits_2_naming_the_field(capsys, tmp_path):
    bad = tmp_path / "pool.yaml"
    bad.write_text(DEFAULT_SPOT.read_text().replace('operator: In', 'operator: Within', 1))
    code, _, err = run_plan(capsys, "-f", str(bad))
    assert code == 2
    assert str(bad) in err and "operator" in err and "Traceback" not in err


def test_yaml_syntax_error_exits_2(capsys, tmp_path):
    bad = tmp_path / "broken.yaml"
    bad.write_text("kind: Pod\nmetadata: {name: [\n")
    code, _, err = run_plan(capsys, "-f", str(bad))
    assert code == 2 and str(bad) in err and "line" in err


@pytest.mark.parametrize(
    ("env", "flag", "region"),
    [
        ({"AWS_REGION": "cn-north-1", "AWS_DEFAULT_REGION": "us-east-1"}, [], "cn-north-1"),
        ({"AWS_DEFAULT_REGION": "us-gov-west-1"}, [], "us-gov-west-1"),
        ({"AWS_REGION": "cn-north-1"}, ["--region", "us-east-1"], "us-east-1"),
        ({}, [], "us-east-1"),
    ],
)
def test_plan_reads_the_region_as_boto3_does(capsys, monkeypatch, env, flag, region):
    """#28.4: without --region, `nodescale plan` plans in AWS_REGION, else AWS_DEFAULT_REGION, else us-east-1."""
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    code, plan, err = run_plan(capsys, "-f", str(DEFAULT_SPOT), "-f", str(EXAMPLES / "workloads" / "inflate.yaml"),
                               *flag, "-o", "json")
    assert code == 0, err
    assert plan["currency"] == ("CNY" if region.startswith("cn-") else "USD")
    zones = {z for claim in plan["nodeClaims"] for z in claim.get("zones") or []}
    assert zones and all(z.startswith(region) for z in zones), zones
