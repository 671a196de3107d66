"""User data that joins a node to the cluster, in each AMI family's own format.

- AL2: a MIME multipart whose last part runs ``/etc/eks/bootstrap.sh``; the user's script parts first.
- AL2023: a MIME multipart with a ``node.eks.aws/v1alpha1`` NodeConfig for nodeadm, after the
  user's parts (nodeadm merges NodeConfigs in order, so ours decides the keys it sets).
- Bottlerocket: TOML settings; the user's TOML merged with ours winning on the keys we set.
- Windows: a ``<powershell>`` block calling ``Start-EKSBootstrap.ps1``, after the user's commands.
- Custom: the user's user data, unchanged.

The output is plain text; the launch template base64-encodes it.
"""

from __future__ import annotations

import email
import hashlib
import json
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

import yaml

from ..config import boundedyaml
from ..model import labels as wk
from ..model import nodelabels
from ..model import resources as res
from ..model.instancetype import InstanceType
from ..model.nodepool import KubeletSettings, NodeClass, NodePool
from ..model.quantity import format_bytes, format_cpu
from ..model.taints import UNREGISTERED_TAINT, Taint
from .cluster import ClusterInfo


class UserDataError(ValueError):
    """The node class's userData cannot be merged; the message says why and where."""


@dataclass(frozen=True, slots=True)
class NodeBootstrap:
    """Everything the node's own bootstrap needs besides the cluster."""

    labels: Mapping[str, str] = field(default_factory=dict)
    # the NodePool's taints, its startup taints, then karpenter.sh/unregistered:NoExecute
    taints: tuple[Taint, ...] = ()
    kubelet: KubeletSettings | None = None
    instance_store_policy: str | None = None  # "RAID0": local NVMe disks become ephemeral storage
    # The AMI's version ("latest", "v1.46.0"): the alias's, else the image name's (for_image), "" unknown.
    ami_version: str = ""


# --- what goes on the node -------------------------------------------------------------------

# Labels in kubernetes.io / k8s.io that the kubelet may set on its own node (NodeRestriction).
_KUBELET_ALLOWED = frozenset(
    {
        wk.HOSTNAME,
        wk.ARCH,
        wk.OS,
        wk.INSTANCE_TYPE,
        wk.ZONE,
        wk.REGION,
        "kubernetes.io/instance-type",
        "beta.kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/instance-type",
        "failure-domain.beta.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
    }
)
_KUBELET_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")


def kubelet_may_set(key: str) -> bool:
    """Whether ``--node-labels`` may carry ``key``: the kubelet refuses to start otherwise."""
    if key in _KUBELET_ALLOWED:
        return True
    domain = key.split("/", 1)[0] if "/" in key else ""
    if any(domain == d or domain.endswith("." + d) for d in _KUBELET_NAMESPACES):
        return True
    return not any(domain == d or domain.endswith("." + d) for d in ("kubernetes.io", "k8s.io"))


def node_labels(nodepool: NodePool) -> dict[str, str]:
    """The labels a node of this pool registers with: those of ``nodelabels.launch_labels`` (the
    requirements' single values, the pool's labels and names) that the kubelet may set. The rest, and
    what depends on the type and zone EC2 picks, the functions add when the node registers."""
    return dict(sorted((k, v) for k, v in nodelabels.launch_labels(nodepool).items() if kubelet_may_set(k)))


def bootstrap_for(nodepool: NodePool, node_class: NodeClass) -> NodeBootstrap:
    """The pool's labels, taints (startup taints after, then ``karpenter.sh/unregistered:NoExecute``, which
    registration removes, as Karpenter's user data does), and kubelet settings (the pool's, else the node
    class's: v1beta1 kept them on the pool, v1 on the node class)."""
    seen: set[tuple[str, str]] = set()
    taints: list[Taint] = []
    for t in (*nodepool.taints, *nodepool.startup_taints, UNREGISTERED_TAINT):
        if (t.key, t.effect) not in seen:  # the kubelet rejects a duplicate key:effect
            seen.add((t.key, t.effect))
            taints.append(t)
    return NodeBootstrap(
        labels=node_labels(nodepool),
        taints=tuple(taints),
        kubelet=nodepool.kubelet or node_class.kubelet,
        instance_store_policy=node_class.instance_store_policy,
        ami_version=_alias_version(node_class),
    )


