"""NodePool configuration: Karpenter's three API generations, from any source, to one model (no I/O here:
the sources are read by aws/nodepool_parameters.py and k8s/nodepool_objects.py).

    parse_documents(text, source) -> [(source#i, object)]     YAML/JSON text, DocumentError on bad text
    load(documents) -> ConfigResult                           convert + validate; bad ones become errors
    validate(documents) -> [ConfigError]                      load's pass but references (deploy-time check)

Every configuration object is checked strictly (strict.py, against the field table in schema.py): an
unknown field or a misspelled Karpenter kind is an error naming the path and the likely intended name.
"""

from .documents import parse_documents
from .errors import ConfigError, DocumentError
from .loader import ConfigResult, is_config, load, validate

__all__ = ["ConfigError", "ConfigResult", "DocumentError", "is_config", "load", "parse_documents", "validate"]
