"""Building the Kubernetes client: EKS (DescribeCluster + STS token) and kubeconfig, timeouts, retries."""

from __future__ import annotations

import base64
import json

import boto3
import pytest
from botocore.stub import Stubber

from nodescale.k8s import client as client_module
from nodescale.k8s.client import (
    DEFAULT_TIMEOUT,
    KubeConfigError,
    build_api_client,
    client_from_eks,
    client_from_kubeconfig,
    read_retry,
)
from nodescale.k8s.token import decode_token
from nodescale.settings import Settings

PEM = b"-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n"


class _Session:
    """A boto3 session whose EKS client answers DescribeCluster from a stub."""

    def __init__(self, cluster: dict | None = None, error: str | None = None) -> None:
        self.real = boto3.Session(aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret")
        self.cluster = cluster
        self.error = error

    def get_credentials(self):
        return self.real.get_credentials()

    def client(self, service, **kwargs):
        client = self.real.client(service, **kwargs)
        if service == "eks":
            stub = Stubber(client)
            if self.error:
                stub.add_client_error("describe_cluster", service_error_code=self.error, service_message="nope")
            else:
                stub.add_response("describe_cluster", {"cluster": self.cluster}, {"name": "demo"})
            stub.activate()
        return client


def _cluster(**extra) -> dict:
    return {
        "name": "demo",
        "endpoint": "https://ABC.gr7.us-east-1.eks.amazonaws.com",
        "certificateAuthority": {"data": base64.b64encode(PEM).decode()},
        "status": "ACTIVE",
        **extra,
    }


def test_eks_client_uses_the_clusters_endpoint_ca_and_a_fresh_bearer_token():
    api = client_from_eks("demo", "us-east-1", _Session(_cluster()))
    conf = api.configuration
    assert conf.host == "https://ABC.gr7.us-east-1.eks.amazonaws.com"
    with open(conf.ssl_ca_cert, "rb") as fh:
        assert fh.read() == PEM
    header = conf.auth_settings()["BearerToken"]["value"]
    scheme, token = header.split(" ", 1)
    assert scheme == "Bearer"
    assert decode_token(token).startswith("https://sts.us-east-1.amazonaws.com/?Action=GetCallerIdentity")
    assert conf.refresh_api_key_hook is not None


def test_eks_client_reports_describe_cluster_failures_by_name():
    with pytest.raises(KubeConfigError, match=r"eks:DescribeCluster for cluster 'demo'.*ResourceNotFoundException"):
        client_from_eks("demo", "us-east-1", _Session(error="ResourceNotFoundException"))


def test_a_cluster_still_creating_is_reported_with_its_status():
    cluster = _cluster(status="CREATING")
    del cluster["endpoint"]
    with pytest.raises(KubeConfigError, match="status CREATING"):
        client_from_eks("demo", "us-east-1", _Session(cluster))


def test_a_ca_that_is_not_base64_is_reported():
    with pytest.raises(KubeConfigError, match="certificateAuthority.data is not base64"):
        client_from_eks("demo", "us-east-1", _Session(_cluster(certificateAuthority={"data": "***"})))


def test_kubeconfig_client_gets_the_tuned_pool_retries_and_default_timeouts(tmp_path, monkeypatch):
    path = tmp_path / "kubeconfig"
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
                "users": [{"name": "u", "user": {"token": "abc"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    api = build_api_client(Settings(cluster_name="demo", region="us-east-1", kubeconfig=str(path)))
    assert api.configuration.host == "http://127.0.0.1:9"
    assert api.configuration.connection_pool_maxsize == client_module.POOL_MAXSIZE
    assert api.configuration.retries.status_forcelist == client_module.RETRY_STATUSES
    seen = {}
    monkeypatch.setattr(api.rest_client, "request", lambda *a, **kw: seen.update(kw))
    api.call_api("GET", "http://127.0.0.1:9/api")
    assert seen["_request_timeout"] == DEFAULT_TIMEOUT
    api.call_api("GET", "http://127.0.0.1:9/api", _request_timeout=(1, 70))
    assert seen["_request_timeout"] == (1, 70)


def test_a_missing_kubeconfig_names_the_file(tmp_path):
    with pytest.raises(KubeConfigError, match="cannot load kubeconfig .*nope"):
        client_from_kubeconfig(str(tmp_path / "nope"))


def test_retries_cover_reads_only_with_jittered_backoff():
    retry = read_retry()
    assert retry.is_retry("GET", 503)
    assert retry.is_retry("GET", 429)
    assert not retry.is_retry("POST", 503)  # an eviction or create is never replayed blindly
    assert not retry.is_retry("PATCH", 500)
    assert not retry.is_retry("GET", 404)
    assert retry.backoff_jitter > 0
