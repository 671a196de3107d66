"""Read what a node's user data tells its kubelet: cluster, node labels, taints and max pods.

Four real formats, detected from the content:
- AL2 shell scripts calling `/etc/eks/bootstrap.sh <cluster> --kubelet-extra-args '...'`;
- AL2023 `NodeConfig` documents (apiVersion node.eks.aws/v1alpha1), usually in a MIME multipart;
- Bottlerocket TOML (`[settings.kubernetes]`, `node-labels`, `node-taints`, `max-pods`);
- Windows `<powershell>` calling `Start-EKSBootstrap.ps1 -EKSClusterName ... -KubeletExtraArgs '...'`.
MIME multipart archives (how launch templates merge custom user data with the generated part) are
unpacked and every part is read. Anything that cannot be read raises `UserDataError` saying why:
a real node with such user data never joins.
"""

from __future__ import annotations

import base64
import binascii
import email
import email.policy
import re
import shlex
import tomllib
from dataclasses import dataclass, field
from typing import Any

import yaml

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
NODECONFIG_API_VERSIONS = ("node.eks.aws/v1alpha1", "node.eks.aws/v1beta1")
_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


class UserDataError(ValueError):
    """The user data cannot bootstrap a node; the message says which part and why."""


@dataclass
class Bootstrap:
    """What the kubelet would register with."""

    cluster: str
    os: str = "linux"  # linux | windows
    family: str = ""  # AL2 | AL2023 | Bottlerocket | Windows
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, str]] = field(default_factory=list)
    max_pods: int | None = None
    instance_store_raid0: bool = False  # the kubelet's storage moved onto the instance store's RAID0 array


def decode(raw: str | bytes | None) -> str:
    """User data as EC2 returns it (base64) to text."""
    if raw is None or raw == "" or raw == b"":
        raise UserDataError("the instance has no user data, so nothing starts the kubelet")
    try:
        data = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        raise UserDataError("user data is not valid base64") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UserDataError("user data is not UTF-8 text (gzip-compressed user data is not supported)") from None


def parse(text: str) -> Bootstrap:
    """Find the bootstrap in user data of any supported format."""
    stripped = text.lstrip()
    if not stripped:
        raise UserDataError("user data is empty, so nothing starts the kubelet")
    if _is_mime(stripped):
        return _parse_mime(stripped)
    if "<powershell>" in stripped.lower():
        return parse_windows(stripped)
    if stripped.startswith("[") or re.match(r"^\s*settings\.", stripped):
        return parse_bottlerocket(stripped)
    if stripped.startswith("apiVersion:") or stripped.startswith("---"):
        return parse_nodeconfigs([stripped])
    return parse_al2(stripped)


def _is_mime(text: str) -> bool:
    head = text[:2000].lower()
    return head.startswith("mime-version:") or head.startswith("content-type: multipart/")


def _parse_mime(text: str) -> Bootstrap:
    message = email.message_from_string(text, policy=email.policy.compat32)
    if not message.is_multipart():
        raise UserDataError("user data says it is MIME but is not a multipart message (check the boundary)")
    nodeconfigs: list[str] = []
    scripts: list[str] = []
    for part in message.walk():
        if part.is_multipart():
            continue
        payload = part.get_payload(decode=True)
        body = payload.decode("utf-8", errors="replace") if isinstance(payload, bytes) else str(part.get_payload())
        ctype = part.get_content_type()
        if ctype == "application/node.eks.aws" or "node.eks.aws/" in body:
            nodeconfigs.append(body)
        elif "bootstrap.sh" in body:
            scripts.append(body)
    if nodeconfigs:
        return parse_nodeconfigs(nodeconfigs)
    if scripts:
        return parse_al2(scripts[-1])
    raise UserDataError("no part of the MIME user data bootstraps a node (no NodeConfig, no /etc/eks/bootstrap.sh)")


