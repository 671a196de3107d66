"""kube-apiserver's semantic validation of the built-in kinds sim serves, on create and update.

What kube-apiserver checks in Go after decoding (`pkg/apis/core/validation`, `pkg/apis/apps/validation`,
`pkg/apis/policy/validation`, `apimachinery/pkg/api/validation`), for the kinds and fields the product
and the tests create: object metadata (labels, annotations and their 256 KiB budget, finalizers), pod
specs (containers, names, images, ports, resources, restart policy, tolerations, node selector,
topology spread), workload templates and selectors, node taints, PodDisruptionBudgets, namespaces,
services, ConfigMaps and Secrets, and Events. Each function names the Go function whose rules it
follows; the wording of each message is kube's, so a client sees what it would see from EKS.

A violation is answered as `apierrors.NewInvalid` answers it: 422, reason `Invalid`, one cause per
field error (`FieldValueInvalid`, `FieldValueRequired`, `FieldValueNotSupported`, ...). A quantity
that does not parse is refused earlier, when kube decodes the body: 400 BadRequest.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import Any

from . import errors
from .errors import ApiError
from .quantity import QuantityError, milli
from .resources import ResourceType
from .selectors import compile_label_selector_object
from .storagevalidation import validate_claim, validate_csi_node, validate_storage_class, validate_volume

TOTAL_ANNOTATION_SIZE_LIMIT = 256 * (1 << 10)  # apimachinery's TotalAnnotationSizeLimitB
CONFIG_MAP_SIZE_LIMIT = 1024 * 1024  # core's MaxSecretSize, also applied to ConfigMaps
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_CONFIG_MAP_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
_IANA_SVC_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])*$")
_PERCENT = re.compile(r"^[0-9]+%$")
_QUALIFIED_NAME_MESSAGE = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
_DNS_SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_DNS_LABEL_MESSAGE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and "
    "end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
_DNS_1035_MESSAGE = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
    "character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for "
    "validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)
_LABEL_VALUE_MESSAGE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used "
    "for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_PROTOCOLS = ("SCTP", "TCP", "UDP")
_STANDARD_CONTAINER_RESOURCES = ("cpu", "memory", "ephemeral-storage")


# ---------------------------------------------------------------------------------- field errors


def _show(value: Any) -> str:
    """A bad value as Go's `%#v`-like rendering in field errors shows it (strings quoted)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, separators=(",", ":"))


class Errors:
    """A `field.ErrorList`: each cause as kube-apiserver reports it."""

    def __init__(self) -> None:
        self.causes: list[dict[str, str]] = []

    def _add(self, reason: str, field: str, message: str) -> None:
        self.causes.append({"reason": reason, "message": message, "field": field})

    def invalid(self, field: str, value: Any, detail: str) -> None:
        self._add("FieldValueInvalid", field, f"Invalid value: {_show(value)}: {detail}")

    def type_invalid(self, field: str, got: str, wanted: str) -> None:
        """A custom resource's value of the wrong JSON type, in kube-openapi's words."""
        self._add("FieldValueTypeInvalid", field, f'Invalid value: "{got}": {field} in body must be of type {wanted}: "{got}"')

    def required(self, field: str, detail: str = "") -> None:
        self._add("FieldValueRequired", field, "Required value" + (f": {detail}" if detail else ""))

    def not_supported(self, field: str, value: Any, supported: Iterable[str]) -> None:
        allowed = ", ".join(json.dumps(s) for s in supported)
        self._add("FieldValueNotSupported", field, f"Unsupported value: {_show(value)}: supported values: {allowed}")

    def duplicate(self, field: str, value: Any) -> None:
        self._add("FieldValueDuplicate", field, f"Duplicate value: {_show(value)}")

    def forbidden(self, field: str, detail: str) -> None:
        self._add("FieldValueForbidden", field, f"Forbidden: {detail}")

    def too_long(self, field: str, limit: int) -> None:
        self._add("FieldValueTooLong", field, f"Too long: must have at most {limit} bytes")


def invalid_error(rt: ResourceType, name: str, causes: list[dict[str, str]]) -> ApiError:
    """`apierrors.NewInvalid(qualifiedKind, name, errs)`: the 422 Status with every cause."""
    qualified_kind = f"{rt.kind}.{rt.group}" if rt.group else rt.kind
    parts = [f"{c['field']}: {c['message']}" for c in causes]
    listed = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    details: dict[str, Any] = {"name": name, "kind": rt.kind, "causes": causes}
    if rt.group:
        details["group"] = rt.group
    return ApiError(422, "Invalid", f'{qualified_kind} "{name}" is invalid: {listed}', details)