def _alias_version(node_class: NodeClass) -> str:
    """The version part of the node class's first alias term (``bottlerocket@v1.46.0`` -> ``v1.46.0``)."""
    alias = next((t.alias for t in node_class.ami_selector_terms if t.alias), None)
    if alias is None:
        return ""
    return alias.partition("@")[2].strip() or "latest"


# A Bottlerocket image's name carries its release as one dash-separated part: bottlerocket-aws-k8s-1.33-x86_64-v1.46.0-431fe75a.
_IMAGE_RELEASE = re.compile(r"v\d+\.\d+\.\d+")


def image_version(image_name: str) -> str:
    """The Bottlerocket release in an image's name (``v1.46.0``), "" when no part of it is one."""
    return next((part for part in image_name.split("-") if _IMAGE_RELEASE.fullmatch(part)), "")


def for_image(node: NodeBootstrap, image_name: str) -> NodeBootstrap:
    """``node`` as launched with the image named ``image_name``: without an alias version, the release the
    image's name carries (Karpenter reads it from the name too); a name without one leaves it unknown,
    so the instance-store bind names its directories, which every release accepts."""
    if node.ami_version:
        return node
    version = image_version(image_name)
    return replace(node, ami_version=version) if version else node


def max_pods_groups(
    node: NodeBootstrap, family: str, types: Iterable[InstanceType]
) -> list[tuple[int | None, tuple[InstanceType, ...]]]:
    """The types by the pod count the planner gave them (their ``pods`` capacity: ENI-limited, or the
    kubelet's podsPerCore), each count to be written as the kubelet's max-pods, as Karpenter writes it
    per instance type. One group with None (nothing to write) when the kubelet sets maxPods itself, or
    for Custom user data, which nodescale never changes, and for no types (every image's template)."""
    listed = tuple(types)
    if not listed or family == "Custom" or (node.kubelet is not None and node.kubelet.max_pods is not None):
        return [(None, listed)]
    groups: dict[int | None, list[InstanceType]] = {}
    for it in listed:
        groups.setdefault(it.capacity.get(res.PODS), []).append(it)
    return sorted(((n, tuple(ts)) for n, ts in groups.items()), key=lambda g: -1 if g[0] is None else g[0])


def with_max_pods(node: NodeBootstrap, max_pods: int | None) -> NodeBootstrap:
    """``node`` with the kubelet's max-pods set (None: unchanged)."""
    if max_pods is None:
        return node
    return replace(node, kubelet=replace(node.kubelet or KubeletSettings(), max_pods=max_pods))


# --- shared pieces --------------------------------------------------------------------------


