"""EC2NodeClass ``spec.capacityReservationSelectorTerms`` (karpenter.k8s.aws/v1), checked as Karpenter's CRD
checks it (``ec2nodeclass.go`` and ``ec2nodeclass_validation_cel_test.go``, "CapacityReservationSelectorTerms"):

- at most 30 terms, ORed; each gives ``id``, or ``tags`` and/or ``instanceMatchCriteria`` (``ownerID``
  alone selects nothing and is refused);
- ``id`` (``cr-`` and lowercase hex/letters) cannot be combined with any other field;
- ``ownerID`` is a 12-digit account id; ``tags`` is a map of at most 20 non-empty keys and values
  ("*" matches any value); ``instanceMatchCriteria`` is ``open`` or ``targeted``.
"""

from __future__ import annotations

import re

from ..model.capacityreservation import MATCH_CRITERIA
from ..model.nodepool import CapacityReservationTerm
from .errors import show
from .fields import FieldError, items, mapping, string, string_map

FIELD = "capacityReservationSelectorTerms"
MAX_TERMS = 30
MAX_TAGS = 20
_ID = re.compile(r"^cr-[0-9a-z]+$")
_OWNER = re.compile(r"^[0-9]{12}$")
_KEYS = ("id", "tags", "ownerID", "instanceMatchCriteria")


def parse_terms(raw: object, path: str) -> tuple[CapacityReservationTerm, ...]:
    """The terms, or a FieldError naming the term and field at fault."""
    if raw is None:
        return ()
    terms = items(raw, path)
    if len(terms) > MAX_TERMS:
        raise FieldError(path, f"has {len(terms)} terms; at most {MAX_TERMS} are allowed")
    return tuple(_term(item, f"{path}[{i}]") for i, item in enumerate(terms))


def _term(item: object, path: str) -> CapacityReservationTerm:
    t = mapping(item, path)
    unknown = sorted(str(k) for k in t if k not in _KEYS)
    if unknown:
        raise FieldError(f"{path}.{unknown[0]}", f"is not a field of a term; allowed are {', '.join(_KEYS)}")
    rid = string(t.get("id"), f"{path}.id")
    owner = string(t.get("ownerID"), f"{path}.ownerID")
    criteria = string(t.get("instanceMatchCriteria"), f"{path}.instanceMatchCriteria", MATCH_CRITERIA)
    has_tags = t.get("tags") is not None
    tags = string_map(t.get("tags"), f"{path}.tags") if has_tags else {}
    if rid is None and not has_tags and criteria is None:
        raise FieldError(path, "expected at least one of tags, id, instanceMatchCriteria (ownerID alone selects nothing)")
    if rid is not None and (has_tags or owner is not None or criteria is not None):
        raise FieldError(path, "'id' is mutually exclusive: it cannot be set with tags, ownerID or instanceMatchCriteria")
    if rid is not None and not _ID.match(rid):
        raise FieldError(f"{path}.id", f"{show(rid)} is not a capacity reservation id; expected cr- and lowercase "
                         "letters or digits, like cr-0123456789abcdef0")
    if owner is not None and not _OWNER.match(owner):
        raise FieldError(f"{path}.ownerID", f"{show(owner)} is not an AWS account id; expected 12 digits")
    if has_tags:
        if not tags:
            raise FieldError(f"{path}.tags", "may not be empty; give at least one tag (\"*\" matches any value)")
        if len(tags) > MAX_TAGS:
            raise FieldError(f"{path}.tags", f"has {len(tags)} tags; at most {MAX_TAGS} are allowed")
        if any(not k or not v for k, v in tags.items()):
            raise FieldError(f"{path}.tags", "empty tag keys or values are not allowed; use \"*\" to match any value")
    return CapacityReservationTerm(id=rid, tags=tags, owner_id=owner, instance_match_criteria=criteria)
