"""Server-side field validation: the `fieldValidation` query parameter of create, update and patch.

kube-apiserver decodes a request's object strictly when asked to: `Strict` refuses an object with
fields its schema does not declare (400 BadRequest, `strict decoding error: unknown field "spec.foo"`),
`Warn` accepts it and says so in a `Warning` header per field, `Ignore` says nothing. kubectl sends
`fieldValidation=Strict` with `kubectl apply`/`create`/`replace` (its default `--validate=strict`) once
the OpenAPI v3 document shows the server supports the parameter.

sim checks only when a request asks (a request without the parameter is not walked, to stay fast;
kube-apiserver would warn), and it does not drop unknown fields from what it stores.
"""

from __future__ import annotations

from typing import Any

from . import errors
from .errors import ApiError

_MODES = ("Ignore", "Warn", "Strict")


def mode(query: dict[str, str]) -> str | None:
    """The request's `fieldValidation` (None when absent), or a 400 for a value kube-apiserver refuses."""
    value = query.get("fieldValidation")
    if value is None or value == "":
        return None
    if value not in _MODES:
        raise errors.bad_request(
            f'fieldValidation: Unsupported value: "{value}": supported values: "Ignore", "Strict", "Warn"'
        )
    return value


def _resolve(schema: dict[str, Any], components: dict[str, Any]) -> dict[str, Any]:
    seen = 0
    while "$ref" in schema and seen < 32:
        schema = components.get(schema["$ref"].rsplit("/", 1)[-1], {})
        seen += 1
    return schema


def unknown_fields(obj: Any, schema: dict[str, Any], components: dict[str, Any], path: str = "",
                   patch: bool = False) -> list[str]:
    """Paths (`spec.template.spec.containers[0].foo`) of the fields of `obj` that `schema` does not declare.

    With `patch`, strategic-merge-patch directives (`$patch`, `$setElementOrder/...`, `$retainKeys`,
    `$deleteFromPrimitiveList/...`) are not fields.
    """
    schema = _resolve(schema, components)
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    if isinstance(obj, list):
        items = schema.get("items")
        if not isinstance(items, dict):
            return []
        found: list[str] = []
        for n, item in enumerate(obj):
            found += unknown_fields(item, items, components, f"{path}[{n}]", patch)
        return found
    if not isinstance(obj, dict):
        return []
    properties = schema.get("properties")
    extra = schema.get("additionalProperties")
    found = []
    for key, value in obj.items():
        child = f"{path}.{key}" if path else key
        if patch and key.startswith("$"):
            continue
        if isinstance(properties, dict) and key in properties:
            found += unknown_fields(value, properties[key], components, child, patch)
        elif isinstance(extra, dict):
            found += unknown_fields(value, extra, components, child, patch)
        elif isinstance(properties, dict) and extra is not True:
            found.append(child)
    return found


def check(kind: str, version: str, fields: list[str], validation: str | None, verb: str) -> list[str]:
    """Apply the request's mode to the unknown fields found: a 400 under Strict, else the warnings to send.

    `verb` is `create`/`update` (kube-apiserver words the error as a failed decoding of the object),
    `patch` or `apply` (server-side apply: `field not declared in schema`).
    """
    if not fields or validation in (None, "Ignore"):
        return []
    if verb == "apply":
        problems = [f".{field}: field not declared in schema" for field in fields]
    else:
        problems = [f'unknown field "{field}"' for field in fields]
    if validation == "Warn":
        return problems
    if verb == "apply":
        raise ApiError(400, "BadRequest", "failed to create typed patch object: " + ", ".join(problems))
    message = "strict decoding error: " + ", ".join(problems)
    if verb != "patch":
        message = f'{kind} in version "{version}" cannot be handled as a {kind}: {message}'
    raise ApiError(400, "BadRequest", message)


def warning_header(text: str) -> str:
    """A `Warning` header value as kube-apiserver writes one (RFC 7234, code 299, agent `-`)."""
    return '299 - "' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
