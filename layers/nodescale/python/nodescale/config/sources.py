"""Where configuration comes from: SSM parameters, the cluster's custom objects, or both at once."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .documents import parse_documents
from .errors import ConfigError, DocumentError
from .loader import ConfigResult, is_config, load, not_config_error

# (group, version, plural, kind), newest version of a kind first: the API server serves one object
# at every version of its CRD, so an object already seen at a newer version is not read again.
CLUSTER_KINDS = (
    ("karpenter.sh", "v1", "nodepools", "NodePool"),
    ("karpenter.sh", "v1beta1", "nodepools", "NodePool"),
    ("karpenter.sh", "v1alpha5", "provisioners", "Provisioner"),
    ("karpenter.k8s.aws", "v1", "ec2nodeclasses", "EC2NodeClass"),
    ("karpenter.k8s.aws", "v1beta1", "ec2nodeclasses", "EC2NodeClass"),
    ("karpenter.k8s.aws", "v1alpha1", "awsnodetemplates", "AWSNodeTemplate"),
)
_PAGE = 500


def read_ssm_documents(ssm_client: Any, path: str) -> tuple[list[tuple[str, dict]], list[ConfigError]]:
    """Every parameter under ``path`` (recursive, decrypted), one YAML/JSON text each, in name order.

    A parameter that is not YAML/JSON, or holds anything but NodePools and node classes (a misspelled
    ``kind:`` included), is reported and skipped; the others still count.
    """
    path = "/" + path.strip("/") if path.strip("/") else "/"
    params: list[dict] = []
    kwargs: dict[str, Any] = {"Path": path, "Recursive": True, "WithDecryption": True, "MaxResults": 10}
    while True:
        page = ssm_client.get_parameters_by_path(**kwargs)
        params.extend(page.get("Parameters") or [])
        token = page.get("NextToken")
        if not token:
            break
        kwargs["NextToken"] = token
    docs: list[tuple[str, dict]] = []
    errors: list[ConfigError] = []
    for param in sorted(params, key=lambda p: p["Name"]):
        try:
            parsed = parse_documents(param.get("Value") or "", f"ssm:{param['Name']}")
        except DocumentError as exc:
            errors.append(exc.error)
            continue
        for source, doc in parsed:
            if is_config(doc):
                docs.append((source, doc))
            else:
                errors.append(not_config_error(source, doc))
    return docs, errors


def load_from_ssm(ssm_client: Any, path: str) -> ConfigResult:
    docs, errors = read_ssm_documents(ssm_client, path)
    return load(docs, errors)


def read_cluster_documents(custom_objects_api: Any) -> list[tuple[str, dict]]:
    """The configuration objects in the cluster, as ``("cluster:<Kind>/<name>", object)``.

    A kind whose CRD is not installed (404) is simply absent. Any other API error is raised: an
    unreadable cluster must not look like a cluster without NodePools.
    """
    docs: list[tuple[str, dict]] = []
    seen: set[tuple[str, str]] = set()
    for group, version, plural, kind in CLUSTER_KINDS:
        for obj in _list_all(custom_objects_api, group, version, plural):
            name = (obj.get("metadata") or {}).get("name") or ""
            if (kind, name) in seen:
                continue
            seen.add((kind, name))
            obj = dict(obj)
            obj.setdefault("apiVersion", f"{group}/{version}")
            obj.setdefault("kind", kind)
            docs.append((f"cluster:{kind}/{name}", obj))
    return docs


def _list_all(api: Any, group: str, version: str, plural: str) -> list[dict]:
    out: list[dict] = []
    token = None
    while True:
        kwargs: dict[str, Any] = {"limit": _PAGE}
        if token:
            kwargs["_continue"] = token
        try:
            page = api.list_cluster_custom_object(group, version, plural, **kwargs)
        except Exception as exc:
            if getattr(exc, "status", None) == 404:
                return out
            raise
        out.extend(page.get("items") or [])
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return out


def load_from_cluster(custom_objects_api: Any) -> ConfigResult:
    return load(read_cluster_documents(custom_objects_api))


def load_all(
    *,
    documents: Iterable[tuple[str, dict]] = (),
    ssm_client: Any = None,
    ssm_path: str | None = None,
    custom_objects_api: Any = None,
) -> ConfigResult:
    """Every source at once, so a name defined in two of them is reported with both places."""
    docs = list(documents)
    errors: list[ConfigError] = []
    if ssm_client is not None and ssm_path:
        ssm_docs, errors = read_ssm_documents(ssm_client, ssm_path)
        docs += ssm_docs
    if custom_objects_api is not None:
        docs += read_cluster_documents(custom_objects_api)
    return load(docs, errors)
