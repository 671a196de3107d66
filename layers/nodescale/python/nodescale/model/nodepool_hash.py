"""nodescale's digest of a NodePool template's static fields, recorded on what it launches (#31.5).

Karpenter drifts a NodeClaim when the hash of its NodePool's ``spec.template`` changes from the one written
on the claim at launch (``karpenter.sh/nodepool-hash``, kubernetes-sigs/karpenter ``NodePool.Hash()``). The
fields its struct tags leave in: the template's labels and annotations, taints, startup taints,
``nodeClassRef``, ``expireAfter`` and ``terminationGracePeriod``; requirements (and the resources) are
``hash:"ignore"`` and checked on their own. This digest covers the same fields, with the same leniency: taints
compare as sets, and an empty map or list is the same as none. It is nodescale's own value, not Karpenter's
hashstructure number, hence its own annotation names: Karpenter must never read it as its hash.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping

from .nodepool import NodePool
from .taints import Taint

# On the NodeClaim (written at creation) and copied onto its Node at registration.
HASH_ANNOTATION = "nodescale.io/nodepool-hash"
HASH_VERSION_ANNOTATION = "nodescale.io/nodepool-hash-version"
# Bumped when a field joins or leaves the digest: a record of another version is never drift (Karpenter's rule).
HASH_VERSION = "v1"


def _taints(taints: Iterable[Taint]) -> list[tuple[str, str, str]]:
    return sorted({(t.key, t.value, t.effect) for t in taints})


def template_fields(pool: NodePool) -> dict[str, object]:
    """The template's fields the digest covers, in a canonical form."""
    d = pool.disruption
    return {
        "labels": dict(sorted(pool.labels.items())),
        "annotations": dict(sorted(pool.annotations.items())),
        "taints": _taints(pool.taints),
        "startupTaints": _taints(pool.startup_taints),
        "nodeClassRef": [pool.node_class_kind, pool.node_class],
        "expireAfter": d.expire_after_seconds,
        "terminationGracePeriod": d.termination_grace_period_seconds,
    }


def template_hash(pool: NodePool) -> str:
    """The digest of ``pool``'s template (hex, 16 characters)."""
    text = json.dumps(template_fields(pool), sort_keys=True, separators=(",", ":"), default=list)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def hash_annotations(pool: NodePool) -> dict[str, str]:
    """The annotations that record what a node was launched from."""
    return {HASH_ANNOTATION: template_hash(pool), HASH_VERSION_ANNOTATION: HASH_VERSION}


def recorded_hash(annotations: Mapping[str, str]) -> str | None:
    """The digest a node or claim was launched with, or None when it has none of this version (launched before
    the record existed, or under another version): such a node is never drifted for it."""
    value = annotations.get(HASH_ANNOTATION)
    if not value or annotations.get(HASH_VERSION_ANNOTATION) != HASH_VERSION:
        return None
    return value
