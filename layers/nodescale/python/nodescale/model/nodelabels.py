"""The labels a node of a NodePool carries, as Karpenter labels it: one computation for the solver (what a
pod is matched against), the launch (what the kubelet may set itself) and registration (the rest).

Karpenter's node gets the labels of its NodeClaim: the pool's template labels and the values its
requirements pin, the pool's name, the instance type's labels and the offering's zone and capacity
type. Karpenter puts the pinned ones in the kubelet's ``--node-labels`` and copies the NodeClaim's onto
the Node when it registers; nodescale does the same from the instance (type, zone, capacity type).

By API generation (what Karpenter of that generation sets, so pods written for it match):
- v1alpha5 Provisioner (Karpenter v0.31): ``karpenter.sh/provisioner-name`` only; no label names the
  AWSNodeTemplate (v0.31 kept its hash in an annotation).
- v1beta1 and v1 NodePool: ``karpenter.sh/nodepool`` and ``karpenter.k8s.aws/ec2nodeclass``.
A Provisioner and a NodePool may share a name (Karpenter v0.32-v0.33 ran both): the label keeps their
nodes apart, and ``pool_key`` reads back which pool a node is of.
"""

from __future__ import annotations

from collections.abc import Container, Mapping

from . import labels as wk
from .nodepool import PROVISIONER, NodePool, qualified

V1ALPHA5 = "karpenter.sh/v1alpha5"


def is_v1alpha5(pool: NodePool) -> bool:
    return pool.api_version == V1ALPHA5


def pool_labels(pool: NodePool) -> dict[str, str]:
    """The labels every node of the pool carries whatever its type: the template's labels and the
    pool's (and, from v1beta1 on, its node class's) name. Not the requirements' pinned values: the
    solver holds those as requirements, and a type that lacks such a label must not pass for having it."""
    labels = {k: str(v) for k, v in pool.labels.items()}
    labels[pool.label_key] = pool.real_name
    if not is_v1alpha5(pool) and pool.node_class:
        labels[wk.NODECLASS] = pool.node_class
    return labels


def pool_key(labels: Mapping[str, str], keys: Container[str] = ()) -> str:
    """The key of the pool a node (or an instance, by its tags) belongs to: its ``karpenter.sh/nodepool``,
    else its ``karpenter.sh/provisioner-name``, qualified (``provisioner/<name>``) when ``keys`` (the
    pools' keys) hold it so, i.e. when a NodePool has that name too. "" for a node of no pool."""
    name = labels.get(wk.NODEPOOL)
    if name:
        return name
    legacy = labels.get(wk.LEGACY_PROVISIONER)
    if not legacy:
        return ""
    key = qualified(PROVISIONER, legacy)
    return key if key in keys else legacy


def launch_labels(pool: NodePool) -> dict[str, str]:
    """What is known before EC2 picks a type and zone: the values the requirements pin (never the
    hostname), then the pool's labels. The kubelet registers with those it may set."""
    labels = {k: v for k, v in pool.requirements.labels().items() if k != wk.HOSTNAME}
    labels.update(pool_labels(pool))
    return labels


def node_labels(
    pool: NodePool,
    type_labels: Mapping[str, str],
    *,
    zone: str,
    capacity_type: str,
    zone_id: str = "",
    class_labels: Mapping[str, str] | None = None,
    reservation_id: str = "",
    reservation_type: str = "",
) -> dict[str, str]:
    """Every label a node of ``pool`` on this instance type and offering carries once registered.

    ``type_labels`` are the type's (``InstanceType.labels``: arch, OS, instance-*, region, ...);
    ``class_labels`` what the node class adds (a Windows AMI's OS and build, ``World.node_labels``).
    """
    labels = launch_labels(pool)
    labels.update(type_labels)
    if class_labels:
        labels.update(class_labels)
    labels[wk.ZONE] = zone
    labels[wk.CAPACITY_TYPE] = capacity_type
    if zone_id:
        labels[wk.ZONE_ID] = zone_id
    if reservation_id:
        # A node in a capacity reservation names it, as Karpenter's do.
        labels[wk.CAPACITY_RESERVATION_ID] = reservation_id
        labels[wk.CAPACITY_RESERVATION_TYPE] = reservation_type or "default"
    # The pool's own labels last: its name, and a template label, are not the type's to change.
    labels.update(pool_labels(pool))
    return dict(sorted(labels.items()))
