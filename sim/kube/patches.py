"""The three patch formats the API accepts: JSON merge, JSON (RFC 6902) and strategic merge.

Strategic merge knows the merge keys of the lists clients patch on pods, nodes and workloads;
lists it does not know are replaced, as the real server does for atomic lists (taints,
tolerations, containerStatuses...).
"""

from __future__ import annotations

import copy
from typing import Any

from .errors import ApiError

# Field name -> merge key for lists merged element-wise in strategic merge patches.
MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "conditions": "type",
    "addresses": "type",
    "ownerReferences": "uid",
    "resourceClaims": "name",
}
# Lists of scalars merged as sets in strategic merge patches.
MERGED_SCALAR_LISTS = frozenset({"finalizers", "podCIDRs"})

_DIRECTIVE = "$patch"


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: maps merge recursively, null deletes, everything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _invalid_patch(message: str) -> ApiError:
    return ApiError(422, "Invalid", message)


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise _invalid_patch(f'invalid JSON pointer "{path}": must start with "/"')
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _container(doc: Any, parts: list[str], path: str) -> Any:
    current = doc
    for part in parts:
        if isinstance(current, dict):
            if part not in current:
                raise _invalid_patch(f"jsonpatch: path {path} does not exist: missing value")
            current = current[part]
        elif isinstance(current, list):
            index = _index(part, len(current), path)
            current = current[index]
        else:
            raise _invalid_patch(f"jsonpatch: path {path} does not exist: missing value")
    return current


def _index(part: str, length: int, path: str, allow_end: bool = False) -> int:
    if part == "-" and allow_end:
        return length
    if not part.isdigit():
        raise _invalid_patch(f"jsonpatch: invalid array index {part!r} in {path}")
    index = int(part)
    if index > length or (index == length and not allow_end):
        raise _invalid_patch(f"jsonpatch: array index {index} out of bounds in {path}")
    return index


def _get(doc: Any, path: str) -> Any:
    return _container(doc, _pointer(path), path)


def _remove(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    if not parts:
        raise _invalid_patch("jsonpatch: cannot remove the whole document")
    parent = _container(doc, parts[:-1], path)
    last = parts[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise _invalid_patch(f"jsonpatch: unable to remove nonexistent key {last!r}: missing value")
        return parent.pop(last)
    if isinstance(parent, list):
        return parent.pop(_index(last, len(parent), path))
    raise _invalid_patch(f"jsonpatch: path {path} does not exist")


def _add(doc: Any, path: str, value: Any, replace: bool = False) -> Any:
    parts = _pointer(path)
    if not parts:
        return value
    parent = _container(doc, parts[:-1], path)
    last = parts[-1]
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise _invalid_patch(f"jsonpatch: replace operation does not apply: doc is missing key: {path}: missing value")
        parent[last] = value
    elif isinstance(parent, list):
        if replace:
            parent[_index(last, len(parent), path)] = value
        else:
            parent.insert(_index(last, len(parent), path, allow_end=True), value)
    else:
        raise _invalid_patch(f"jsonpatch: path {path} does not exist")
    return doc


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902 operations applied to a copy of `target`."""
    if not isinstance(operations, list):
        raise ApiError(400, "BadRequest", "json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    doc = copy.deepcopy(target)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise _invalid_patch(f"jsonpatch: invalid operation {op!r}: needs 'op' and 'path'")
        kind, path = op["op"], op["path"]
        if kind in ("add", "replace"):
            if "value" not in op:
                raise _invalid_patch(f"jsonpatch: {kind} operation on {path} has no value")
            doc = _add(doc, path, copy.deepcopy(op["value"]), replace=kind == "replace")
        elif kind == "remove":
            _remove(doc, path)
        elif kind == "move":
            value = _remove(doc, op.get("from", ""))
            doc = _add(doc, path, value)
        elif kind == "copy":
            doc = _add(doc, path, copy.deepcopy(_get(doc, op.get("from", ""))))
        elif kind == "test":
            if _get(doc, path) != op.get("value"):
                raise _invalid_patch(f"jsonpatch: testing value {path} failed: test failed")
        else:
            raise _invalid_patch(f"jsonpatch: unexpected kind of operation {kind!r}")
    return doc


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Apply a strategic merge patch as the real server does for built-in kinds."""
    if not isinstance(patch, dict):
        raise ApiError(400, "BadRequest", "strategic merge patch must be a JSON object")
    return _smp_map(target if isinstance(target, dict) else {}, patch)


def _smp_map(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    directive = patch.get(_DIRECTIVE)
    if directive == "delete":
        return {}
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != _DIRECTIVE}
    if directive is not None:
        raise ApiError(400, "BadRequest", f"Unknown patch type: {directive}")
    result = dict(target)
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key in (_DIRECTIVE, "$retainKeys"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if isinstance(result.get(field), list):
                result[field] = [v for v in result[field] if v not in value]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            if value.get(_DIRECTIVE) == "delete":
                result.pop(key, None)
            else:
                current = result.get(key)
                result[key] = _smp_map(current if isinstance(current, dict) else {}, value)
        elif isinstance(value, list):
            result[key] = _smp_list(key, result.get(key), value)
        else:
            result[key] = value
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _smp_list(field: str, current: Any, patch: list[Any]) -> list[Any]:
    if any(isinstance(item, dict) and item.get(_DIRECTIVE) == "replace" for item in patch):
        return [copy.deepcopy(i) for i in patch if not (isinstance(i, dict) and i.get(_DIRECTIVE) == "replace")]
    existing = list(current) if isinstance(current, list) else []
    if field in MERGED_SCALAR_LISTS:
        merged = list(existing)
        for item in patch:
            if item not in merged:
                merged.append(item)
        return merged
    merge_key = MERGE_KEYS.get(field)
    if merge_key is None or not all(isinstance(i, dict) for i in patch):
        return [copy.deepcopy(i) for i in patch]
    merged = [dict(i) if isinstance(i, dict) else i for i in existing]
    for item in patch:
        if merge_key not in item:
            raise ApiError(400, "BadRequest", f"map: {item} does not contain declared merge key: {merge_key}")
        position = next(
            (n for n, e in enumerate(merged) if isinstance(e, dict) and e.get(merge_key) == item[merge_key]),
            None,
        )
        if item.get(_DIRECTIVE) == "delete":
            if position is not None:
                merged.pop(position)
            continue
        if position is None:
            merged.append(_smp_map({}, item))
        else:
            merged[position] = _smp_map(merged[position], item)
    return merged


PATCH_CONTENT_TYPES = {
    "application/merge-patch+json": "merge",
    "application/json-patch+json": "json",
    "application/strategic-merge-patch+json": "strategic",
    "application/apply-patch+yaml": "apply",
}


def apply_patch(target: dict[str, Any], patch: Any, patch_type: str) -> dict[str, Any]:
    if patch_type == "merge":
        if not isinstance(patch, dict):
            raise ApiError(400, "BadRequest", "merge patch must be a JSON object")
        return merge_patch(copy.deepcopy(target), patch)
    if patch_type == "json":
        return json_patch(target, patch)
    if patch_type == "strategic":
        return strategic_merge_patch(copy.deepcopy(target), patch)
    if patch_type == "apply":
        # Server-side apply without field ownership: the applied configuration wins field by field.
        if not isinstance(patch, dict):
            raise ApiError(400, "BadRequest", "apply patch must be an object")
        return merge_patch(copy.deepcopy(target), patch)
    raise ApiError(415, "UnsupportedMediaType", f"unsupported patch type {patch_type!r}")