# ------------------------------------------------------------------------------------ primitives


@lru_cache(maxsize=8192)
def _qualified_name(value: str) -> tuple[str, ...]:
    """apimachinery's `IsQualifiedName`: an optional DNS-subdomain prefix and a 63-character name
    (cached: the same few label keys come with every pod)."""
    prefix, slash, name = value.rpartition("/")
    problems = []
    if slash:
        if not prefix:
            problems.append("prefix part must be non-empty")
        elif len(prefix) > 253:
            problems.append("prefix part must be no more than 253 characters")
        elif not _DNS_SUBDOMAIN.match(prefix):
            problems.append("prefix part " + _DNS_SUBDOMAIN_MESSAGE)
    if not name:
        problems.append("name part must be non-empty")
    elif len(name) > 63:
        problems.append("name part must be no more than 63 characters")
    elif not _QUALIFIED_NAME.match(name):
        problems.append(_QUALIFIED_NAME_MESSAGE)
    return tuple(problems)


@lru_cache(maxsize=8192)
def _label_value(value: str) -> tuple[str, ...]:
    """apimachinery's `IsValidLabelValue`."""
    problems = []
    if len(value) > 63:
        problems.append("must be no more than 63 characters")
    if not _LABEL_VALUE.match(value):
        problems.append(_LABEL_VALUE_MESSAGE)
    return tuple(problems)


def _dns_label(value: str) -> list[str]:
    """apimachinery's `IsDNS1123Label`."""
    if len(value) > 63:
        return ["must be no more than 63 characters"]
    return [] if _DNS_LABEL.match(value) else [_DNS_LABEL_MESSAGE]


def _dns_1035_label(value: str) -> list[str]:
    """apimachinery's `IsDNS1035Label`."""
    if len(value) > 63:
        return ["must be no more than 63 characters"]
    return [] if _DNS_1035_LABEL.match(value) else [_DNS_1035_MESSAGE]


def validate_labels(labels: Any, field: str, errs: Errors) -> None:
    """apimachinery's `ValidateLabels`: qualified-name keys, label values."""
    if not isinstance(labels, dict):
        return
    for key, value in labels.items():
        for problem in _qualified_name(str(key)):
            errs.invalid(field, key, problem)
        for problem in _label_value(str(value) if value is not None else ""):
            errs.invalid(f"{field}[{key}]", value, problem)


def validate_annotations(annotations: Any, field: str, errs: Errors) -> None:
    """apimachinery's `ValidateAnnotations`: qualified-name keys (lower-cased) and 256 KiB in all."""
    if not isinstance(annotations, dict):
        return
    for key in annotations:
        for problem in _qualified_name(str(key).lower()):
            errs.invalid(field, key, problem)
    total = sum(len(str(k)) + len(str(v) if v is not None else "") for k, v in annotations.items())
    if total > TOTAL_ANNOTATION_SIZE_LIMIT:
        errs.too_long(field, TOTAL_ANNOTATION_SIZE_LIMIT)


def _nonnegative(value: Any, field: str, errs: Errors) -> None:
    """core's `ValidateNonnegativeField`."""
    if isinstance(value, int) and not isinstance(value, bool) and value < 0:
        errs.invalid(field, value, "must be greater than or equal to 0")


def _port(value: Any, field: str, errs: Errors) -> None:
    """apimachinery's `IsValidPortNum`."""
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 65535:
        errs.invalid(field, value, "must be between 1 and 65535, inclusive")


