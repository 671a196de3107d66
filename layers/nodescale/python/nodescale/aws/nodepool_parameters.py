"""NodePools and node classes kept in SSM parameters: every parameter under the stack's path, read and
parsed one parameter at a time, so a broken one is an error of its own."""

from __future__ import annotations

from typing import Any

from ..config.documents import read_documents
from ..config.errors import ConfigError
from ..config.loader import ConfigResult, is_config, load, not_config_error


def read_ssm_documents(ssm_client: Any, path: str) -> tuple[list[tuple[str, dict]], list[ConfigError]]:
    """Every parameter under ``path`` (recursive, decrypted), one YAML/JSON text each, in name order.

    A document that is not YAML/JSON (or passes a bound of the YAML loader), or holds anything but NodePools and node classes (a misspelled
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
        parsed, bad = read_documents(param.get("Value") or "", f"ssm:{param['Name']}")
        errors.extend(bad)  # a bad document is an error of its own: the others of the parameter still count
        for source, doc in parsed:
            if is_config(doc):
                docs.append((source, doc))
            else:
                errors.append(not_config_error(source, doc))
    return docs, errors


def load_from_ssm(ssm_client: Any, path: str) -> ConfigResult:
    docs, errors = read_ssm_documents(ssm_client, path)
    return load(docs, errors)
