"""NodePool configuration: Karpenter's three API generations, from SSM and the cluster, to one model.

    parse_documents(text, source) -> [(source#i, object)]     YAML/JSON text, DocumentError on bad text
    load(documents) -> ConfigResult                           convert + validate; bad ones become errors
    load_from_ssm(ssm_client, path) / load_from_cluster(api) / load_all(...)
"""

from .documents import parse_documents
from .errors import ConfigError, DocumentError
from .loader import ConfigResult, is_config, load
from .sources import (
    load_all,
    load_from_cluster,
    load_from_ssm,
    read_cluster_documents,
    read_ssm_documents,
)

__all__ = [
    "ConfigError",
    "ConfigResult",
    "DocumentError",
    "is_config",
    "load",
    "load_all",
    "load_from_cluster",
    "load_from_ssm",
    "parse_documents",
    "read_cluster_documents",
    "read_ssm_documents",
]
