"""The Kubernetes API client every function uses: from KUBECONFIG locally, from EKS in Lambda.

Locally (sim/, a shell, tests) the kubeconfig decides everything. In Lambda there is no kubeconfig:
the endpoint and CA come from `eks:DescribeCluster` and the bearer token from the function's own
credentials (see `token.py`), refreshed before each request needs it.
"""

from __future__ import annotations

import base64
import hashlib
import os
import tempfile
from typing import Any

import boto3
import yaml
from botocore.exceptions import BotoCoreError, ClientError
from kubernetes.client.configuration import Configuration
from urllib3.util.retry import Retry

from ..settings import Settings
from .http import ApiClient
from .token import TokenSource

CONNECT_TIMEOUT_SECONDS = 5.0
READ_TIMEOUT_SECONDS = 30.0
DEFAULT_TIMEOUT = (CONNECT_TIMEOUT_SECONDS, READ_TIMEOUT_SECONDS)
# A few parallel calls (evictions, a list beside a watch); more would only queue at the API server.
POOL_MAXSIZE = 8
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


class KubeConfigError(RuntimeError):
    """The cluster cannot be reached with what the environment gives: the message says what is missing."""


class KubeApiClient(ApiClient):
    """An ApiClient whose requests time out (connect 5 s, read 30 s) unless the caller says otherwise."""

    default_timeout: tuple[float, float] = DEFAULT_TIMEOUT

    def call_api(self, method, url, header_params=None, body=None, post_params=None, _request_timeout=None):  # type: ignore[override]
        return super().call_api(
            method,
            url,
            header_params=header_params,
            body=body,
            post_params=post_params,
            _request_timeout=_request_timeout or self.default_timeout,
        )


def read_retry() -> Retry:
    """Retries with jittered exponential backoff for reads only; writes are never replayed blindly.

    Connection failures are retried for every method because nothing reached the server.
    """
    return Retry(
        total=5,
        connect=3,
        read=2,
        status=3,
        other=0,
        allowed_methods=frozenset({"GET", "HEAD"}),
        status_forcelist=RETRY_STATUSES,
        backoff_factor=0.2,
        backoff_jitter=0.3,
        backoff_max=5.0,
        respect_retry_after_header=True,
        raise_on_status=False,
        raise_on_redirect=False,
    )


def tune(configuration: Configuration) -> Configuration:
    """Pool size and retry policy shared by both ways of building a client."""
    configuration.connection_pool_maxsize = POOL_MAXSIZE
    configuration.retries = read_retry()
    return configuration


def client_from_kubeconfig(path: str | None = None, context: str | None = None) -> KubeApiClient:
    """A client for the kubeconfig at `path` (default: $KUBECONFIG or ~/.kube/config)."""
    configuration = token_kubeconfig(path, context) if path else None
    if configuration is not None:
        return KubeApiClient(configuration=tune(configuration))
    # Any other kubeconfig (exec plugins, client certificates, several files...) is read by kubernetes.config,
    # imported here only: with requests, oauthlib and pydantic it would double a function's client set-up.
    from kubernetes import config as k8s_config
    from kubernetes.config.config_exception import ConfigException

    configuration = Configuration()
    try:
        k8s_config.load_kube_config(config_file=path, context=context, client_configuration=configuration)
    except (ConfigException, OSError) as exc:
        where = path or os.environ.get("KUBECONFIG") or "~/.kube/config"
        raise KubeConfigError(f"cannot load kubeconfig {where}: {exc}") from None
    return KubeApiClient(configuration=tune(configuration))


def _named(entries: Any, name: Any) -> dict[str, Any] | None:
    """The one entry called `name` of a kubeconfig list (None when absent, repeated or malformed)."""
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        return None
    found = [e for e in entries if e.get("name") == name]
    return found[0] if len(found) == 1 else None


def _token_entries(path: str, context: str | None) -> tuple[dict[str, Any], str, str] | None:
    """(cluster, its name, bearer token) when the file is one kubeconfig of the plain token shape."""
    try:
        with open(os.path.expanduser(path)) as fh:
            doc = yaml.safe_load(fh)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    if not isinstance(doc, dict):
        return None
    ctx = _named(doc.get("contexts"), context or doc.get("current-context"))
    ctx = ctx.get("context") if ctx else None
    if not isinstance(ctx, dict):
        return None
    cluster = _named(doc.get("clusters"), ctx.get("cluster"))
    user = _named(doc.get("users"), ctx.get("user"))
    cluster_fields = cluster.get("cluster") if cluster else None
    user_fields = user.get("user") if user else None
    if not isinstance(cluster_fields, dict) or not isinstance(user_fields, dict) or set(user_fields) != {"token"}:
        return None
    token = user_fields["token"]
    if not isinstance(token, str) or not token or not set(cluster_fields) <= _PLAIN_CLUSTER_FIELDS:
        return None
    return cluster_fields, str(ctx.get("cluster")), token