def _join_continuations(text: str) -> str:
    return re.sub(r"\\\r?\n", " ", text)


def parse_al2(text: str) -> Bootstrap:
    """`/etc/eks/bootstrap.sh <cluster> [--kubelet-extra-args '...'] [--use-max-pods false] ...`."""
    for line in _join_continuations(text).splitlines():
        if "/etc/eks/bootstrap.sh" not in line or line.lstrip().startswith("#"):
            continue
        try:
            words = shlex.split(line[line.index("/etc/eks/bootstrap.sh") :], comments=True)
        except ValueError as exc:
            raise UserDataError(f"the bootstrap.sh line cannot be split into arguments ({exc})") from None
        args = words[1:]
        positional = [a for i, a in enumerate(args) if not a.startswith("-") and not _is_flag_value(args, i)]
        if not positional:
            raise UserDataError("bootstrap.sh is called without the cluster name (its first argument)")
        boot = Bootstrap(cluster=positional[0], family="AL2")
        boot.instance_store_raid0 = _flag_value(args, "--local-disks") == "raid0"
        extra = _flag_value(args, "--kubelet-extra-args")
        if extra:
            _apply_kubelet_flags(boot, _split(extra, "--kubelet-extra-args"))
        return boot
    raise UserDataError("the script never calls /etc/eks/bootstrap.sh, so the kubelet never joins")


# bootstrap.sh options that take a value (so the value is not mistaken for the cluster name).
_AL2_VALUE_FLAGS = {
    "--kubelet-extra-args", "--b64-cluster-ca", "--apiserver-endpoint", "--use-max-pods",
    "--container-runtime", "--dns-cluster-ip", "--ip-family", "--service-ipv6-cidr",
    "--docker-config-json", "--enable-docker-bridge", "--aws-api-retry-attempts",
    "--pause-container-account", "--pause-container-version", "--local-disks", "--mount-bpf-fs",
    "--enable-local-outpost", "--cluster-id",
}


def _is_flag_value(args: list[str], index: int) -> bool:
    return index > 0 and args[index - 1] in _AL2_VALUE_FLAGS


def _flag_value(args: list[str], flag: str) -> str | None:
    for index, arg in enumerate(args):
        if arg == flag and index + 1 < len(args):
            return args[index + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


def _split(value: str, where: str) -> list[str]:
    try:
        return shlex.split(value)
    except ValueError as exc:
        raise UserDataError(f"{where} cannot be split into kubelet flags ({exc})") from None


def _apply_kubelet_flags(boot: Bootstrap, flags: list[str]) -> None:
    index = 0
    while index < len(flags):
        flag = flags[index]
        name, has_value, value = flag.partition("=")
        if not has_value and name in ("--node-labels", "--register-with-taints", "--max-pods"):
            if index + 1 >= len(flags):
                raise UserDataError(f"kubelet flag {name} has no value")
            index += 1
            value = flags[index]
        if name == "--node-labels":
            boot.labels.update(parse_labels(value))
        elif name == "--register-with-taints":
            boot.taints.extend(parse_taints(value))
        elif name == "--max-pods":
            boot.max_pods = _max_pods(value, "kubelet flag --max-pods")
        index += 1


def _max_pods(value: Any, where: str) -> int:
    try:
        number = int(str(value).strip())
    except ValueError:
        raise UserDataError(f"{where}={value!r} is not a whole number") from None
    if number < 1:
        raise UserDataError(f"{where}={value!r} must be at least 1")
    return number


def parse_labels(value: str) -> dict[str, str]:
    """`a=b,c=d` (the kubelet's --node-labels syntax)."""
    labels: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in value.strip().strip('"').split(","))):
        key, has_value, label_value = item.partition("=")
        if not has_value:
            raise UserDataError(f"node label {item!r} is not key=value")
        _check_label(key, label_value)
        labels[key] = label_value
    return labels