def _port_name(value: str, field: str, errs: Errors) -> None:
    """apimachinery's `IsValidPortName` (an IANA_SVC_NAME)."""
    if len(value) > 15:
        errs.invalid(field, value, "must be no more than 15 characters")
    elif not _IANA_SVC_NAME.match(value):
        errs.invalid(field, value, "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    elif "--" in value:
        errs.invalid(field, value, "must not contain consecutive hyphens")
    elif not re.search("[a-z]", value):
        errs.invalid(field, value, "must contain at least one letter (a-z)")


def parse_quantity(value: Any, field: str) -> int:
    """A quantity in milli-units, or the 400 kube's JSON decoder answers for one that does not parse."""
    try:
        return milli(value)
    except QuantityError as exc:
        raise errors.bad_request(
            f"quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$' "
            f"({field}: {value!r}): {exc}"
        ) from None


# -------------------------------------------------------------------------------------- metadata


def validate_metadata(obj: dict[str, Any], errs: Errors) -> None:
    """apimachinery's `ValidateObjectMeta`: labels, annotations and finalizers (names are the store's)."""
    metadata = obj.get("metadata") or {}
    validate_labels(metadata.get("labels"), "metadata.labels", errs)
    validate_annotations(metadata.get("annotations"), "metadata.annotations", errs)
    for index, finalizer in enumerate(metadata.get("finalizers") or ()):
        for problem in _qualified_name(str(finalizer)):
            errs.invalid(f"metadata.finalizers[{index}]", finalizer, problem)


# ------------------------------------------------------------------------------------- pod specs


def _validate_resources(resources: Any, field: str, errs: Errors) -> None:
    """core's `ValidateContainerResourceRequirements`: names, non-negative values, requests <= limits."""
    if not isinstance(resources, dict):
        return
    parsed: dict[str, dict[str, int]] = {}
    for part in ("limits", "requests"):
        values = resources.get(part) or {}
        if not isinstance(values, dict):
            continue
        parsed[part] = {}
        for name, value in values.items():
            at = f"{field}.{part}[{name}]"
            amount = parse_quantity(value, at)
            parsed[part][name] = amount
            native = "/" not in name or "kubernetes.io/" in name
            if native and name not in _STANDARD_CONTAINER_RESOURCES and not name.startswith("hugepages-"):
                errs.invalid(at, name, "must be a standard resource for containers")
            if amount < 0:
                errs.invalid(at, value, "must be greater than or equal to 0")
            elif not native and amount % 1000:
                errs.invalid(at, value, "must be an integer")
    limits, requests = parsed.get("limits", {}), parsed.get("requests", {})
    for name, request in requests.items():
        limit = limits.get(name)
        native = "/" not in name or "kubernetes.io/" in name
        if limit is None:
            if not native:
                errs.required(f"{field}.limits", "Limit must be set for non overcommitable resources")
            continue
        if not native and request != limit:
            errs.invalid(f"{field}.requests[{name}]", resources["requests"][name],
                         f"must be equal to {name} limit of {resources['limits'][name]}")
        elif request > limit:
            errs.invalid(f"{field}.requests", resources["requests"][name],
                         f"must be less than or equal to {name} limit of {resources['limits'][name]}")


def _validate_ports(ports: Any, field: str, errs: Errors) -> None:
    """core's `validateContainerPorts`."""
    names: set[str] = set()
    for index, port in enumerate(ports if isinstance(ports, list) else ()):
        at = f"{field}[{index}]"
        if not isinstance(port, dict):
            continue
        if port.get("name"):
            _port_name(str(port["name"]), f"{at}.name", errs)
            if port["name"] in names:
                errs.duplicate(f"{at}.name", port["name"])
            names.add(port["name"])
        if port.get("containerPort") in (None, 0):
            errs.required(f"{at}.containerPort")
        else:
            _port(port.get("containerPort"), f"{at}.containerPort", errs)
        if port.get("hostPort") not in (None, 0):
            _port(port.get("hostPort"), f"{at}.hostPort", errs)
        if port.get("protocol", "TCP") not in _PROTOCOLS:
            errs.not_supported(f"{at}.protocol", port.get("protocol"), _PROTOCOLS)


def _validate_containers(containers: Any, field: str, seen: set[str], errs: Errors, required: bool) -> None:
    """core's `validateContainers` / `validateInitContainers`: names (DNS labels, unique across both
    lists), images, ports, resources."""
    if not isinstance(containers, list) or not containers:
        if required:
            errs.required(field)
        return
    for index, container in enumerate(containers):
        at = f"{field}[{index}]"
        if not isinstance(container, dict):
            continue
        name = container.get("name")
        if not name:
            errs.required(f"{at}.name")
        else:
            for problem in _dns_label(str(name)):
                errs.invalid(f"{at}.name", name, problem)
            if name in seen:
                errs.duplicate(f"{at}.name", name)
            seen.add(name)
        if not container.get("image"):
            errs.required(f"{at}.image")
        _validate_ports(container.get("ports"), f"{at}.ports", errs)
        _validate_resources(container.get("resources"), f"{at}.resources", errs)


def validate_tolerations(tolerations: Any, field: str, errs: Errors) -> None:
    """core's `ValidateTolerations`."""
    for index, toleration in enumerate(tolerations if isinstance(tolerations, list) else ()):
        at = f"{field}[{index}]"
        if not isinstance(toleration, dict):
            continue
        key, operator = toleration.get("key") or "", toleration.get("operator") or "Equal"
        if key:
            for problem in _qualified_name(key):
                errs.invalid(f"{at}.key", key, problem)
        elif operator != "Exists":
            errs.invalid(f"{at}.operator", operator, "operator must be Exists when `key` is empty, which means "
                         "\"match all values and all keys\"")
        effect = toleration.get("effect") or ""
        if toleration.get("tolerationSeconds") is not None and effect != "NoExecute":
            errs.invalid(f"{at}.effect", effect, "effect must be 'NoExecute' when `tolerationSeconds` is set")
        if operator == "Equal":
            for problem in _label_value(str(toleration.get("value") or "")):
                errs.invalid(f"{at}.operator", toleration.get("value"), problem)
        elif operator == "Exists":
            if toleration.get("value"):
                errs.invalid(f"{at}.operator", toleration.get("value"),
                             "value must be empty when `operator` is 'Exists'")
        else:
            errs.not_supported(f"{at}.operator", operator, ("Equal", "Exists"))
        if effect and effect not in _TAINT_EFFECTS:
            errs.not_supported(f"{at}.effect", effect, _TAINT_EFFECTS)


def _validate_spread(constraints: Any, field: str, errs: Errors) -> None:
    """core's `validateTopologySpreadConstraints` (the common fields)."""
    for index, constraint in enumerate(constraints if isinstance(constraints, list) else ()):
        at = f"{field}[{index}]"
        if not isinstance(constraint, dict):
            continue
        skew = constraint.get("maxSkew")
        if not isinstance(skew, int) or isinstance(skew, bool) or skew <= 0:
            errs.invalid(f"{at}.maxSkew", skew, "must be greater than zero")
        if not constraint.get("topologyKey"):
            errs.required(f"{at}.topologyKey", "can not be empty")
        when = constraint.get("whenUnsatisfiable")
        if when not in ("DoNotSchedule", "ScheduleAnyway"):
            errs.not_supported(f"{at}.whenUnsatisfiable", when, ("DoNotSchedule", "ScheduleAnyway"))


def validate_pod_spec(spec: Any, field: str, errs: Errors, restart_policies: tuple[str, ...]) -> None:
    """core's `ValidatePodSpec`, the parts the product and its tests exercise."""
    if not isinstance(spec, dict):
        errs.required(field)
        return
    seen: set[str] = set()
    _validate_containers(spec.get("containers"), f"{field}.containers", seen, errs, required=True)
    _validate_containers(spec.get("initContainers"), f"{field}.initContainers", seen, errs, required=False)
    policy = spec.get("restartPolicy", "Always")
    if policy not in restart_policies:
        errs.not_supported(f"{field}.restartPolicy", policy, restart_policies)
    dns = spec.get("dnsPolicy", "ClusterFirst")
    dns_policies = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
    if dns not in dns_policies:
        errs.not_supported(f"{field}.dnsPolicy", dns, dns_policies)
    validate_labels(spec.get("nodeSelector"), f"{field}.nodeSelector", errs)
    validate_tolerations(spec.get("tolerations"), f"{field}.tolerations", errs)
    _validate_spread(spec.get("topologySpreadConstraints"), f"{field}.topologySpreadConstraints", errs)
    _nonnegative(spec.get("terminationGracePeriodSeconds"), f"{field}.terminationGracePeriodSeconds", errs)
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not None and (not isinstance(deadline, int) or deadline <= 0):
        errs.invalid(f"{field}.activeDeadlineSeconds", deadline, "must be between 1 and 2147483647, inclusive")


_POD_RESTART_POLICIES = ("Always", "OnFailure", "Never")


def validate_pod(obj: dict[str, Any], errs: Errors) -> None:
    """core's `ValidatePodCreate` / `ValidatePodSpec`."""
    validate_pod_spec(obj.get("spec"), "spec", errs, _POD_RESTART_POLICIES)


# ------------------------------------------------------------------------------------- workloads


def _selector(selector: Any, field: str, errs: Errors) -> dict[str, Any] | None:
    """apimachinery's `ValidateLabelSelector`: keys, values and operators."""
    if not isinstance(selector, dict):
        return None
    validate_labels(selector.get("matchLabels"), f"{field}.matchLabels", errs)
    for index, expression in enumerate(selector.get("matchExpressions") or ()):
        at = f"{field}.matchExpressions[{index}]"
        if not isinstance(expression, dict):
            continue
        operator, values = expression.get("operator"), expression.get("values") or []
        if operator in ("In", "NotIn") and not values:
            errs.required(f"{at}.values", "must be specified when `operator` is 'In' or 'NotIn'")
        elif operator in ("Exists", "DoesNotExist") and values:
            errs.forbidden(f"{at}.values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'")
        elif operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            errs.invalid(f"{at}.operator", operator, "not a valid selector operator")
        for problem in _qualified_name(str(expression.get("key") or "")):
            errs.invalid(f"{at}.key", expression.get("key"), problem)
    return selector


def _selector_matches(selector: dict[str, Any], labels: Mapping[str, str]) -> bool:
    try:
        return compile_label_selector_object(selector)(labels)
    except ApiError:
        return False


def validate_workload(obj: dict[str, Any], errs: Errors, restart_policies: tuple[str, ...] = ("Always",),
                      selector_required: bool = True) -> None:
    """apps' `ValidateDeploymentSpec` / `ValidateReplicaSetSpec` / `ValidateDaemonSetSpec` /
    `ValidateStatefulSetSpec` (and batch's `ValidateJobSpec` with its restart policies): replicas,
    a selector that matches the template's labels, the template's pod spec."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        errs.required("spec")
        return
    _nonnegative(spec.get("replicas"), "spec.replicas", errs)
    selector = _selector(spec.get("selector"), "spec.selector", errs)
    template = spec.get("template")
    if not isinstance(template, dict):
        errs.required("spec.template")
        return
    labels = (template.get("metadata") or {}).get("labels") or {}
    validate_labels(labels, "spec.template.metadata.labels", errs)
    validate_annotations((template.get("metadata") or {}).get("annotations"), "spec.template.metadata.annotations",
                         errs)
    if selector is None:
        if selector_required:
            errs.required("spec.selector")
    elif not (selector.get("matchLabels") or selector.get("matchExpressions")):
        errs.invalid("spec.selector", selector, "empty selector is invalid for deployment")
    elif not _selector_matches(selector, labels):
        errs.invalid("spec.template.metadata.labels", labels, "`selector` does not match template `labels`")
    validate_pod_spec(template.get("spec"), "spec.template.spec", errs, restart_policies)
    strategy = (spec.get("strategy") or {}).get("type")
    if obj.get("kind") == "Deployment" and strategy not in (None, "RollingUpdate", "Recreate"):
        errs.not_supported("spec.strategy.type", strategy, ("Recreate", "RollingUpdate"))
    policy = spec.get("podManagementPolicy")
    if obj.get("kind") == "StatefulSet" and policy not in (None, "OrderedReady", "Parallel"):
        errs.not_supported("spec.podManagementPolicy", policy, ("OrderedReady", "Parallel"))


def validate_job(obj: dict[str, Any], errs: Errors) -> None:
    """batch's `ValidateJob`: a template that restarts OnFailure or Never; the selector is generated."""
    validate_workload(obj, errs, ("OnFailure", "Never"), selector_required=False)


# ------------------------------------------------------------------------------------ other kinds


def validate_node(obj: dict[str, Any], errs: Errors) -> None:
    """core's `ValidateNode`: taints (`validateNodeTaints`) and the quantities of its status."""
    spec = obj.get("spec") or {}
    seen: set[tuple[str, str]] = set()
    for index, taint in enumerate(spec.get("taints") or ()):
        at = f"spec.taints[{index}]"
        if not isinstance(taint, dict):
            continue
        key, effect = taint.get("key") or "", taint.get("effect") or ""
        if not key:
            errs.required(f"{at}.key")
        for problem in _qualified_name(key) if key else ():
            errs.invalid(f"{at}.key", key, problem)
        for problem in _label_value(str(taint.get("value") or "")):
            errs.invalid(f"{at}.value", taint.get("value"), problem)
        if not effect:
            errs.required(f"{at}.effect")
        elif effect not in _TAINT_EFFECTS:
            errs.not_supported(f"{at}.effect", effect, _TAINT_EFFECTS)
        if (key, effect) in seen:
            errs.duplicate(at, taint)
        seen.add((key, effect))
    status = obj.get("status") or {}
    for part in ("capacity", "allocatable"):
        for name, value in (status.get(part) or {}).items():
            if parse_quantity(value, f"status.{part}[{name}]") < 0:
                errs.invalid(f"status.{part}[{name}]", value, "must be greater than or equal to 0")


def _int_or_percent(value: Any, field: str, errs: Errors) -> None:
    """policy's `ValidatePositiveIntOrPercent` and `IsValidPercent`."""
    if isinstance(value, int) and not isinstance(value, bool):
        _nonnegative(value, field, errs)
    elif isinstance(value, str):
        if not _PERCENT.match(value):
            errs.invalid(field, value, "a valid percent string must be a numeric string followed by an ending "
                         "'%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')")
        elif int(value[:-1]) > 100:
            errs.invalid(field, value, "must not be greater than 100%")


def validate_pdb(obj: dict[str, Any], errs: Errors) -> None:
    """policy's `ValidatePodDisruptionBudgetSpec`."""
    spec = obj.get("spec") or {}
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        errs.invalid("spec", spec, "minAvailable and maxUnavailable cannot be both set")
    for key in ("minAvailable", "maxUnavailable"):
        if spec.get(key) is not None:
            _int_or_percent(spec[key], f"spec.{key}", errs)
    _selector(spec.get("selector"), "spec.selector", errs)
    policy = spec.get("unhealthyPodEvictionPolicy")
    if policy not in (None, "IfHealthyBudget", "AlwaysAllow"):
        errs.not_supported("spec.unhealthyPodEvictionPolicy", policy, ("AlwaysAllow", "IfHealthyBudget"))


def validate_namespace(obj: dict[str, Any], errs: Errors) -> None:
    """core's `ValidateNamespace`: the name is a DNS label (`ValidateNamespaceName`)."""
    name = (obj.get("metadata") or {}).get("name") or ""
    for problem in _dns_label(name):
        errs.invalid("metadata.name", name, problem)


def validate_service(obj: dict[str, Any], errs: Errors) -> None:
    """core's `ValidateService`: DNS-1035 name, type, ports (names, numbers, protocols)."""
    name = (obj.get("metadata") or {}).get("name") or ""
    for problem in _dns_1035_label(name):
        errs.invalid("metadata.name", name, problem)
    spec = obj.get("spec") or {}
    kind = spec.get("type", "ClusterIP")
    types = ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")
    if kind not in types:
        errs.not_supported("spec.type", kind, types)
    ports = spec.get("ports") or []
    if not ports and kind != "ExternalName" and spec.get("clusterIP") != "None":
        errs.required("spec.ports")
    names: set[str] = set()
    for index, port in enumerate(ports if isinstance(ports, list) else ()):
        at = f"spec.ports[{index}]"
        if not isinstance(port, dict):
            continue
        port_name = port.get("name") or ""
        if len(ports) > 1 and not port_name:
            errs.required(f"{at}.name")
        elif port_name:
            for problem in _dns_label(port_name):
                errs.invalid(f"{at}.name", port_name, problem)
            if port_name in names:
                errs.duplicate(f"{at}.name", port_name)
            names.add(port_name)
        _port(port.get("port"), f"{at}.port", errs)
        if port.get("protocol", "TCP") not in _PROTOCOLS:
            errs.not_supported(f"{at}.protocol", port.get("protocol"), _PROTOCOLS)
        target = port.get("targetPort")
        if isinstance(target, int) and not isinstance(target, bool):
            _port(target, f"{at}.targetPort", errs)
        elif isinstance(target, str) and target:
            _port_name(target, f"{at}.targetPort", errs)
    validate_labels(spec.get("selector"), "spec.selector", errs)


def validate_data(obj: dict[str, Any], errs: Errors) -> None:
    """core's `ValidateConfigMap` / `ValidateSecret`: keys (`IsConfigMapKey`), none in both maps, 1 MiB."""
    total = 0
    seen: set[str] = set()
    for part in ("data", "binaryData", "stringData"):
        for key, value in (obj.get(part) or {}).items():
            if len(key) > 253:
                errs.invalid(f"{part}[{key}]", key, "must be no more than 253 characters")
            elif not _CONFIG_MAP_KEY.match(key) or key in (".", ".."):
                errs.invalid(f"{part}[{key}]", key, "a valid config key must consist of alphanumeric characters, "
                             "'-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for "
                             "validation is '[-._a-zA-Z0-9]+')")
            if key in seen and obj.get("kind") == "ConfigMap":
                errs.invalid(f"{part}[{key}]", key, "duplicate of key present in data")
            seen.add(key)
            total += len(str(value or ""))
    if total > CONFIG_MAP_SIZE_LIMIT:
        errs.too_long("", CONFIG_MAP_SIZE_LIMIT)


def validate_volume_attachment(obj: dict[str, Any], errs: Errors) -> None:
    """storage's `ValidateVolumeAttachment`: an attacher, a node and exactly one source."""
    spec = obj.get("spec") or {}
    for name in ("attacher", "nodeName"):
        if not spec.get(name):
            errs.required(f"spec.{name}")
    source = spec.get("source") or {}
    given = [k for k in ("persistentVolumeName", "inlineVolumeSpec") if source.get(k)]
    if len(given) != 1:
        errs.forbidden("spec.source", "must specify exactly one of inlineVolumeSpec and persistentVolumeName")


def validate_event(obj: dict[str, Any], errs: Errors) -> None:
    """core's `legacyValidateEvent`: the involved object's namespace agrees with the event's; a
    new-style event (with eventTime) names its reporter, action and reason."""
    namespace = (obj.get("metadata") or {}).get("namespace") or ""
    if obj.get("apiVersion") == "events.k8s.io/v1":
        involved, involved_field = obj.get("regarding") or {}, "regarding.namespace"
    else:
        involved, involved_field = obj.get("involvedObject") or {}, "involvedObject.namespace"
    involved_namespace = involved.get("namespace") or ""
    if not obj.get("eventTime"):
        if (involved_namespace and involved_namespace != namespace) or (
                not involved_namespace and namespace not in ("", "default")):
            errs.invalid(involved_field, involved_namespace, "does not match event.namespace")
        return
    if not involved_namespace and namespace not in ("default", "kube-system"):
        errs.invalid(involved_field, involved_namespace, "does not match event.namespace")
    reporting = "reportingController" if obj.get("apiVersion") == "events.k8s.io/v1" else "reportingComponent"
    for field, limit in ((reporting, 0), ("reportingInstance", 128), ("action", 128), ("reason", 128)):
        value = obj.get(field) or ""
        if not value:
            errs.required(field)
        elif limit and len(value) > limit:
            errs.invalid(field, "", f"can have at most {limit} characters")
    note = obj.get("note" if obj.get("apiVersion") == "events.k8s.io/v1" else "message") or ""
    if len(note) > 1024:
        errs.invalid("note" if obj.get("apiVersion") == "events.k8s.io/v1" else "message", "",
                     "can have at most 1024 characters")


_BY_RESOURCE: dict[str, Callable[[dict[str, Any], Errors], None]] = {
    "v1/pods": validate_pod,
    "v1/nodes": validate_node,
    "v1/namespaces": validate_namespace,
    "v1/services": validate_service,
    "v1/configmaps": validate_data,
    "v1/secrets": validate_data,
    "v1/events": validate_event,
    "events.k8s.io/v1/events": validate_event,
    "apps/v1/deployments": validate_workload,
    "apps/v1/replicasets": validate_workload,
    "apps/v1/daemonsets": validate_workload,
    "apps/v1/statefulsets": validate_workload,
    "batch/v1/jobs": validate_job,
    "policy/v1/poddisruptionbudgets": validate_pdb,
    "storage.k8s.io/v1/volumeattachments": validate_volume_attachment,
    "storage.k8s.io/v1/storageclasses": validate_storage_class,
    "storage.k8s.io/v1/csinodes": validate_csi_node,
    "v1/persistentvolumes": validate_volume,
    "v1/persistentvolumeclaims": validate_claim,
}


def validate(rt: ResourceType, obj: dict[str, Any]) -> None:
    """Nothing when `obj` is valid for `rt` (a built-in kind); else the 422 (or, for an unparseable
    quantity, the 400) kube-apiserver answers."""
    if not rt.builtin:
        return
    errs = Errors()
    validate_metadata(obj, errs)
    check = _BY_RESOURCE.get(rt.key)
    if check is not None:
        check(obj, errs)
    if errs.causes:
        raise invalid_error(rt, (obj.get("metadata") or {}).get("name") or "", errs.causes)
