"""kube-apiserver's validation of StorageClasses, PersistentVolumes and PersistentVolumeClaims, for the fields
sim's scheduler and provisioner read (kubernetes/kubernetes pkg/apis/storage/validation ValidateStorageClass,
pkg/apis/core/validation ValidatePersistentVolumeSpec and ValidatePersistentVolumeClaimSpec)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .objects import valid_name
from .quantity import QuantityError, milli

if TYPE_CHECKING:
    from .validation import Errors

ACCESS_MODES = ("ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod")
VOLUME_MODES = ("Block", "Filesystem")
BINDING_MODES = ("Immediate", "WaitForFirstConsumer")
CLASS_RECLAIM_POLICIES = ("Delete", "Retain")
PV_RECLAIM_POLICIES = ("Delete", "Recycle", "Retain")
SELECTOR_OPERATORS = ("DoesNotExist", "Exists", "Gt", "In", "Lt", "NotIn")
# The volume sources a PersistentVolume may name (exactly one of them).
PV_SOURCES = (
    "awsElasticBlockStore", "azureDisk", "azureFile", "cephfs", "cinder", "csi", "fc", "flexVolume", "flocker",
    "gcePersistentDisk", "glusterfs", "hostPath", "iscsi", "local", "nfs", "photonPersistentDisk", "portworxVolume",
    "quobyte", "rbd", "scaleIO", "storageos", "vsphereVolume",
)


def validate_storage_class(obj: dict[str, Any], errs: Errors) -> None:
    if not obj.get("provisioner"):
        errs.required("provisioner")
    if obj.get("reclaimPolicy") is not None and obj["reclaimPolicy"] not in CLASS_RECLAIM_POLICIES:
        errs.not_supported("reclaimPolicy", obj["reclaimPolicy"], CLASS_RECLAIM_POLICIES)
    if obj.get("volumeBindingMode") is not None and obj["volumeBindingMode"] not in BINDING_MODES:
        errs.not_supported("volumeBindingMode", obj["volumeBindingMode"], BINDING_MODES)
    for index, term in enumerate(obj.get("allowedTopologies") or []):
        path = f"allowedTopologies[{index}].matchLabelExpressions"
        expressions = (term or {}).get("matchLabelExpressions") if isinstance(term, dict) else None
        if not expressions:
            errs.required(path, "must have at least one label expression")
            continue
        for position, expr in enumerate(expressions):
            if not (expr or {}).get("key"):
                errs.required(f"{path}[{position}].key")
            if not (expr or {}).get("values"):
                errs.required(f"{path}[{position}].values", "must specify as least one value")


def _access_modes(spec: dict[str, Any], errs: Errors, detail: str) -> None:
    modes = spec.get("accessModes") or []
    if not modes:
        errs.required("spec.accessModes", detail)
    for mode in modes:
        if mode not in ACCESS_MODES:
            errs.not_supported("spec.accessModes", mode, ACCESS_MODES)
    if "ReadWriteOncePod" in modes and len(modes) > 1:
        errs.forbidden("spec.accessModes", "may not use ReadWriteOncePod with other access modes")
    if spec.get("volumeMode") is not None and spec["volumeMode"] not in VOLUME_MODES:
        errs.not_supported("spec.volumeMode", spec["volumeMode"], VOLUME_MODES)
    class_name = spec.get("storageClassName")
    if class_name and (why := valid_name(class_name)):
        errs.invalid("spec.storageClassName", class_name, why)


def _storage(value: Any, field: str, errs: Errors) -> None:
    if value is None:
        errs.required(field)
        return
    try:
        if milli(value) <= 0:
            errs.invalid(field, value, "must be greater than zero")
    except QuantityError:
        errs.invalid(field, value, "must match the regular expression for a quantity")


def validate_claim(obj: dict[str, Any], errs: Errors) -> None:
    spec = obj.get("spec") or {}
    _access_modes(spec, errs, "at least 1 access mode is required")
    requests = (spec.get("resources") or {}).get("requests") or {}
    _storage(requests.get("storage"), "spec.resources[storage]", errs)


def validate_volume(obj: dict[str, Any], errs: Errors) -> None:
    spec = obj.get("spec") or {}
    _access_modes(spec, errs, "must specify at least 1 access mode")
    capacity = spec.get("capacity") or {}
    if not capacity:
        errs.required("spec.capacity")
    for key in capacity:
        if key != "storage":
            errs.not_supported("spec.capacity", key, ("storage",))
    if capacity:
        _storage(capacity.get("storage"), "spec.capacity[storage]", errs)
    policy = spec.get("persistentVolumeReclaimPolicy")
    if policy is not None and policy not in PV_RECLAIM_POLICIES:
        errs.not_supported("spec.persistentVolumeReclaimPolicy", policy, PV_RECLAIM_POLICIES)
    sources = [name for name in PV_SOURCES if spec.get(name) is not None]
    if not sources:
        errs.required("spec", "must specify a volume type")
    for extra in sources[1:]:
        errs.forbidden(f"spec.{extra}", "may not specify more than 1 volume type")
    csi = spec.get("csi")
    if isinstance(csi, dict):
        for name in ("driver", "volumeHandle"):
            if not csi.get(name):
                errs.required(f"spec.csi.{name}")
    _node_affinity(spec.get("nodeAffinity"), errs)


def _node_affinity(affinity: Any, errs: Errors) -> None:
    if not isinstance(affinity, dict) or affinity.get("required") is None:
        return
    path = "spec.nodeAffinity.required.nodeSelectorTerms"
    terms = (affinity.get("required") or {}).get("nodeSelectorTerms") or []
    if not terms:
        errs.required(path, "must have at least one node selector term")
    for index, term in enumerate(terms):
        for position, expr in enumerate((term or {}).get("matchExpressions") or []):
            operator = (expr or {}).get("operator")
            if operator not in SELECTOR_OPERATORS:
                errs.invalid(f"{path}[{index}].matchExpressions[{position}].operator", operator,
                             "not a valid selector operator")
            elif operator in ("In", "NotIn") and not expr.get("values"):
                errs.required(f"{path}[{index}].matchExpressions[{position}].values",
                              "must be specified when `operator` is 'In' or 'NotIn'")


def validate_csi_node(obj: dict[str, Any], errs: Errors) -> None:
    """storage's ValidateCSINode for the fields sim's scheduler reads: each driver named once, with a node id,
    and a non-negative allocatable count."""
    seen: set[str] = set()
    for index, driver in enumerate((obj.get("spec") or {}).get("drivers") or []):
        path = f"spec.drivers[{index}]"
        name = (driver or {}).get("name") if isinstance(driver, dict) else None
        if not name:
            errs.required(f"{path}.name")
        elif name in seen:
            errs.duplicate(f"{path}.name", name)
        seen.add(name or "")
        if not (driver or {}).get("nodeID"):
            errs.required(f"{path}.nodeID")
        count = ((driver or {}).get("allocatable") or {}).get("count")
        if count is not None and (not isinstance(count, int) or isinstance(count, bool) or count < 0):
            errs.invalid(f"{path}.allocatable.count", count, "must be greater than or equal to 0")
