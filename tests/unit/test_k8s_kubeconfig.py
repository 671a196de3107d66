"""A plain token kubeconfig (sim's shape) is read without kubernetes.config (#32, cold start), into the
configuration kubernetes.config itself makes of it; every other shape is left to kubernetes.config."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import config as k8s_config
from kubernetes.client.configuration import Configuration

from nodescale.k8s.client import client_from_kubeconfig, token_kubeconfig

ROOT = Path(__file__).resolve().parents[2]
CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n").decode()


def kubeconfig(tmp_path: Path, cluster: dict[str, Any], user: dict[str, Any], **extra: Any) -> str:
    doc = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}, {"name": "other", "cluster": {"server": "http://x"}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u", "namespace": "default"}},
                     {"name": "o", "context": {"cluster": "other", "user": "u"}}],
        "current-context": "c", **extra,
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def seen(conf: Configuration) -> dict[str, Any]:
    """What a request is made with: endpoint, TLS material (the CA by content) and the auth header."""
    ca = Path(conf.ssl_ca_cert).read_bytes() if conf.ssl_ca_cert else None
    return {"host": conf.host, "ca": ca, "cert": conf.cert_file, "key": conf.key_file, "verify": conf.verify_ssl,
            "server_name": conf.tls_server_name, "proxy": conf.proxy, "auth": conf.auth_settings()}


def theirs(path: str, context: str | None = None) -> Configuration:
    conf = Configuration()
    k8s_config.load_kube_config(config_file=path, context=context, client_configuration=conf)
    return conf


PLAIN = [
    ({"server": "https://127.0.0.1:6443/", "certificate-authority-data": CA}, None),
    ({"server": "http://127.0.0.1:8080"}, None),
    ({"server": "https://10.0.0.1", "insecure-skip-tls-verify": True}, None),
    ({"server": "https://10.0.0.1", "certificate-authority-data": CA, "insecure-skip-tls-verify": False}, None),
    ({"server": "https://10.0.0.1"}, None),
    ({"server": "https://10.0.0.1", "certificate-authority-data": CA}, "o"),
]


@pytest.mark.parametrize(("cluster", "context"), PLAIN)
def test_a_plain_token_kubeconfig_gives_what_kubernetes_config_gives(tmp_path: Path, cluster: dict,
                                                                      context: str | None) -> None:
    """#32, cold start: the same endpoint, CA, verification and bearer header as kubernetes.config."""
    path = kubeconfig(tmp_path, cluster, {"token": "s3cret"})
    ours = token_kubeconfig(path, context)
    assert ours is not None
    assert seen(ours) == seen(theirs(path, context))


@pytest.mark.parametrize(("cluster", "user", "extra"), [
    ({"server": "https://x", "certificate-authority": "ca.pem"}, {"token": "t"}, {}),
    ({"server": "https://x", "proxy-url": "http://proxy:3128"}, {"token": "t"}, {}),
    ({"server": "https://x", "tls-server-name": "api"}, {"token": "t"}, {}),
    ({"server": "https://x", "certificate-authority-data": "not base64!"}, {"token": "t"}, {}),
    ({"server": "https://x"}, {"tokenFile": "/var/run/token"}, {}),
    ({"server": "https://x"}, {"client-certificate-data": CA, "client-key-data": CA}, {}),
    ({"server": "https://x"}, {"exec": {"command": "aws", "apiVersion": "client.authentication.k8s.io/v1beta1"}}, {}),
    ({"server": "https://x"}, {"token": "t", "username": "a", "password": "b"}, {}),
    ({"server": "https://x"}, {"token": "t"}, {"current-context": "missing"}),
])
def test_any_other_kubeconfig_is_left_to_kubernetes_config(tmp_path: Path, cluster: dict, user: dict,
                                                           extra: dict) -> None:
    """#32, cold start: only the shape read identically is read here; the rest keeps kubernetes.config's reading."""
    assert token_kubeconfig(kubeconfig(tmp_path, cluster, user, **extra)) is None


def test_several_files_and_unreadable_files_are_left_to_kubernetes_config(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path, {"server": "https://x"}, {"token": "t"})
    assert token_kubeconfig(path + os.pathsep + path) is None
    assert token_kubeconfig(str(tmp_path / "missing")) is None
    (tmp_path / "bad").write_text("clusters: [\n")
    assert token_kubeconfig(str(tmp_path / "bad")) is None


def test_a_missing_kubeconfig_is_still_reported_by_name(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="cannot load kubeconfig .*missing"):
        client_from_kubeconfig(str(tmp_path / "missing"))


def test_building_a_function_runtime_from_a_token_kubeconfig_loads_no_kubeconfig_machinery(tmp_path: Path) -> None:
    """#32, cold start: sim and the cold-start benchmark build the runtime from a token kubeconfig;
    kubernetes.config (with requests, oauthlib, pydantic) stays out of it, as it does in Lambda."""
    path = kubeconfig(tmp_path, {"server": "https://127.0.0.1:9", "certificate-authority-data": CA}, {"token": "t"})
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "NODESCALE_"))},
           "PYTHONPATH": str(ROOT / "layers/nodescale/python"), "KUBECONFIG": path, "AWS_REGION": "us-east-1",
           "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "CLUSTER_NAME": "c",
           "AWS_ENDPOINT_URL": "http://127.0.0.1:9", "NODESCALE_TABLE": "t"}
    code = ("import json, sys\nfrom nodescale.runtime import Runtime\nrt = Runtime.from_settings()\n"
            "print(json.dumps({'host': rt.api.configuration.host, 'loaded': sorted(m for m in sys.modules"
            " if m.split('.')[0] in ('pydantic', 'requests', 'oauthlib') or m.startswith('kubernetes.config'))}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"host": "https://127.0.0.1:9", "loaded": []}