def _check_label(key: str, value: str) -> None:
    if not key or len(key.rsplit("/", 1)[-1]) > 63 or not _LABEL_KEY.match(key):
        raise UserDataError(f"node label key {key!r} is not a valid Kubernetes label key")
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        raise UserDataError(f"node label {key}={value!r}: the value is not a valid Kubernetes label value")


def parse_taints(value: str) -> list[dict[str, str]]:
    """`key=value:Effect,key2:Effect` (the kubelet's --register-with-taints syntax)."""
    taints = []
    for item in filter(None, (part.strip() for part in value.strip().strip('"').split(","))):
        body, colon, effect = item.rpartition(":")
        if not colon:
            raise UserDataError(f"taint {item!r} has no effect (expected key=value:Effect)")
        key, _, taint_value = body.partition("=")
        taints.append(_taint(key, taint_value, effect, item))
    return taints


def _taint(key: str, value: str, effect: str, source: str) -> dict[str, str]:
    if effect not in TAINT_EFFECTS:
        raise UserDataError(f"taint {source!r}: effect {effect!r} is not one of {TAINT_EFFECTS}")
    _check_label(key, value)
    taint = {"key": key, "effect": effect}
    if value:
        taint["value"] = value
    return taint


def parse_nodeconfigs(documents: list[str]) -> Bootstrap:
    """AL2023 nodeadm: one or more NodeConfig YAML documents, merged in order."""
    boot = Bootstrap(cluster="", family="AL2023")
    seen = False
    for text in documents:
        try:
            loaded = list(yaml.safe_load_all(text))
        except yaml.YAMLError as exc:
            raise UserDataError(f"a NodeConfig part is not valid YAML ({exc.__class__.__name__})") from None
        for doc in loaded:
            if not isinstance(doc, dict):
                continue
            if doc.get("kind") != "NodeConfig" or doc.get("apiVersion") not in NODECONFIG_API_VERSIONS:
                raise UserDataError(
                    f"expected kind NodeConfig with apiVersion in {NODECONFIG_API_VERSIONS}, "
                    f"got kind={doc.get('kind')!r} apiVersion={doc.get('apiVersion')!r}"
                )
            seen = True
            spec = doc.get("spec") or {}
            name = ((spec.get("cluster") or {}).get("name")) or ""
            if name:
                boot.cluster = str(name)
            local = ((spec.get("instance") or {}).get("localStorage") or {}).get("strategy")
            if local is not None:  # a later NodeConfig's strategy replaces an earlier one's
                boot.instance_store_raid0 = local == "RAID0"
            kubelet = spec.get("kubelet") or {}
            flags = kubelet.get("flags") or []
            if not isinstance(flags, list):
                raise UserDataError("NodeConfig spec.kubelet.flags must be a list of strings")
            _apply_kubelet_flags(boot, [str(f) for f in flags])
            config = kubelet.get("config") or {}
            if "maxPods" in config:
                boot.max_pods = _max_pods(config["maxPods"], "NodeConfig spec.kubelet.config.maxPods")
            for taint in config.get("registerWithTaints") or []:
                boot.taints.append(
                    _taint(str(taint.get("key", "")), str(taint.get("value", "")), str(taint.get("effect", "")), str(taint))
                )
    if not seen:
        raise UserDataError("the user data holds no NodeConfig document")
    if not boot.cluster:
        raise UserDataError("NodeConfig spec.cluster.name is missing, so nodeadm cannot join a cluster")
    return boot


