"""`nodescale scale nodepool NAME --replicas N`: change a static NodePool's ``spec.replicas`` where it lives.

As ``kubectl scale nodepool NAME --replicas=N`` does for Karpenter v1.8+ (its NodePool CRD has a scale
subresource on ``.spec.replicas``), for the two places nodescale reads NodePools from:

- an SSM parameter under the NodePool path (the settings' ``NODESCALE_NODEPOOL_PARAMETER_PATH``): the
  parameter is rewritten with only that document's ``spec.replicas`` changed. The line is edited in
  place when that alone gives the same documents with the new count (comments and layout kept);
  otherwise the parameter is written again from its parsed documents, and the result says so;
- a karpenter.sh/v1 NodePool in the cluster: a merge patch of ``spec.replicas`` that carries the
  object's ``resourceVersion``, so a change made meanwhile is not overwritten.

Only a static pool is scaled: one without ``spec.replicas`` follows its pending pods, and Karpenter
does not let a pool switch between the two. ``N`` is a whole number, 0 or more, and at most the pool's
``limits.nodes`` where it sets one. The provisioner launches what a larger count lacks on its next pass.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from ..config.documents import DocumentError, parse_documents
from ..config.loader import convert_document
from ..config.nodepools import V1
from ..model.nodepool import NodePool

GROUP, VERSION, PLURAL = "karpenter.sh", "v1", "nodepools"


class ScaleError(ValueError):
    """The request cannot be carried out; the message says why and what is allowed."""


@dataclass
class Found:
    """Where the pool's document lives and what it says now."""

    source: str  # "ssm:<parameter>" or "cluster:NodePool/<name>"
    doc: dict[str, Any]
    pool: NodePool | None
    problems: list[str] = field(default_factory=list)  # why the document is no valid NodePool, if it is not
    parameter: dict[str, Any] | None = None  # the SSM parameter (Name, Value, Type)
    index: int = 0  # the document's place among the parameter's documents


@dataclass
class ScaleResult:
    nodepool: str
    source: str
    replicas_from: int
    replicas_to: int
    dry_run: bool
    notes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.replicas_from != self.replicas_to

    def to_dict(self) -> dict[str, Any]:
        return {"nodePool": self.nodepool, "source": self.source, "replicas": self.replicas_to,
                "previousReplicas": self.replicas_from, "changed": self.changed, "dryRun": self.dry_run,
                "notes": self.notes}


def parse_replicas(text: object) -> int:
    """``--replicas``: a whole number, 0 or more."""
    value = text.strip() if isinstance(text, str) else text
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and re.fullmatch(r"\+?\d+", value):
        number = int(value)
    else:
        raise ScaleError(f"--replicas {text!r} is not allowed; expected a whole number, 0 or more")
    return number


def scale(
    name: str,
    replicas: int,
    *,
    ssm: Any = None,
    ssm_path: str | None = None,
    custom_objects: Any = None,
    dry_run: bool = False,
) -> ScaleResult:
    """Set static NodePool ``name``'s ``spec.replicas`` to ``replicas`` in the source that defines it."""
    if replicas < 0:
        raise ScaleError(f"--replicas {replicas} is not allowed; expected a whole number, 0 or more")
    found = _find(name, ssm, ssm_path, custom_objects)
    spec = found.doc.get("spec") if isinstance(found.doc.get("spec"), Mapping) else {}
    if found.doc.get("apiVersion") != V1 or spec.get("replicas") is None:
        raise ScaleError(
            f"NodePool {name} ({found.source}) is not static: it has no spec.replicas, so its nodes follow its "
            "pending pods; only a karpenter.sh/v1 NodePool with spec.replicas is scaled (a pool cannot switch "
            "between the two)")
    if found.pool is None:
        raise ScaleError(f"NodePool {name} ({found.source}) is invalid as it stands ({'; '.join(found.problems)}); "
                         "fix it before scaling it")
    limit = found.pool.limits.get("nodes")
    if limit is not None and replicas > limit:
        raise ScaleError(f"--replicas {replicas} is more than NodePool {name}'s limits.nodes ({limit}); "
                         f"allowed are 0 to {limit}")
    if found.parameter is not None and found.parameter.get("Type") == "SecureString":
        # Written back, it would take the account's default key: its own KMS key is not known here.
        raise ScaleError(f"NodePool {name} is in SecureString parameter {found.parameter['Name']}, which nodescale does "
                         "not rewrite (its KMS key would change); set spec.replicas there yourself")
    current = int(found.pool.replicas or 0)
    result = ScaleResult(name, found.source, current, replicas, dry_run)
    if dry_run or not result.changed:
        return result
    if found.parameter is not None:
        _write_parameter(ssm, found, replicas, result)
    else:
        _patch_object(custom_objects, found, replicas)
    return result


# ------------------------------------------------------------------------------------------ finding


