"""NodePool requirements as Karpenter reads them: checked item by item, combined, and defaulted per API generation."""

from __future__ import annotations

from collections.abc import Mapping

from ..model import labels as wk
from ..model.requirements import CORE_OPERATORS, OPERATORS, Requirement, RequirementError, Requirements
from .errors import show
from .fields import FieldError, items

MAX_MIN_VALUES = 50


def parse_requirements(raw: object, path: str, operators: tuple[str, ...] = CORE_OPERATORS) -> Requirements:
    """A NodePool's requirements; raises FieldError for the first bad item or an impossible combination.

    ``operators``: what the generation's CRD allows; karpenter.sh/v1 (OPERATORS) adds Gte and Lte to
    Kubernetes' six, which are all v1alpha5 and v1beta1 ever took."""
    reqs: list[Requirement] = []
    where: dict[str, list[int]] = {}
    for i, item in enumerate(items(raw, path)):
        p = f"{path}[{i}]"
        req = _parse_one(item, p, operators)
        reqs.append(req)
        where.setdefault(req.key, []).append(i)
    combined = Requirements(reqs)
    for key, req in combined.items():
        indexes = where[key]
        p = f"{path}[{indexes[-1]}]" if len(indexes) == 1 else f"{path}[{', '.join(map(str, indexes))}]"
        if req.is_impossible():
            given = "; ".join(str(reqs[i]) for i in indexes)
            raise FieldError(p, f"no value of {key} satisfies {given}; a node could never be launched from it")
        values = req.allowed_values()
        if req.min_values is not None and values is not None and len(values) < req.min_values:
            raise FieldError(
                p,
                f"minValues {req.min_values} for {key} cannot be met: only {len(values)} value(s) remain "
                f"({', '.join(sorted(values))})",
            )
    return combined


def _parse_one(item: object, p: str, operators: tuple[str, ...] = OPERATORS) -> Requirement:
    if not isinstance(item, Mapping):
        raise FieldError(p, f"{show(item)} is not allowed; expected a mapping with key, operator and values")
    key = item.get("key")
    problem = wk.key_syntax_error(key)
    if problem:
        raise FieldError(f"{p}.key", f"{show(key)} is not allowed; {problem}")
    assert isinstance(key, str)
    if wk.is_restricted_requirement(key):
        raise FieldError(
            f"{p}.key",
            f"{show(key)} is restricted; use a well-known label or a custom label outside the "
            f"{', '.join(wk.RESTRICTED_DOMAINS)} domains",
        )
    op = item.get("operator")
    if op not in operators:
        raise FieldError(f"{p}.operator", f"{show(op)} is not allowed; allowed are {', '.join(operators)}")
    raw_values = item.get("values")
    if raw_values is not None and not isinstance(raw_values, list):
        raise FieldError(f"{p}.values", f"{show(raw_values)} is not allowed; expected a list of strings")
    values: list[str] = []
    for j, v in enumerate(raw_values or []):
        # A bare YAML number is unambiguous, so it is taken as its text; anything else is a mistake.
        if isinstance(v, bool) or not isinstance(v, str | int):
            raise FieldError(f"{p}.values[{j}]", f"{show(v)} is not allowed; expected a string")
        values.append(str(v))
    if op in ("In", "NotIn") and not values:
        raise FieldError(f"{p}.values", f"operator {op} needs at least one value")
    if op in ("Exists", "DoesNotExist") and values:
        raise FieldError(f"{p}.values", f"{show(raw_values)} is not allowed; operator {op} takes no values")
    if op in ("Gt", "Lt", "Gte", "Lte") and (len(values) != 1 or not _is_integer(values[0])):
        raise FieldError(
            f"{p}.values", f"{show(raw_values)} is not allowed; operator {op} needs exactly one integer value"
        )
    min_values = item.get("minValues")
    if min_values is not None:
        if isinstance(min_values, bool) or not isinstance(min_values, int) or not 1 <= min_values <= MAX_MIN_VALUES:
            raise FieldError(
                f"{p}.minValues", f"{show(min_values)} is not allowed; expected a whole number from 1 to {MAX_MIN_VALUES}"
            )
        if op == "In" and min_values > len(values):
            raise FieldError(
                f"{p}.minValues",
                f"{min_values} is more than the {len(values)} value(s) the requirement lists",
            )
    try:
        return Requirement.create(key, op, values, min_values)
    except RequirementError as exc:  # the checks above should catch everything; keep the path regardless
        raise FieldError(p, str(exc)) from None


def _is_integer(text: str) -> bool:
    body = text[1:] if text[:1] in "+-" else text
    return body.isascii() and body.isdigit()


def check_labels_agree(reqs: Requirements, labels: Mapping[str, str], path: str) -> None:
    """A NodePool's labels are requirements too: one the requirements rule out can never be honoured."""
    for key, value in labels.items():
        req = reqs.get(wk.canonical(key))
        if req is not None and not req.has(value):
            raise FieldError(f"{path}.{key}", f"{show(value)} conflicts with the requirement {req}")


def legacy_defaults(reqs: Requirements, labels: Mapping[str, str]) -> Requirements:
    """What the AWS provider's defaulting webhook added to a v1alpha5 Provisioner's requirements.

    Karpenter (aws/karpenter v0.2x, pkg/apis/v1alpha5/provisioner.go SetDefaults) appended:
    kubernetes.io/os In [linux], kubernetes.io/arch In [amd64], karpenter.sh/capacity-type In
    [on-demand], each when the key was not already required; and instance-category In [c, m, r]
    with instance-generation Gt 2 when none of instance-type, instance-family, instance-category
    or instance-generation was. Unlike Karpenter we also count the Provisioner's own labels as a
    constraint, so `labels: {kubernetes.io/arch: arm64}` does not turn into an impossible pair.

    v1beta1 NodePools get none of this: the equivalent v1beta1 webhook was dropped before release
    (aws/karpenter-provider-aws #4639, "Drop v1beta1 requirements defaulting"), and core's
    NodePool.SetDefaults is empty. v1 has no defaulting webhook at all: `requirements: []` means
    every instance type.
    """
    given = set(reqs) | {wk.canonical(k) for k in labels}
    added: list[Requirement] = []
    for key, value in ((wk.OS, "linux"), (wk.ARCH, "amd64"), (wk.CAPACITY_TYPE, wk.CAPACITY_ON_DEMAND)):
        if key not in given:
            added.append(Requirement.exactly(key, value))
    shape_keys = (wk.INSTANCE_TYPE, wk.INSTANCE_FAMILY, wk.INSTANCE_CATEGORY, wk.INSTANCE_GENERATION)
    if not any(k in given for k in shape_keys):
        added.append(Requirement.exactly(wk.INSTANCE_CATEGORY, "c", "m", "r"))
        added.append(Requirement.create(wk.INSTANCE_GENERATION, "Gt", ["2"]))
    out = reqs
    for r in added:
        out = out.with_requirement(r)
    return out
