"""Every placement expectation of the field examples, checked through `nodescale plan` output."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
import yaml

from nodescale.aws.catalog import bundled_catalog
from nodescale.cli import main
from nodescale.model.resources import PRIVATE_IPV4

EXAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "examples"
V1ALPHA5 = EXAMPLES / "karpenter-v1alpha5"
V1BETA1 = EXAMPLES / "karpenter-v1beta1"
WORKLOADS = EXAMPLES / "workloads"
GIB = 2**30

CATALOG = {it.name: it for it in bundled_catalog("us-east-1")}


def plan(capsys: pytest.CaptureFixture, *paths: Path) -> dict:
    args = ["plan", "-o", "json"]
    for p in paths:
        args += ["-f", str(p)]
    code = main(args)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out)


def pods_of(claims: list[dict], prefix: str) -> list[str]:
    return [p for c in claims for p in c["pods"] if p.startswith(prefix)]


def test_inflate_runs_on_spot_from_the_default_pool(capsys):
    out = plan(capsys, V1ALPHA5 / "default-spot.yaml", WORKLOADS / "inflate.yaml")
    assert out["unschedulable"] == []
    claims = out["nodeClaims"]
    assert sorted(pods_of(claims, "default/inflate")) == [f"default/inflate-{i}" for i in range(5)]
    for claim in claims:
        assert claim["nodePool"] == "default"
        assert claim["capacityTypes"] == ["spot"]
        # Each pod asks for 1 CPU: the cheapest option of every claim must hold all of its pods.
        cheapest = CATALOG[claim["instanceTypes"][0]]
        assert cheapest.allocatable["cpu"] >= 1000 * len(claim["pods"])
    assert out["stats"]["pods"] == 5
    assert out["stats"]["pricePerHour"] == pytest.approx(sum(c["price"] for c in claims))


def test_banana_takes_the_tolerating_team_pods_and_never_inflate(capsys):
    out = plan(
        capsys,
        V1ALPHA5 / "banana-weighted-tainted.yaml",
        V1ALPHA5 / "default-spot.yaml",
        WORKLOADS / "special-team.yaml",
        WORKLOADS / "inflate.yaml",
    )
    assert out["unschedulable"] == []
    banana = [c for c in out["nodeClaims"] if c["nodePool"] == "banana"]
    default = [c for c in out["nodeClaims"] if c["nodePool"] == "default"]
    assert sorted(pods_of(banana, "default/")) == [f"default/condition-workload-{i}" for i in range(3)]
    assert len(pods_of(default, "default/inflate")) == 5
    assert pods_of(default, "default/condition-workload") == []
    for claim in banana:
        assert claim["capacityTypes"] == ["on-demand"]
        assert claim["labels"]["billing-team"] == "my-team"
        assert claim["taints"] == [{"key": "example.com/special-taint", "effect": "NoSchedule"}]


def test_inflate_without_a_tolerating_pool_says_which_taint(capsys, tmp_path):
    text = (V1ALPHA5 / "banana-weighted-tainted.yaml").read_text()
    template = (V1ALPHA5 / "default-spot.yaml").read_text().split("---", 1)[1]
    (tmp_path / "banana.yaml").write_text(text + "\n---\n" + template)
    out = plan(capsys, tmp_path / "banana.yaml", WORKLOADS / "inflate.yaml")
    assert out["nodeClaims"] == []
    reasons = {u["reason"] for u in out["unschedulable"]}
    assert reasons == {"incompatible with nodepool banana: did not tolerate example.com/special-taint=:NoSchedule"}


def test_windows_builds_go_to_the_matching_pools(capsys):
    out = plan(capsys, V1ALPHA5 / "windows.yaml", WORKLOADS / "windows-iis.yaml")
    assert out["unschedulable"] == []
    for claim in out["nodeClaims"]:
        names = {p.rsplit("-", 1)[0] for p in claim["pods"]}
        if claim["nodePool"] == "windows2022":
            assert names == {"default/windows-server-iis-simple-2022"}
            assert claim["labels"]["node.kubernetes.io/windows-build"] == "10.0.20348"
        else:
            assert claim["nodePool"] == "windows2019"
            assert names == {"default/windows-server-iis-simple-2019"}
            assert claim["labels"]["node.kubernetes.io/windows-build"] == "10.0.17763"
        assert claim["labels"]["kubernetes.io/os"] == "windows"
        assert all("windows" in CATALOG[t].operating_systems for t in claim["instanceTypes"])
    assert len(pods_of(out["nodeClaims"], "default/")) == 20


def test_windows_pods_requesting_a_private_ipv4_address_fit_the_primary_interface(capsys, tmp_path):
    # As EKS runs them: the VPC resource controller's webhook adds this request to every Windows pod.
    doc = yaml.safe_load_all((WORKLOADS / "windows-iis.yaml").read_text())
    iis_2022 = next(d for d in doc if d["metadata"]["name"].endswith("2022"))
    iis_2022["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"][PRIVATE_IPV4] = "1"
    workload = tmp_path / "iis.yaml"
    workload.write_text(yaml.safe_dump(iis_2022))

    out = plan(capsys, V1ALPHA5 / "windows.yaml", workload)

    assert out["unschedulable"] == []
    assert len(pods_of(out["nodeClaims"], "default/windows-server-iis-simple-2022")) == 10
    for claim in out["nodeClaims"]:
        smallest = min(CATALOG[t].facts.ipv4_per_eni for t in claim["instanceTypes"])
        assert len(claim["pods"]) <= smallest - 1, (claim["instanceTypes"][:3], len(claim["pods"]))


def test_migrated_from_cluster_autoscaler_uses_only_cmr_generation_3_and_newer(capsys):
    out = plan(
        capsys,
        V1ALPHA5 / "migrated-from-cluster-autoscaler.yaml",
        WORKLOADS / "nginx-with-pdb.yaml",
        WORKLOADS / "do-not-disrupt-job.yaml",
        WORKLOADS / "gpu-and-team.yaml",
    )
    placed = pods_of(out["nodeClaims"], "default/")
    assert len([p for p in placed if "nginx" in p]) == 4
    assert len([p for p in placed if "nightly-report" in p]) == 2
    pattern = re.compile(r"^([a-z]+)(\d+)")
    for claim in out["nodeClaims"]:
        # v1alpha5 defaults: on-demand, linux, amd64.
        assert claim["capacityTypes"] == ["on-demand"]
        for name in claim["instanceTypes"]:
            family, generation = pattern.match(name).groups()
            assert family in ("c", "m", "r"), name
            assert int(generation) >= 3, name
            assert CATALOG[name].labels["kubernetes.io/arch"] == "amd64"
    # The team pods select billing-team=my-team, which this pool never sets; the GPU pods find no GPU type.
    unschedulable = {u["pod"].rsplit("-", 1)[0] for u in out["unschedulable"]}
    assert unschedulable == {"default/workload-my-team", "default/inflate-gpu"}


def test_gpu_pods_on_p3_in_the_gpu_pool_and_team_pods_in_generalcompute(capsys):
    out = plan(capsys, V1BETA1 / "gpu-and-team-pools.yaml", WORKLOADS / "gpu-and-team.yaml")
    assert out["unschedulable"] == []
    listed = {"m5.large", "m5.xlarge", "m5.2xlarge", "c5.large", "c5.xlarge", "c5a.large", "c5a.xlarge",
              "r5.large", "r5.xlarge"}
    gpu_pods, team_pods = [], []
    for claim in out["nodeClaims"]:
        if claim["nodePool"] == "gpu":
            assert set(claim["instanceTypes"]) <= {"p3.8xlarge", "p3.16xlarge"}
            assert {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"} in claim["taints"]
            gpu_pods += claim["pods"]
        else:
            assert claim["nodePool"] == "generalcompute"
            assert set(claim["instanceTypes"]) <= listed
            assert claim["labels"]["billing-team"] == "my-team"
            team_pods += claim["pods"]
    assert sorted(gpu_pods) == ["default/inflate-gpu-0", "default/inflate-gpu-1"]
    assert len(team_pods) == 200 and all(p.startswith("default/workload-my-team-") for p in team_pods)


def test_excluded_graviton_types_are_never_chosen_and_limits_hold(capsys, tmp_path):
    node_class = tmp_path / "nodeclass.yaml"
    node_class.write_text(
        "apiVersion: karpenter.k8s.aws/v1beta1\nkind: EC2NodeClass\nmetadata: {name: default}\n"
        "spec:\n  amiFamily: AL2\n  role: KarpenterNodeRole-demo-cluster\n"
        "  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo-cluster}}]\n"
        "  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo-cluster}}]\n"
    )
    # Big arm64 pods: the excluded 16xlarge Graviton sizes would be the natural fit; 40 x 60 CPU > 1000 CPU.
    workload = tmp_path / "big-arm.yaml"
    workload.write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: big, namespace: default}\n"
        "spec:\n  replicas: 40\n  selector: {matchLabels: {app: big}}\n  template:\n"
        "    metadata: {labels: {app: big}}\n    spec:\n      nodeSelector: {kubernetes.io/arch: arm64}\n"
        "      containers: [{name: app, image: pause, resources: {requests: {cpu: '60', memory: 200Gi}}}]\n"
    )
    out = plan(capsys, V1BETA1 / "exclude-large-graviton.yaml", node_class, workload)
    excluded = {"m6g.16xlarge", "m6gd.16xlarge", "r6g.16xlarge", "r6gd.16xlarge", "c6g.16xlarge"}
    assert out["nodeClaims"]
    cpu = memory = 0
    for claim in out["nodeClaims"]:
        assert not excluded & set(claim["instanceTypes"])
        # The pool's limits count the largest option of every claim.
        cpu += max(CATALOG[t].capacity["cpu"] for t in claim["instanceTypes"])
        memory += max(CATALOG[t].capacity["memory"] for t in claim["instanceTypes"])
    assert cpu <= 1000 * 1000
    assert memory <= 1000 * GIB
    assert out["unschedulable"], "40 pods of 60 CPU cannot fit under a 1000 CPU limit"
    assert all("limits" in u["reason"] for u in out["unschedulable"])


def test_invalid_input_exits_2_with_one_line_naming_file_and_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  replicas: two\n"
                   "  selector: {matchLabels: {app: x}}\n  template:\n    metadata: {labels: {app: x}}\n"
                   "    spec: {containers: [{name: x, image: pause}]}\n")
    err = io.StringIO()
    from nodescale.commands import plan as plan_cmd

    args = type("A", (), {"paths": [str(bad)], "instance_types": None, "region": "us-east-1", "output": "json"})
    assert plan_cmd.run(args, out=io.StringIO(), err=err) == 2
    lines = err.getvalue().splitlines()
    assert len(lines) == 1
    assert str(bad) in lines[0] and "spec.replicas" in lines[0]


def test_text_output_is_a_table(capsys):
    assert main(["plan", "-f", str(V1ALPHA5 / "default-spot.yaml"), "-f", str(WORKLOADS / "inflate.yaml")]) == 0
    text = capsys.readouterr().out
    assert "NODEPOOL" in text and "INSTANCE TYPES" in text
    assert "5 pods" in text


def _one_per_node(tmp_path: Path, replicas: int) -> Path:
    """`inflate` scaled to ``replicas``, one pod per node (hostname anti-affinity): identical NodeClaims."""
    doc = yaml.safe_load((WORKLOADS / "inflate.yaml").read_text())
    doc["spec"]["replicas"] = replicas
    doc["spec"]["template"]["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "inflate"}}}]}}
    path = tmp_path / "inflate-spread.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_text_output_groups_identical_node_claims_with_a_count(capsys, tmp_path):
    workload = _one_per_node(tmp_path, 29)
    assert main(["plan", "-f", str(V1ALPHA5 / "default-spot.yaml"), "-f", str(workload)]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = lines[lines.index("NodeClaims to launch:") + 2:lines.index("")]
    assert len(rows) == 1, lines
    assert rows[0].split()[:2] == ["x29", "default"] and "Deployment/default/inflate" in rows[0]
    assert lines[-1].startswith("29 pods, 29 node claims, $")
    assert len(plan(capsys, V1ALPHA5 / "default-spot.yaml", workload)["nodeClaims"]) == 29  # json: one each


def test_prices_are_in_the_regions_currency(capsys):
    args = ["plan", "-f", str(V1ALPHA5 / "default-spot.yaml"), "-f", str(WORKLOADS / "inflate.yaml")]
    assert main([*args, "--region", "cn-north-1"]) == 0
    text = capsys.readouterr().out
    assert "¥/HOUR EACH" in text and "(CNY)" in text and "$" not in text
    assert main([*args, "--region", "cn-north-1", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["currency"] == "CNY"
    assert main([*args, "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["currency"] == "USD"