def parse_bottlerocket(text: str) -> Bootstrap:
    """Bottlerocket settings TOML."""
    try:
        settings = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserDataError(f"Bottlerocket user data is not valid TOML ({exc})") from None
    kube = (settings.get("settings") or {}).get("kubernetes")
    if not isinstance(kube, dict):
        raise UserDataError("Bottlerocket user data has no [settings.kubernetes] table")
    cluster = kube.get("cluster-name")
    if not cluster:
        raise UserDataError("Bottlerocket settings.kubernetes.cluster-name is missing")
    boot = Bootstrap(cluster=str(cluster), family="Bottlerocket")
    labels = kube.get("node-labels") or {}
    if not isinstance(labels, dict):
        raise UserDataError("Bottlerocket settings.kubernetes.node-labels must be a table")
    for key, value in labels.items():
        _check_label(str(key), str(value))
        boot.labels[str(key)] = str(value)
    taints = kube.get("node-taints") or {}
    if not isinstance(taints, dict):
        raise UserDataError("Bottlerocket settings.kubernetes.node-taints must be a table")
    for key, values in taints.items():
        for item in values if isinstance(values, list) else [values]:
            value, colon, effect = str(item).rpartition(":")
            if not colon:
                raise UserDataError(f"Bottlerocket node-taints {key} = {item!r}: expected \"value:Effect\"")
            boot.taints.append(_taint(str(key), value, effect, f"{key}={item}"))
    if "max-pods" in kube:
        boot.max_pods = _max_pods(kube["max-pods"], "Bottlerocket settings.kubernetes.max-pods")
    boot.instance_store_raid0 = _binds_kubelet_to_ephemeral_storage((settings.get("settings") or {}).get("bootstrap-commands"))
    return boot


_KUBELET_DIR = "/var/lib/kubelet"


def _binds_kubelet_to_ephemeral_storage(commands: Any) -> bool:
    """Whether a bootstrap command assembles the instance store (``apiclient ephemeral-storage init``) and binds
    the kubelet's directory onto it (``bind`` with no ``--dirs``: the defaults include it, v1.46.0 and later)."""
    if not isinstance(commands, dict):
        return False
    steps = [step for entry in commands.values() if isinstance(entry, dict)
             for step in entry.get("commands") or [] if isinstance(step, list)]
    init = any(step[:3] == ["apiclient", "ephemeral-storage", "init"] for step in steps)
    binds = [step[3:] for step in steps if step[:3] == ["apiclient", "ephemeral-storage", "bind"]]
    return init and any("--dirs" not in rest or _KUBELET_DIR in rest for rest in binds)


def parse_windows(text: str) -> Bootstrap:
    """`<powershell> ... Start-EKSBootstrap.ps1 -EKSClusterName 'c' -KubeletExtraArgs '...' </powershell>`."""
    match = re.search(r"<powershell>(.*?)</powershell>", text, re.IGNORECASE | re.DOTALL)
    if not match:
        raise UserDataError("Windows user data has no <powershell>...</powershell> block")
    script = match.group(1)
    if "Start-EKSBootstrap.ps1" not in script and "$EKSBootstrapScriptFile" not in script:
        raise UserDataError("the PowerShell never runs Start-EKSBootstrap.ps1, so the kubelet never joins")
    for line in _join_continuations(script.replace("`\n", " \\\n")).splitlines():
        if "-EKSClusterName" not in line:
            continue
        try:
            words = shlex.split(line, posix=True)
        except ValueError as exc:
            raise UserDataError(f"the Start-EKSBootstrap.ps1 line cannot be split into arguments ({exc})") from None
        lowered = [w.lower() for w in words]
        cluster = _ps_arg(words, lowered, "-eksclustername")
        if not cluster:
            raise UserDataError("Start-EKSBootstrap.ps1 is called without -EKSClusterName")
        boot = Bootstrap(cluster=cluster, os="windows", family="Windows")
        extra = _ps_arg(words, lowered, "-kubeletextraargs")
        if extra:
            _apply_kubelet_flags(boot, _split(extra, "-KubeletExtraArgs"))
        return boot
    raise UserDataError("Start-EKSBootstrap.ps1 is never given -EKSClusterName")


def _ps_arg(words: list[str], lowered: list[str], name: str) -> str | None:
    if name in lowered:
        index = lowered.index(name)
        if index + 1 < len(words):
            return words[index + 1]
    return None
