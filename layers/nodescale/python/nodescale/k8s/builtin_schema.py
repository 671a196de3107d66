"""Built-in Kubernetes objects (Deployment, Pod, Node...) checked against Kubernetes' own OpenAPI schema,
strictly, as `kubectl apply --validate=strict` and the API server check them: unknown fields, values of the
wrong type, missing required fields and values outside an enum are errors.

The schemas come from the `kubernetes-validate` package (Kubernetes' OpenAPI documents per release,
converted to JSON Schema, with a "strict" variant that forbids undeclared fields). It is about 70 MB
installed, so it is not in the Lambda layer (requirements.txt): the functions never read built-in kinds
from files, only `nodescale plan -f` does. It is an optional import; without it :func:`checker` raises
SchemaUnavailable saying how to install it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

from ..config.errors import ConfigError, show
from ..config.strict import suggest

PACKAGE = "kubernetes-validate"
PIN = "kubernetes-validate==1.37.0"
# At most this many allowed field names are listed when no single one is close to a misspelled field.
_MAX_ALLOWED_LISTED = 40

Check = Callable[[Mapping, str], "list[ConfigError] | None"]


class SchemaUnavailable(Exception):
    """Kubernetes' schemas cannot be loaded; the message says what to install."""


def is_builtin_api(api_version: object) -> bool:
    """An apiVersion of Kubernetes itself: the core group (``v1``), a group without a dot (``apps/v1``) or a
    ``*.k8s.io`` group (``rbac.authorization.k8s.io/v1``); ``x-k8s.io`` groups are SIG projects' CRDs."""
    if not isinstance(api_version, str) or not api_version:
        return False
    group = api_version.rpartition("/")[0]
    return "." not in group or (group.endswith(".k8s.io") and not group.endswith(".x-k8s.io"))


def checker(kubernetes_version: str | None = None) -> Check:
    """A function giving every schema error of one built-in object (None for a kind without a schema)."""
    try:
        from kubernetes_validate import utils
    except ImportError:
        raise SchemaUnavailable(
            f"the {PACKAGE} package, which holds Kubernetes' schemas, is not installed: "
            f"pip install '{PIN}' (or the nodescale[plan] extra), or pass --validate=ignore"
        ) from None
    version = kubernetes_version or utils.latest_version()
    folder = f"kubernetes-json-schema/v{version}-local-strict"
    try:
        definitions = utils.schema_contents(f"{folder}/_definitions.json", version)
    except Exception as exc:  # VersionNotSupportedError, a broken install
        raise SchemaUnavailable(f"{PACKAGE} has no schemas for Kubernetes {version} ({exc})") from None
    validator = lru_cache(maxsize=None)(lambda api, kind: _validator(utils, folder, version, definitions, api, kind))

    def check(doc: Mapping, source: str) -> list[ConfigError] | None:
        api, kind = doc.get("apiVersion"), doc.get("kind")
        if not is_builtin_api(api) or not isinstance(kind, str) or not kind:
            return None
        v = validator(api, kind)
        if v is None:
            return None
        where = f"{source}: {kind} {_name(doc)}"
        return [ConfigError(where, path, message)
                for path, message in sorted(_problems(v, dict(doc)), key=lambda pm: pm[0])]

    return check


def _validator(utils: Any, folder: str, version: str, definitions: dict, api: str, kind: str) -> Any:
    import jsonschema
    from referencing import Registry, Resource

    # The package's own file naming: rbac.authorization.k8s.io/v1 -> rbac-v1, v1 -> v1.
    short = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api)
    if not re.fullmatch(r"[a-z0-9-]+", kind.lower() + short):
        return None
    try:
        schema = utils.schema_contents(f"{folder}/{kind.lower()}-{short}.json", version)
    except FileNotFoundError:
        return None
    if (schema.get("properties") or {}).get("kind", {}).get("enum", [kind]) != [kind]:
        return None  # the file names the kind case-insensitively; "deployment" is not a kind
    registry = Resource.from_contents(definitions) @ Registry()
    return jsonschema.Draft202012Validator(schema, registry=registry)


def _name(doc: Mapping) -> str:
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), Mapping) else {}
    name = meta.get("name") or meta.get("generateName") or "(no name)"
    return f"{meta['namespace']}/{name}" if meta.get("namespace") else str(name)


def _path(parts: Any) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def _problems(validator: Any, doc: dict) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for e in validator.iter_errors(doc):
        where = _path(e.absolute_path)
        if e.validator == "additionalProperties":
            declared = sorted((e.schema.get("properties") or {}).keys())
            for key in e.instance:
                if key not in declared:
                    field = f"{where}.{key}" if where else str(key)
                    # kubectl's words, which name the whole path themselves
                    found.append(("", f'unknown field "{field}"; {_allowed(str(key), declared)}'))
        elif e.validator == "required":
            missing = e.message.split("'")[1] if "'" in e.message else str(e.validator_value)
            found.append((f"{where}.{missing}" if where else missing, "Required value"))
        elif e.validator in ("type", "oneOf", "anyOf"):
            found.append((where, f"{show(e.instance)} is not allowed; expected {_types(e)}"))
        elif e.validator == "enum":
            allowed = ", ".join(str(v) for v in e.validator_value if v is not None)
            found.append((where, f"{show(e.instance)} is not allowed; allowed are {allowed}"))
        else:
            found.append((where, e.message))
    return found


def _allowed(key: str, declared: list[str]) -> str:
    close = suggest(key, declared)
    if close:
        return f"did you mean {close}?"
    if not declared:
        return "no fields are allowed here"
    listed = declared[:_MAX_ALLOWED_LISTED]
    more = f" and {len(declared) - len(listed)} more" if len(declared) > len(listed) else ""
    return f"allowed are {', '.join(listed)}{more}"


_TYPE_WORDS = {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "true or false",
               "object": "a mapping of fields", "array": "a list"}


def _types(e: Any) -> str:
    """What the schema takes where ``e`` failed: the types of a ``type`` rule or of each ``oneOf`` branch."""
    types: list[str] = []
    rules = [e.schema] if e.validator == "type" else list(e.validator_value)
    for rule in rules:
        t = rule.get("type") if isinstance(rule, Mapping) else None
        for name in [t] if isinstance(t, str) else (t or []):
            if name != "null" and name not in types:
                types.append(name)
    words = [_TYPE_WORDS.get(t, t) for t in types] or ["another value"]
    return " or ".join(words)
