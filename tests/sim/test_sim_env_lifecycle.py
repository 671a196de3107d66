"""`python -m sim up/down/status`: two environments at once, independent, and nothing left behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import boto3
import pytest
import yaml
from kubernetes import client, config

from nodescale import names
from nodescale.k8s.raw import request_json
from sim.aws.moto_server import PROJECT_ROOT
from sim.environment import pid_alive, read_env, session_members

pytestmark = pytest.mark.integration


def sim_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sim", *args], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def shell_env(directory: Path, name: str = "env") -> dict[str, str]:
    """What a shell gets from `source DIR/env` (or DIR/admin.env)."""
    script = f"set -e; source {directory / name}; python3 -c 'import json, os; print(json.dumps(dict(os.environ)))'"
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True, env={"PATH": "/usr/bin:/bin"})
    return json.loads(out.stdout)


def test_two_environments_are_independent_and_down_leaves_no_process(tmp_path: Path) -> None:
    dirs = [tmp_path / "one", tmp_path / "two"]
    starts = [
        subprocess.Popen(
            [sys.executable, "-m", "sim", "up", "--dir", str(d), "--cluster", name],
            cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
        )
        for d, name in zip(dirs, ("demo-cluster", "other-cluster"), strict=True)
    ]
    try:
        for proc in starts:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
        states = [json.loads((d / "state.json").read_text()) for d in dirs]
        pids = [s["pid"] for s in states]
        assert all(pid_alive(p) for p in pids)
        assert len({s["kube_url"] for s in states} | {s["aws_endpoint"] for s in states}) == 4

        functions = [shell_env(d) for d in dirs]
        assert [e["CLUSTER_NAME"] for e in functions] == ["demo-cluster", "other-cluster"]
        for env, d in zip(functions, dirs, strict=True):
            assert env["KUBECONFIG"] == str(d.resolve() / "kubeconfig")
            assert env["AWS_REGION"] == env["AWS_DEFAULT_REGION"] == "us-east-1"
            assert env["NODESCALE_TABLE"] == names.table_name(env["CLUSTER_NAME"])  # the stack's name for it
        assert read_env(dirs[0])["AWS_ENDPOINT_URL"] == functions[0]["AWS_ENDPOINT_URL"]
        # DIR/admin.env: the same settings, the administrator's kubeconfig and AWS credentials.
        envs = [shell_env(d, "admin.env") for d in dirs]
        for admin, env, d in zip(envs, functions, dirs, strict=True):
            assert admin["KUBECONFIG"] == str(d.resolve() / "admin-kubeconfig")
            assert admin["AWS_ACCESS_KEY_ID"] != env["AWS_ACCESS_KEY_ID"]
            assert {k: v for k, v in admin.items() if k not in ("KUBECONFIG", "AWS_ACCESS_KEY_ID",
                                                                 "AWS_SECRET_ACCESS_KEY")} == \
                {k: v for k, v in env.items() if k not in ("KUBECONFIG", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}

        # Kubernetes (as the administrator): a namespace made in one is not in the other.
        apis = [client.CoreV1Api(config.new_client_from_config(config_file=e["KUBECONFIG"])) for e in envs]
        apis[0].create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="only-in-one")))
        assert "only-in-one" in {n.metadata.name for n in apis[0].list_namespace().items}
        assert "only-in-one" not in {n.metadata.name for n in apis[1].list_namespace().items}

        # AWS: each has its own account, seeded for its own cluster.
        def ec2(env: dict[str, str]) -> object:
            return boto3.client(
                "ec2", endpoint_url=env["AWS_ENDPOINT_URL"], region_name=env["AWS_REGION"],
                aws_access_key_id=env["AWS_ACCESS_KEY_ID"], aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
            )

        for env in envs:
            tag = [{"Name": "tag:karpenter.sh/discovery", "Values": [env["CLUSTER_NAME"]]}]
            assert len(ec2(env).describe_subnets(Filters=tag)["Subnets"]) == 3
        ec2(envs[0]).create_vpc(CidrBlock="192.168.0.0/16", TagSpecifications=[
            {"ResourceType": "vpc", "Tags": [{"Key": "marker", "Value": "one"}]}])
        marker = [{"Name": "tag:marker", "Values": ["one"]}]
        assert len(ec2(envs[0]).describe_vpcs(Filters=marker)["Vpcs"]) == 1
        assert ec2(envs[1]).describe_vpcs(Filters=marker)["Vpcs"] == []

        status = sim_cli("status", "--dir", str(dirs[0]))
        assert status.returncode == 0 and "running" in status.stdout

        again = sim_cli("up", "--dir", str(dirs[0]))
        assert again.returncode == 1 and "already running" in again.stderr
    finally:
        for d in dirs:
            sim_cli("down", "--dir", str(d))

    for state in states:
        assert not pid_alive(state["pid"])
        assert not pid_alive(state["moto_pid"])
        assert session_members(state["pid"]) == []
    for d in dirs:
        assert not (d / "state.json").exists()
        gone = sim_cli("status", "--dir", str(d))
        assert gone.returncode == 3 and "no environment is running" in gone.stdout


def test_down_without_an_environment_says_so(tmp_path: Path) -> None:
    result = sim_cli("down", "--dir", str(tmp_path))
    assert result.returncode == 0 and "no environment was running" in result.stdout


def test_bad_options_are_refused_before_anything_starts(tmp_path: Path) -> None:
    result = sim_cli("up", "--dir", str(tmp_path), "--speed", "0")
    assert result.returncode == 2 and "must be greater than 0" in result.stderr
    assert not (tmp_path / "sim.pid").exists()


def nodescale_cli(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`nodescale ARGS` in a shell that sourced DIR/env (the functions' identity, held to the stack's IAM policy)."""
    env = {**os.environ, **read_env(directory),
           "PYTHONPATH": os.pathsep.join([str(PROJECT_ROOT), str(PROJECT_ROOT / "layers/nodescale/python")])}
    return subprocess.run([sys.executable, "-m", "nodescale.cli", *args], cwd=PROJECT_ROOT, capture_output=True,
                          text=True, timeout=180, env=env, stdin=subprocess.DEVNULL)