_PLAIN_CLUSTER_FIELDS = frozenset({"server", "certificate-authority-data", "insecure-skip-tls-verify"})


def token_kubeconfig(path: str, context: str | None = None) -> Configuration | None:
    """The configuration kubernetes.config makes of a kubeconfig holding a server, its CA and a bearer token
    (sim's, a test's, a service account's), read without importing kubernetes.config (#32, cold start).

    None for any other shape, which kubernetes.config then reads: several files, a token file, client
    certificates, exec or auth-provider plugins, a proxy or TLS server name, a CA that is not base64.
    """
    entries = None if os.pathsep in path else _token_entries(path, context)
    if entries is None:
        return None
    cluster, cluster_name, token = entries
    server, ca_data = cluster.get("server"), cluster.get("certificate-authority-data")
    skip_verify = cluster.get("insecure-skip-tls-verify", None)
    if not isinstance(server, str) or not server or not isinstance(ca_data, (str, type(None))):
        return None
    if ca_data is not None and not _is_base64(ca_data):
        return None
    configuration = Configuration()
    configuration.host = server.rstrip("/")
    if configuration.host.startswith("https"):
        configuration.ssl_ca_cert = write_ca_file(cluster_name, ca_data) if ca_data else None
        configuration.cert_file = None
        configuration.key_file = None
    if "insecure-skip-tls-verify" in cluster:
        configuration.verify_ssl = not skip_verify
    bearer = f"Bearer {token}"
    configuration.api_key["BearerToken"] = bearer

    def refresh(conf: Configuration) -> None:
        conf.api_key["BearerToken"] = bearer

    configuration.refresh_api_key_hook = refresh
    return configuration


def _is_base64(text: str) -> bool:
    try:
        base64.b64decode(text, validate=True)
    except ValueError:
        return False
    return True


def client_from_eks(
    cluster_name: str,
    region: str,
    session: boto3.Session | None = None,
    token_source: TokenSource | None = None,
) -> KubeApiClient:
    """A client for an EKS cluster, found with eks:DescribeCluster and authenticated with an STS token."""
    session = session or boto3.Session()
    try:
        cluster = session.client("eks", region_name=region).describe_cluster(name=cluster_name)["cluster"]
    except ClientError as exc:
        err = exc.response.get("Error", {})
        raise KubeConfigError(
            f"eks:DescribeCluster for cluster {cluster_name!r} in {region} failed: "
            f"{err.get('Code', '?')}: {err.get('Message', '')}"
        ) from None
    except BotoCoreError as exc:
        raise KubeConfigError(f"eks:DescribeCluster for cluster {cluster_name!r} in {region} failed: {exc}") from None
    endpoint = cluster.get("endpoint")
    ca_data = (cluster.get("certificateAuthority") or {}).get("data")
    if not endpoint or not ca_data:
        raise KubeConfigError(
            f"cluster {cluster_name!r} has no API endpoint or CA yet (status {cluster.get('status', '?')}): "
            "wait for it to be ACTIVE"
        )
    tokens = token_source or TokenSource(cluster_name, region, session)
    configuration = Configuration(host=endpoint)
    configuration.ssl_ca_cert = write_ca_file(cluster_name, ca_data)
    configuration.verify_ssl = True
    configuration.api_key = {"BearerToken": tokens.token()}
    configuration.api_key_prefix = {"BearerToken": "Bearer"}

    def refresh(conf: Configuration) -> None:
        conf.api_key["BearerToken"] = tokens.token()

    configuration.refresh_api_key_hook = refresh
    return KubeApiClient(configuration=tune(configuration))


def write_ca_file(cluster_name: str, ca_base64: str) -> str:
    """Write the cluster CA (base64 PEM from DescribeCluster) to a temp file; the path is stable per CA."""
    try:
        pem = base64.b64decode(ca_base64, validate=True)
    except ValueError:
        raise KubeConfigError(f"cluster {cluster_name!r}: certificateAuthority.data is not base64") from None
    digest = hashlib.sha256(pem).hexdigest()[:16]
    path = os.path.join(tempfile.gettempdir(), f"nodescale-ca-{digest}.pem")
    if not os.path.exists(path):
        # Written aside then renamed, so a concurrent reader never sees half a certificate.
        fd, tmp = tempfile.mkstemp(dir=tempfile.gettempdir(), prefix="nodescale-ca-", suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            fh.write(pem)
        os.replace(tmp, path)
    return path


def build_api_client(settings: Settings, session: boto3.Session | None = None) -> KubeApiClient:
    """KUBECONFIG when set (sim/, a shell, a test), otherwise the EKS cluster named in the settings."""
    if settings.kubeconfig:
        return client_from_kubeconfig(settings.kubeconfig)
    return client_from_eks(settings.cluster_name, settings.region, session)
