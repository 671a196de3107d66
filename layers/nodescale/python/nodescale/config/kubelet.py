"""Kubelet settings, shared by v1alpha5 `kubeletConfiguration`, v1beta1 `template.spec.kubelet` and v1 EC2NodeClass `kubelet`."""

from __future__ import annotations

import re

from ..model.nodepool import KubeletSettings
from ..model.quantity import QuantityError, to_int, to_milli
from .errors import show
from .fields import FieldError, boolean, duration, integer, items, mapping

_RESERVED_KEYS = ("cpu", "memory", "ephemeral-storage", "pid")
_EVICTION_SIGNALS = (
    "memory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "pid.available",
)
_PERCENT = re.compile(r"^(\d+(\.\d+)?)%$")


def parse_kubelet(raw: object, path: str) -> KubeletSettings | None:
    if raw is None:
        return None
    # Which settings exist in each generation is schema.py's to say (strict.py names unknown ones).
    spec = mapping(raw, path)
    high = integer(spec.get("imageGCHighThresholdPercent"), f"{path}.imageGCHighThresholdPercent", 0, 100)
    low = integer(spec.get("imageGCLowThresholdPercent"), f"{path}.imageGCLowThresholdPercent", 0, 100)
    if high is not None and low is not None and low >= high:
        raise FieldError(
            f"{path}.imageGCLowThresholdPercent",
            f"{low} is not allowed; it must be lower than imageGCHighThresholdPercent ({high})",
        )
    boolean(spec.get("cpuCFSQuota"), f"{path}.cpuCFSQuota")
    max_pod_grace = spec.get("evictionMaxPodGracePeriod")
    integer(max_pod_grace, f"{path}.evictionMaxPodGracePeriod", 0)
    soft = _eviction(spec.get("evictionSoft"), f"{path}.evictionSoft")
    grace = mapping(spec.get("evictionSoftGracePeriod"), f"{path}.evictionSoftGracePeriod")
    for signal, value in grace.items():
        p = f"{path}.evictionSoftGracePeriod.{signal}"
        if signal not in _EVICTION_SIGNALS:
            raise FieldError(p, f"unknown eviction signal; allowed are {', '.join(_EVICTION_SIGNALS)}")
        duration(value, p, allow_never=False)
    for signal in soft:
        if signal not in grace:
            raise FieldError(
                f"{path}.evictionSoft.{signal}", "needs a matching evictionSoftGracePeriod entry for the same signal"
            )
    cluster_dns = []
    for i, ip in enumerate(items(spec.get("clusterDNS"), f"{path}.clusterDNS")):
        if not isinstance(ip, str) or not ip:
            raise FieldError(f"{path}.clusterDNS[{i}]", f"{show(ip)} is not allowed; expected an IP address")
        cluster_dns.append(ip)
    return KubeletSettings(
        max_pods=integer(spec.get("maxPods"), f"{path}.maxPods", 0),
        pods_per_core=integer(spec.get("podsPerCore"), f"{path}.podsPerCore", 0),
        system_reserved=_reserved(spec.get("systemReserved"), f"{path}.systemReserved"),
        kube_reserved=_reserved(spec.get("kubeReserved"), f"{path}.kubeReserved"),
        eviction_hard=_eviction(spec.get("evictionHard"), f"{path}.evictionHard"),
        eviction_soft=soft,
        cluster_dns=tuple(cluster_dns),
        raw=dict(spec),
    )


def _reserved(raw: object, path: str) -> dict[str, int]:
    out = {}
    for name, value in mapping(raw, path).items():
        if name not in _RESERVED_KEYS:
            raise FieldError(f"{path}.{name}", f"unknown resource; allowed are {', '.join(_RESERVED_KEYS)}")
        try:
            out[name] = to_milli(value) if name == "cpu" else to_int(value)
        except QuantityError as exc:
            raise FieldError(f"{path}.{name}", str(exc)) from None
        if out[name] < 0:
            raise FieldError(f"{path}.{name}", f"{show(value)} is not allowed; it must be 0 or more")
    return out


def _eviction(raw: object, path: str) -> dict[str, str]:
    out = {}
    for signal, value in mapping(raw, path).items():
        p = f"{path}.{signal}"
        if signal not in _EVICTION_SIGNALS:
            raise FieldError(p, f"unknown eviction signal; allowed are {', '.join(_EVICTION_SIGNALS)}")
        text = str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value
        if not isinstance(text, str):
            raise FieldError(p, f"{show(value)} is not allowed; expected a quantity like 100Mi or a percentage like 10%")
        pct = _PERCENT.match(text)
        if pct:
            if float(pct.group(1)) > 100:
                raise FieldError(p, f"{show(value)} is not allowed; a percentage must be at most 100%")
        else:
            try:
                to_int(text)
            except QuantityError:
                raise FieldError(
                    p, f"{show(value)} is not allowed; expected a quantity like 100Mi or a percentage like 10%"
                ) from None
        out[signal] = text
    return out