def test_the_china_article_end_to_end_in_cn_north_1(tmp_path: Path) -> None:
    """Karpenter on EKS in cn-north-1: the v1alpha5 default Provisioner, pending pods, nodes that join, prices in
    CNY, ARNs in the aws-cn partition, every call of the product held to the policy synthesized for that region."""
    directory = tmp_path / "cn"
    started = sim_cli("up", "--dir", str(directory), "--region", "cn-north-1", timeout=180)
    assert started.returncode == 0, started.stderr
    try:
        assert "region cn-north-1" in started.stdout
        admin, seed = shell_env(directory, "admin.env"), json.loads((directory / "seed.json").read_text())
        assert admin["AWS_REGION"] == "cn-north-1" and seed["region"] == "cn-north-1"
        assert seed["cluster_arn"].startswith("arn:aws-cn:eks:cn-north-1:")
        assert seed["node_role_arn"].startswith("arn:aws-cn:iam::")
        assert seed["zones"] and all(z.startswith("cn-north-1") for z in seed["zones"])

        def aws(service: str) -> object:
            return boto3.client(service, endpoint_url=admin["AWS_ENDPOINT_URL"], region_name="cn-north-1",
                                aws_access_key_id=admin["AWS_ACCESS_KEY_ID"],
                                aws_secret_access_key=admin["AWS_SECRET_ACCESS_KEY"])

        pool = PROJECT_ROOT / "tests/fixtures/examples/karpenter-v1alpha5/default-spot.yaml"
        aws("ssm").put_parameter(Name=f"{admin['NODESCALE_NODEPOOL_PARAMETER_PATH'].rstrip('/')}/default",
                                 Value=pool.read_text(), Type="String")
        api = config.new_client_from_config(config_file=admin["KUBECONFIG"])
        inflate = yaml.safe_load((PROJECT_ROOT / "tests/fixtures/examples/workloads/inflate.yaml").read_text())
        request_json(api, "POST", "/apis/apps/v1/namespaces/default/deployments", body=inflate)
        core = client.CoreV1Api(api)
        until(lambda: len(core.list_namespaced_pod("default", label_selector="app=inflate").items) == 5)

        launched = nodescale_cli(directory, "provision", "--once", "-o", "json")
        assert launched.returncode == 0, launched.stderr[-3000:]
        summary = json.loads(launched.stdout)
        assert summary["currency"] == "CNY" and summary["launches"], summary
        assert all(x["zone"] in seed["zones"] for x in summary["launches"])
        ids = [x["instanceId"] for x in summary["launches"]]
        until(lambda: len(core.list_node().items) == len(ids))  # the nodes join
        profile = aws("iam").get_instance_profile(InstanceProfileName=admin["NODESCALE_INSTANCE_PROFILE"])
        assert profile["InstanceProfile"]["Arn"].startswith("arn:aws-cn:iam::")
        # Every call the product made was allowed by the policies synthesized for cn-north-1, on aws-cn ARNs.
        with urllib.request.urlopen(f"{admin['NODESCALE_SIM_AWS_CONTROL']}/aws-calls", timeout=10) as response:
            calls = json.loads(response.read())["calls"]
        assert calls and not [c for c in calls if c.get("denied")], [c for c in calls if c.get("denied")][:3]

        status = nodescale_cli(directory, "status")
        assert status.returncode == 0, status.stderr[-3000:]
        assert "(CNY)" in status.stdout.splitlines()[0] and "¥/HOUR" in status.stdout and "$" not in status.stdout
        assert json.loads(nodescale_cli(directory, "status", "-o", "json").stdout)["currency"] == "CNY"
    finally:
        sim_cli("down", "--dir", str(directory))


def until(condition: Callable[[], bool], seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.5)


def test_a_region_the_catalog_does_not_know_is_refused(tmp_path: Path) -> None:
    result = sim_cli("up", "--dir", str(tmp_path), "--region", "mars-east-1")
    assert result.returncode == 1 and "region 'mars-east-1'" in result.stderr
    assert not (tmp_path / "sim.pid").exists()
