"""kube-apiserver's handling of a custom resource against its CRD's structural schema, on create and update.

What apiextensions-apiserver does after decoding (the unknown-field refusal under fieldValidation=Strict
happens before, in server.py through fieldvalidation.py):
- pruning: fields the schema does not declare are dropped, at any depth, except under
  `x-kubernetes-preserve-unknown-fields: true`; apiVersion, kind and metadata are the server's own;
- a null where the schema does not say `nullable: true` is dropped too, before validation;
- validation: a value of the wrong type is a 422 with one cause per field
  (`spec.weight: Invalid value: "string": spec.weight in body must be of type integer: "string"`), as are
  values outside an `enum` and missing `required` fields.
"""

from __future__ import annotations

from typing import Any

from .validation import Errors

_SERVER_FIELDS = ("apiVersion", "kind", "metadata")


def schema_of(crd: dict[str, Any] | None, version: str) -> dict[str, Any] | None:
    """The openAPIV3Schema of one version of a CRD, or None when it has none."""
    for entry in ((crd or {}).get("spec") or {}).get("versions") or []:
        if entry.get("name") == version:
            schema = (entry.get("schema") or {}).get("openAPIV3Schema")
            return schema if isinstance(schema, dict) else None
    return None


def prune(obj: Any, schema: dict[str, Any], root: bool = True) -> None:
    """Drop, in place, what `schema` does not declare and nulls it does not allow."""
    if schema.get("x-kubernetes-preserve-unknown-fields") and "properties" not in schema:
        return
    if isinstance(obj, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for item in obj:
                prune(item, items, False)
        return
    if not isinstance(obj, dict):
        return
    properties = schema.get("properties")
    extra = schema.get("additionalProperties")
    for key in list(obj):
        if root and key in _SERVER_FIELDS:
            continue
        sub = properties.get(key) if isinstance(properties, dict) else None
        if sub is None and isinstance(extra, dict):
            sub = extra
        if sub is None:
            if not (extra is True or schema.get("x-kubernetes-preserve-unknown-fields")):
                del obj[key]
            continue
        if obj[key] is None and not sub.get("nullable"):
            del obj[key]
            continue
        prune(obj[key], sub, False)


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else "null"


def _fits(value: Any, schema: dict[str, Any]) -> tuple[bool, str]:
    """Whether `value` is of the schema's type, and the type named in the message when it is not."""
    if schema.get("x-kubernetes-int-or-string"):
        return _json_type(value) in ("integer", "string"), "integer,string"
    wanted = schema.get("type")
    if not wanted:
        return True, ""
    got = _json_type(value)
    return got == wanted or (wanted == "number" and got == "integer"), wanted


def check(obj: Any, schema: dict[str, Any], errs: Errors, path: str = "") -> None:
    """Every type, enum and required error of `obj` (already pruned) against `schema`, into `errs`."""
    ok, wanted = _fits(obj, schema)
    if not ok:
        errs.type_invalid(path, _json_type(obj), wanted)
        return
    if "enum" in schema and obj not in schema["enum"]:
        errs.not_supported(path, obj, [str(v) for v in schema["enum"]])
    if isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(obj):
            check(item, schema["items"], errs, f"{path}[{i}]")
    elif isinstance(obj, dict):
        properties = schema.get("properties") or {}
        for name in schema.get("required") or []:
            if name not in obj:
                errs.required(f"{path}.{name}" if path else name)
        extra = schema.get("additionalProperties")
        for key, value in obj.items():
            if not path and key in _SERVER_FIELDS:
                continue
            sub = properties.get(key) if isinstance(properties, dict) else None
            if sub is None and isinstance(extra, dict):
                sub = extra
            if isinstance(sub, dict):
                check(value, sub, errs, f"{path}.{key}" if path else key)