def _find(name: str, ssm: Any, ssm_path: str | None, custom_objects: Any) -> Found:
    places: list[Found] = []
    if ssm is not None and ssm_path:
        places += _in_parameters(name, ssm, ssm_path)
    if custom_objects is not None:
        obj = _in_cluster(name, custom_objects)
        if obj is not None:
            places.append(obj)
    if not places:
        where = " and ".join(w for w, on in ((f"SSM under {ssm_path}", ssm is not None and ssm_path),
                                              ("the cluster", custom_objects is not None)) if on)
        raise ScaleError(f"NodePool {name} not found in {where or 'any NodePool source'}")
    if len(places) > 1:
        raise ScaleError(f"NodePool {name} is defined more than once ({', '.join(p.source for p in places)}), so "
                         "nodescale uses neither; remove one first")
    return places[0]


def _in_parameters(name: str, ssm: Any, path: str) -> list[Found]:
    path = "/" + path.strip("/") if path.strip("/") else "/"
    kwargs: dict[str, Any] = {"Path": path, "Recursive": True, "WithDecryption": True, "MaxResults": 10}
    found: list[Found] = []
    while True:
        page = ssm.get_parameters_by_path(**kwargs)
        for param in page.get("Parameters") or []:
            try:
                docs = parse_documents(param.get("Value") or "", f"ssm:{param['Name']}")
            except DocumentError:
                continue  # the functions report it; it defines no pool to scale
            for index, (source, doc) in enumerate(docs):
                meta = doc.get("metadata") if isinstance(doc.get("metadata"), Mapping) else {}
                if doc.get("kind") == "NodePool" and meta.get("name") == name:
                    found.append(Found(source, doc, *_pool(doc, source), parameter=param, index=index))
        token = page.get("NextToken")
        if not token:
            return found
        kwargs["NextToken"] = token


def _in_cluster(name: str, api: Any) -> Found | None:
    try:
        obj = api.get_cluster_custom_object(GROUP, VERSION, PLURAL, name)
    except Exception as exc:
        if getattr(exc, "status", None) == 404:
            return None
        raise
    obj = dict(obj)
    obj.setdefault("apiVersion", f"{GROUP}/{VERSION}")
    obj.setdefault("kind", "NodePool")
    source = f"cluster:NodePool/{name}"
    return Found(source, obj, *_pool(obj, source))


def _pool(doc: Mapping, source: str) -> tuple[NodePool | None, list[str]]:
    converted, errors = convert_document(doc, source)
    return (converted if isinstance(converted, NodePool) else None), [str(e) for e in errors]


# ------------------------------------------------------------------------------------------ writing


def _patch_object(api: Any, found: Found, replicas: int) -> None:
    meta = found.doc.get("metadata") or {}
    body = {"metadata": {"resourceVersion": meta.get("resourceVersion")}, "spec": {"replicas": replicas}}
    api.patch_cluster_custom_object(GROUP, VERSION, PLURAL, meta["name"], body)


def _write_parameter(ssm: Any, found: Found, replicas: int, result: ScaleResult) -> None:
    param = found.parameter or {}
    text = param.get("Value") or ""
    new = edit_replicas(text, found.index, replicas, param["Name"])
    if new is None:
        new = _rewritten(text, found.index, replicas, param["Name"])
        result.notes.append(f"parameter {param['Name']} was written again from its documents: its comments and "
                            "layout are not kept")
    ssm.put_parameter(Name=param["Name"], Value=new, Type=param.get("Type") or "String", Overwrite=True)


def _documents(text: str, name: str) -> list[dict]:
    return [doc for _, doc in parse_documents(text, f"ssm:{name}")]


def _expected(text: str, index: int, replicas: int, name: str) -> list[dict]:
    docs = copy.deepcopy(_documents(text, name))
    docs[index]["spec"]["replicas"] = replicas
    return docs


_LINE = re.compile(r"^(?P<head>\s*replicas\s*:\s*)(?P<value>[^\s#]+)(?P<tail>.*)$", re.MULTILINE)
_JSON = re.compile(r"(?P<head>\"replicas\"\s*:\s*)(?P<value>[^,}\s]+)(?P<tail>)")


def edit_replicas(text: str, index: int, replicas: int, name: str = "parameter") -> str | None:
    """``text`` with the one ``replicas:`` value changed that gives exactly the documents expected (the
    ``index``-th document's ``spec.replicas`` set to ``replicas``, nothing else), or None when no single
    edit does."""
    expected = _expected(text, index, replicas, name)
    pattern = _JSON if text.lstrip()[:1] in ("{", "[") else _LINE
    for match in pattern.finditer(text):
        candidate = f"{text[:match.start('value')]}{replicas}{text[match.end('value'):]}"
        try:
            if _documents(candidate, name) == expected:
                return candidate
        except DocumentError:
            continue
    return None


def _rewritten(text: str, index: int, replicas: int, name: str) -> str:
    docs = _expected(text, index, replicas, name)
    if text.lstrip()[:1] in ("{", "["):
        return json.dumps(docs[0] if len(docs) == 1 else docs, indent=2) + "\n"
    return yaml.safe_dump_all(docs, sort_keys=False)