def _labels_arg(labels: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def _taint_arg(taint: Taint) -> str:
    return f"{taint.key}={taint.value}:{taint.effect}" if taint.value else f"{taint.key}:{taint.effect}"


def _quantities(values: Mapping[str, int]) -> dict[str, str]:
    out = {}
    for name, amount in sorted(values.items()):
        if name == res.CPU:
            out[name] = format_cpu(amount)
        elif name in (res.MEMORY, res.EPHEMERAL_STORAGE):
            out[name] = format_bytes(amount)
        else:
            out[name] = str(amount)
    return out


# KubeletConfiguration fields passed through as given (flag name for the AL2 / Windows command line).
_PASSTHROUGH = {
    "evictionSoftGracePeriod": "--eviction-soft-grace-period",
    "evictionMaxPodGracePeriod": "--eviction-max-pod-grace-period",
    "imageGCHighThresholdPercent": "--image-gc-high-threshold",
    "imageGCLowThresholdPercent": "--image-gc-low-threshold",
    "cpuCFSQuota": "--cpu-cfs-quota",
}


def _kubelet_config(kubelet: KubeletSettings | None, cluster_dns: str | None) -> dict:
    """The kubelet settings as KubeletConfiguration fields (camelCase), only those that are set."""
    cfg: dict = {}
    if kubelet is not None:
        if kubelet.max_pods is not None:
            cfg["maxPods"] = kubelet.max_pods
        if kubelet.pods_per_core is not None:
            cfg["podsPerCore"] = kubelet.pods_per_core
        if kubelet.system_reserved:
            cfg["systemReserved"] = _quantities(kubelet.system_reserved)
        if kubelet.kube_reserved:
            cfg["kubeReserved"] = _quantities(kubelet.kube_reserved)
        if kubelet.eviction_hard:
            cfg["evictionHard"] = dict(sorted(kubelet.eviction_hard.items()))
        if kubelet.eviction_soft:
            cfg["evictionSoft"] = dict(sorted(kubelet.eviction_soft.items()))
        for key in _PASSTHROUGH:
            if key in kubelet.raw and kubelet.raw[key] is not None:
                cfg[key] = kubelet.raw[key]
    dns = list(kubelet.cluster_dns) if kubelet is not None and kubelet.cluster_dns else []
    if not dns and cluster_dns:
        dns = [cluster_dns]
    if dns:
        cfg["clusterDNS"] = dns
    return cfg


def _flag_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return ",".join(f"{k}={v}" for k, v in value.items())
    return str(value)


def _kubelet_flags(node: NodeBootstrap, cfg: Mapping[str, object]) -> list[str]:
    """Labels, taints and kubelet settings as kubelet command-line flags (AL2, Windows)."""
    flags = []
    if node.labels:
        flags.append(f"--node-labels={_labels_arg(node.labels)}")
    if node.taints:
        flags.append(f"--register-with-taints={','.join(_taint_arg(t) for t in node.taints)}")
    if "maxPods" in cfg:
        flags.append(f"--max-pods={cfg['maxPods']}")
    if "podsPerCore" in cfg:
        flags.append(f"--pods-per-core={cfg['podsPerCore']}")
    for key, flag in (("systemReserved", "--system-reserved"), ("kubeReserved", "--kube-reserved")):
        if key in cfg:
            flags.append(f"{flag}={_flag_value(cfg[key])}")
    for key, flag in (("evictionHard", "--eviction-hard"), ("evictionSoft", "--eviction-soft")):
        if key in cfg:
            flags.append(f"{flag}={','.join(f'{k}<{v}' for k, v in cfg[key].items())}")  # type: ignore[union-attr]
    for key, flag in _PASSTHROUGH.items():
        if key in cfg:
            flags.append(f"{flag}={_flag_value(cfg[key])}")
    return flags


def _sq(value: str) -> str:
    """Single-quoted for a POSIX shell or PowerShell (both take '' / '\\'' differently)."""
    return "'" + value.replace("'", "'\\''") + "'"


def _ps_sq(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


# --- MIME multipart -------------------------------------------------------------------------

SHELL = 'text/x-shellscript; charset="us-ascii"'
NODECONFIG = "application/node.eks.aws"
CLOUD_CONFIG = 'text/cloud-config; charset="us-ascii"'


def _is_mime(text: str) -> bool:
    head = text.lstrip()[:1024].lower()
    return head.startswith("mime-version:") or head.startswith("content-type: multipart/")


def mime_parts(text: str, where: str = "userData") -> list[tuple[str, str]]:
    """A MIME multipart user data as (content type, body) pairs, in order."""
    msg = email.message_from_string(text.lstrip())
    if not msg.is_multipart():
        raise UserDataError(f"{where}: looks like MIME but is not a multipart message")
    parts = []
    for part in msg.walk():
        if part.is_multipart():
            continue
        payload = part.get_payload(decode=True)
        body = payload.decode(part.get_content_charset() or "utf-8") if isinstance(payload, bytes) else str(payload)
        parts.append((part.get("Content-Type", "text/plain"), body))
    return parts


def _boundary(bodies: Iterable[str]) -> str:
    joined = "\n".join(bodies)
    if "--//" not in joined:
        return "//"
    return "==" + hashlib.sha256(joined.encode()).hexdigest()[:24] + "=="


def mime(parts: list[tuple[str, str]]) -> str:
    boundary = _boundary(body for _, body in parts)
    out = ["MIME-Version: 1.0", f'Content-Type: multipart/mixed; boundary="{boundary}"', ""]
    for content_type, body in parts:
        out += [f"--{boundary}", f"Content-Type: {content_type}", "", body.rstrip("\n")]
    out += [f"--{boundary}--", ""]
    return "\n".join(out)


def _user_parts(user_data: str | None, where: str) -> list[tuple[str, str]]:
    """The user's user data as MIME parts, whatever shape it was given in."""
    if not user_data or not user_data.strip():
        return []
    if _is_mime(user_data):
        return mime_parts(user_data, where)
    text = user_data
    if text.lstrip().startswith("#cloud-config"):
        return [(CLOUD_CONFIG, text)]
    if not text.lstrip().startswith("#!"):
        try:
            doc = boundedyaml.load(text)
        except yaml.YAMLError:
            doc = None
        if isinstance(doc, dict) and str(doc.get("apiVersion", "")).startswith("node.eks.aws/"):
            return [(NODECONFIG, text)]
    return [(SHELL, text)]


# --- the four formats -----------------------------------------------------------------------


def al2(cluster: ClusterInfo, node: NodeBootstrap, user_data: str | None = None, where: str = "userData") -> str:
    cfg = _kubelet_config(node.kubelet, None)
    dns = (cfg.get("clusterDNS") or [cluster.dns_ip])[0]
    args = [
        "/etc/eks/bootstrap.sh",
        _sq(cluster.name),
        "--apiserver-endpoint",
        _sq(cluster.endpoint),
        "--b64-cluster-ca",
        _sq(cluster.ca_data),
    ]
    if dns:
        args += ["--dns-cluster-ip", _sq(dns)]
    if node.instance_store_policy == "RAID0":
        args += ["--local-disks", "raid0"]
    if cluster.ip_family == "ipv6" and cluster.service_cidr:
        args += ["--ip-family", "ipv6", "--service-ipv6-cidr", _sq(cluster.service_cidr)]
    if "maxPods" in cfg:
        # Without this, bootstrap.sh computes its own ENI-based limit and ignores --max-pods.
        args += ["--use-max-pods", "false"]
    flags = _kubelet_flags(node, cfg)
    if flags:
        args += ["--kubelet-extra-args", _sq(" ".join(flags))]
    script = "\n".join(
        [
            "#!/bin/bash -xe",
            "exec > >(tee /var/log/user-data.log | logger -t user-data -s 2>/dev/console) 2>&1",
            " ".join(args),
        ]
    )
    return mime([*_user_parts(user_data, where), (SHELL, script)])


def nodeconfig(cluster: ClusterInfo, node: NodeBootstrap) -> dict:
    """The NodeConfig nodeadm reads (AL2023)."""
    spec_cluster: dict = {
        "name": cluster.name,
        "apiServerEndpoint": cluster.endpoint,
        "certificateAuthority": cluster.ca_data,
    }
    if cluster.service_cidr:
        spec_cluster["cidr"] = cluster.service_cidr
    kubelet: dict = {}
    cfg = _kubelet_config(node.kubelet, cluster.dns_ip)
    if cfg:
        kubelet["config"] = cfg
    flags = []
    if node.labels:
        flags.append(f"--node-labels={_labels_arg(node.labels)}")
    if node.taints:
        flags.append(f"--register-with-taints={','.join(_taint_arg(t) for t in node.taints)}")
    if flags:
        kubelet["flags"] = flags
    spec: dict = {"cluster": spec_cluster}
    if node.instance_store_policy == "RAID0":
        spec["instance"] = {"localStorage": {"strategy": "RAID0"}}
    if kubelet:
        spec["kubelet"] = kubelet
    return {"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": spec}


def al2023(cluster: ClusterInfo, node: NodeBootstrap, user_data: str | None = None, where: str = "userData") -> str:
    ours = yaml.safe_dump(nodeconfig(cluster, node), sort_keys=False, default_flow_style=False)
    return mime([*_user_parts(user_data, where), (NODECONFIG, ours)])


def bottlerocket_settings(cluster: ClusterInfo, node: NodeBootstrap) -> dict:
    k8s: dict = {
        "cluster-name": cluster.name,
        "api-server": cluster.endpoint,
        "cluster-certificate": cluster.ca_data,
    }
    cfg = _kubelet_config(node.kubelet, cluster.dns_ip)
    if "clusterDNS" in cfg:
        dns = cfg["clusterDNS"]
        k8s["cluster-dns-ip"] = dns[0] if len(dns) == 1 else list(dns)
    for key, name in (
        ("maxPods", "max-pods"),
        ("podsPerCore", "pods-per-core"),
        ("imageGCHighThresholdPercent", "image-gc-high-threshold-percent"),
        ("imageGCLowThresholdPercent", "image-gc-low-threshold-percent"),
        ("cpuCFSQuota", "cpu-cfs-quota-enforced"),
        ("evictionMaxPodGracePeriod", "eviction-max-pod-grace-period"),
    ):
        if key in cfg:
            k8s[name] = cfg[key]
    for key, name in (
        ("systemReserved", "system-reserved"),
        ("kubeReserved", "kube-reserved"),
        ("evictionHard", "eviction-hard"),
        ("evictionSoft", "eviction-soft"),
        ("evictionSoftGracePeriod", "eviction-soft-grace-period"),
    ):
        if key in cfg:
            k8s[name] = dict(cfg[key])
    if node.labels:
        k8s["node-labels"] = dict(sorted(node.labels.items()))
    if node.taints:
        taints: dict[str, list[str]] = {}
        for t in node.taints:
            taints.setdefault(t.key, []).append(f"{t.value}:{t.effect}")
        k8s["node-taints"] = taints
    settings: dict = {"kubernetes": k8s}
    if node.instance_store_policy == "RAID0":
        settings["bootstrap-commands"] = {"000-mount-instance-storage": _mount_instance_storage(node.ami_version)}
    return {"settings": settings}


# Bottlerocket's ephemeral-storage bind gained default directories in v1.46.0; before, it needs them named.
_LEGACY_BIND_DIRS = ("/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods")


def _mount_instance_storage(ami_version: str) -> dict:
    """The bootstrap command that assembles the instance store disks (RAID0) and binds the node's storage
    directories onto them, as the provider's Bottlerocket user data does: the bare ``bind`` when the AMI
    is ``latest`` or v1.46.0 and later, the directories named otherwise (version unknown included)."""
    bind = ["apiclient", "ephemeral-storage", "bind"]
    if not _supports_default_bind(ami_version):
        bind += ["--dirs", *_LEGACY_BIND_DIRS]
    return {"commands": [["apiclient", "ephemeral-storage", "init"], bind], "mode": "always", "essential": True}


def _supports_default_bind(version: str) -> bool:
    if version == "latest":
        return True
    parts = version.lstrip("v").split(".")
    if len(parts) < 3 or not (parts[0].isdigit() and parts[1].isdigit()):
        return False
    return (int(parts[0]), int(parts[1])) >= (1, 46)


def _merge(theirs: dict, ours: Mapping) -> dict:
    out = dict(theirs)
    for key, value in ours.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def bottlerocket(
    cluster: ClusterInfo, node: NodeBootstrap, user_data: str | None = None, where: str = "userData"
) -> str:
    theirs: dict = {}
    if user_data and user_data.strip():
        try:
            theirs = tomllib.loads(user_data)
        except tomllib.TOMLDecodeError as exc:
            raise UserDataError(f"{where}: Bottlerocket user data must be TOML settings ({exc})") from None
    return to_toml(_merge(theirs, bottlerocket_settings(cluster, node)))


EKS_BOOTSTRAP_SCRIPT = r'[string]$EKSBootstrapScriptFile = "$env:ProgramFiles\Amazon\EKS\Start-EKSBootstrap.ps1"'
_PS_TAGS = re.compile(r"</?powershell>", re.IGNORECASE)


def windows(cluster: ClusterInfo, node: NodeBootstrap, user_data: str | None = None) -> str:
    cfg = _kubelet_config(node.kubelet, None)
    call = [
        "& $EKSBootstrapScriptFile",
        "-EKSClusterName",
        _ps_sq(cluster.name),
        "-APIServerEndpoint",
        _ps_sq(cluster.endpoint),
        "-Base64ClusterCA",
        _ps_sq(cluster.ca_data),
    ]
    flags = _kubelet_flags(node, cfg)
    if flags:
        call += ["-KubeletExtraArgs", _ps_sq(" ".join(flags))]
    dns = (cfg.get("clusterDNS") or [cluster.dns_ip])[0]
    if dns:
        call += ["-DNSClusterIP", _ps_sq(dns)]
    lines = ["<powershell>"]
    if user_data and user_data.strip():
        lines.append(_PS_TAGS.sub("", user_data).strip("\n"))
    lines += [EKS_BOOTSTRAP_SCRIPT, " ".join(call), "</powershell>", ""]
    return "\n".join(lines)


def render(
    family: str, cluster: ClusterInfo, node: NodeBootstrap, user_data: str | None = None, where: str = "userData"
) -> str:
    """The user data for ``family`` (AL2, AL2023, Bottlerocket, Ubuntu, Windows20xx, Custom)."""
    if family in ("AL2", "Ubuntu"):  # Canonical's EKS images ship the same bootstrap.sh
        return al2(cluster, node, user_data, where)
    if family == "AL2023":
        return al2023(cluster, node, user_data, where)
    if family == "Bottlerocket":
        return bottlerocket(cluster, node, user_data, where)
    if family.startswith("Windows"):
        return windows(cluster, node, user_data)
    if family == "Custom":
        return user_data or ""
    raise UserDataError(f"{where}: no user data format for AMI family {family!r}")


# --- a small TOML writer (the standard library only reads TOML) -----------------------------

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def _toml_key(key: str) -> str:
    return key if _BARE.match(key) else json.dumps(key)


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_toml_key(str(k))} = {_toml_value(v)}" for k, v in value.items()) + "}"
    return json.dumps(str(value))


def to_toml(doc: Mapping) -> str:
    lines: list[str] = []

    def table(path: list[str], body: Mapping) -> None:
        scalars = [(k, v) for k, v in body.items() if not isinstance(v, Mapping)]
        tables = [(k, v) for k, v in body.items() if isinstance(v, Mapping)]
        if path and (scalars or not tables):
            if lines:
                lines.append("")
            lines.append("[" + ".".join(_toml_key(p) for p in path) + "]")
        for k, v in scalars:
            lines.append(f"{_toml_key(str(k))} = {_toml_value(v)}")
        for k, v in tables:
            table([*path, str(k)], v)

    table([], doc)
    return "\n".join(lines) + "\n"
