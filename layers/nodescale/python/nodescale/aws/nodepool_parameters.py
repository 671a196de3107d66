"""NodePools and node classes kept in SSM parameters: every parameter under the stack's path, read and
parsed one parameter at a time, so a broken one is an error of its own.

SecureString parameters are read decrypted. SSM decrypts with the caller's permission on each parameter's KMS
key, and one key the caller may not use fails the whole path read (AccessDeniedException naming kms:Decrypt):
then the path is read again undecrypted and each SecureString alone, so only the parameters under that key are
errors (naming the parameter and the denial) and the others still count."""

from __future__ import annotations

import logging
from typing import Any

from botocore.exceptions import ClientError

from ..config.documents import read_documents
from ..config.errors import ConfigError
from ..config.loader import ConfigResult, is_config, load, not_config_error


def read_ssm_documents(ssm_client: Any, path: str) -> tuple[list[tuple[str, dict]], list[ConfigError]]:
    """Every parameter under ``path`` (recursive, decrypted), one YAML/JSON text each, in name order.

    A document that is not YAML/JSON (or passes a bound of the YAML loader), or holds anything but NodePools and node classes (a misspelled
    ``kind:`` included), is reported and skipped; the others still count.
    """
    path = "/" + path.strip("/") if path.strip("/") else "/"
    errors: list[ConfigError] = []
    try:
        params = _by_path(ssm_client, path, decrypt=True)
    except ClientError as exc:
        if _code(exc) not in _KEY_ERRORS:
            raise
        log.warning("a NodePool parameter's KMS key refused the path read: reading each SecureString alone",
                    extra={"path": path, "error": str(exc)})
        params, errors = _decrypt_one_by_one(ssm_client, _by_path(ssm_client, path, decrypt=False))
    docs: list[tuple[str, dict]] = []
    for param in sorted(params, key=lambda p: p["Name"]):
        parsed, bad = read_documents(param.get("Value") or "", f"ssm:{param['Name']}")
        errors.extend(bad)  # a bad document is an error of its own: the others of the parameter still count
        for source, doc in parsed:
            if is_config(doc):
                docs.append((source, doc))
            else:
                errors.append(not_config_error(source, doc))
    return docs, errors


log = logging.getLogger(__name__)

# What SSM answers a decrypting read when KMS refused the caller or the key (disabled, deleted, not found).
_KEY_ERRORS = {"AccessDeniedException", "InvalidKeyId", "KMSAccessDeniedException", "KMSDisabledException",
               "KMSNotFoundException", "KMSInvalidStateException"}


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code") or "")


def _by_path(ssm_client: Any, path: str, *, decrypt: bool) -> list[dict]:
    params: list[dict] = []
    kwargs: dict[str, Any] = {"Path": path, "Recursive": True, "WithDecryption": decrypt, "MaxResults": 10}
    while True:
        page = ssm_client.get_parameters_by_path(**kwargs)
        params.extend(page.get("Parameters") or [])
        token = page.get("NextToken")
        if not token:
            return params
        kwargs["NextToken"] = token


def _decrypt_one_by_one(ssm_client: Any, params: list[dict]) -> tuple[list[dict], list[ConfigError]]:
    """The parameters with each SecureString read decrypted alone; one its key refuses is an error naming it."""
    out: list[dict] = []
    errors: list[ConfigError] = []
    for param in params:
        if param.get("Type") != "SecureString":
            out.append(param)
            continue
        try:
            out.append(ssm_client.get_parameter(Name=param["Name"], WithDecryption=True)["Parameter"])
        except ClientError as exc:
            if _code(exc) not in _KEY_ERRORS:
                raise
            message = exc.response.get("Error", {}).get("Message") or str(exc)
            errors.append(ConfigError(
                f"ssm:{param['Name']}", "",
                f"this SecureString parameter could not be decrypted ({_code(exc)}: {message}); its NodePools and "
                "node classes are left out: grant the functions kms:Decrypt on its key (deploy with "
                "-c nodePoolParameterKey=<key ARN>), or store it under the AWS-managed key alias/aws/ssm",
            ))
    return out, errors


def load_from_ssm(ssm_client: Any, path: str) -> ConfigResult:
    docs, errors = read_ssm_documents(ssm_client, path)
    return load(docs, errors)
