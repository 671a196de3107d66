"""Every configuration source at once (documents given, SSM parameters, the cluster's objects), so a name
defined in two of them is reported with both places."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..aws.nodepool_parameters import read_ssm_documents
from ..config.errors import ConfigError
from ..config.loader import ConfigResult, load
from ..k8s.nodepool_objects import read_cluster_documents


def load_all(
    *,
    documents: Iterable[tuple[str, dict]] = (),
    ssm_client: Any = None,
    ssm_path: str | None = None,
    custom_objects_api: Any = None,
) -> ConfigResult:
    docs = list(documents)
    errors: list[ConfigError] = []
    if ssm_client is not None and ssm_path:
        ssm_docs, errors = read_ssm_documents(ssm_client, ssm_path)
        docs += ssm_docs
    if custom_objects_api is not None:
        docs += read_cluster_documents(custom_objects_api)
    return load(docs, errors)
