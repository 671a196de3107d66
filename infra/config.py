"""What a deployer chooses with `-c key=value`, read once and checked, with errors that name the key."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infra.names import physical_name, stack_name
from nodescale.config.documents import read_documents
from nodescale.config.loader import config_kinds, validate
from nodescale.config.strict import misspelled_kind
from nodescale.model.featuregates import FeatureGateError, FeatureGates, parse_feature_gates
from nodescale.settings import SettingsError
from nodescale.usecases.provision.cluster_budget import parse_limits

CONTEXT_KEYS = (
    "clusterName",
    "nodePoolSources",
    "nodePoolFiles",
    "windows",
    "nodeRoleArn",
    "instanceProfileName",
    "nodeRoles",
    "nodePoolParameterKey",
    "ebsKmsKey",
    "vpcSubnetIds",
    "vpcSecurityGroupIds",
    "clusterLimits",
    "pricePerHourAlarm",
    "pendingPodAlarmSeconds",
    "alarmTopicArn",
    "alarmEmail",
    "retainNodesOnDestroy",
    "applyRbac",
    "logRetentionDays",
    "logLevel",
    "functionMemory",
    "functionTimeout",
    "featureGates",
)

_CLUSTER_NAME = re.compile(r"^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$")
_PARAMETER_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
_ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+$")
_ROLE_NAME = re.compile(r"^[\w+=,.@-]{1,64}$")  # IAM's RoleName
# A KMS key's ARN (IAM authorizes a key's use on it, never on an alias), and a key id alone.
_KEY_ID = r"(?:mrk-[0-9a-f]{32}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"
_KEY_ARN = re.compile(rf"^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{{12}}:key/{_KEY_ID}$")
_BARE_KEY_ID = re.compile(rf"^{_KEY_ID}$")
_KEY_EXAMPLE = "arn:<partition>:kms:<region>:<account>:key/<key id>"
_TOPIC_ARN = re.compile(r"^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[\w-]{1,256}$")
_SUBNET = re.compile(r"^subnet-[0-9a-f]{8,17}$")
_SECURITY_GROUP = re.compile(r"^sg-[0-9a-f]{8,17}$")
_SOURCES = ("ssm", "cluster")
_LIMIT_KEYS = ("cpu", "memory", "nodes", "pricePerHour")
_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
# The retention periods CloudWatch Logs accepts.
_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557,
                   2922, 3288, 3653)
# The kinds the functions read from an SSM parameter (NodeOverlays and CapacityBuffers too), as the layer says.
_NODEPOOL_KINDS = config_kinds()
_SSM_ADVANCED_LIMIT = 8192
# The functions whose memory and timeout a deployer may set (infra/function_specs.FUNCTION_SPECS' names;
# tests/cdk checks the two agree), and Lambda's bounds for them. The handlers keep a margin of up to
# 30 s before their timeout, so less than a minute would leave them no time to work.
SIZED_FUNCTIONS = ("provisioner", "interruption", "disruption", "cleanup")
_MEMORY_MB = (128, 10240)
_TIMEOUT_SECONDS = (60, 900)


class ConfigError(ValueError):
    """A context value nodescale cannot deploy with; the message names the key and what is allowed."""


@dataclass(frozen=True)
class NodePoolFile:
    """One NodePool file given at deploy time, written to one SSM parameter."""

    path: Path
    parameter_name: str  # the last path segment, under the stack's NodePool path
    text: str
    windows: bool
    # What its node classes run nodes as: (kind, node class name, role name or ARN), and the node classes
    # that name an instance profile instead: (kind, node class name, profile name).
    node_roles: tuple[tuple[str, str, str], ...] = ()
    instance_profiles: tuple[tuple[str, str, str], ...] = ()
    # The KMS keys its node classes' blockDeviceMappings[].ebs.kmsKeyID name: (kind, node class name, key ARN
    # or key id).
    volume_keys: tuple[tuple[str, str, str], ...] = ()


@dataclass(frozen=True)
class StackConfig:
    cluster_name: str
    nodepool_sources: tuple[str, ...] = ("ssm",)
    nodepool_files: tuple[NodePoolFile, ...] = ()
    windows: bool = False
    node_role_arn: str | None = None
    instance_profile_name: str | None = None
    # -c nodeRoles: node roles (names or ARNs) of node classes the NodePool files do not show: those read
    # from the cluster's custom resources, and the roles held by instance profiles node classes name.
    node_roles: tuple[str, ...] = ()
    # -c nodePoolParameterKey: the customer-managed keys of SecureString NodePool parameters (kms:Decrypt
    # through SSM); -c ebsKmsKey: the keys of encrypted volumes node classes do not name (the account's
    # default EBS key), which the launching functions use through EC2.
    nodepool_parameter_keys: tuple[str, ...] = ()
    ebs_kms_keys: tuple[str, ...] = ()
    vpc_subnet_ids: tuple[str, ...] = ()
    vpc_security_group_ids: tuple[str, ...] = ()
    cluster_limits: dict[str, str] = field(default_factory=dict)
    price_per_hour_alarm: float | None = None
    pending_pod_alarm_seconds: int = 600
    alarm_topic_arn: str | None = None
    alarm_email: str | None = None
    retain_nodes_on_destroy: bool = False
    apply_rbac: bool = False  # the stack applies infra/manifests/rbac.yaml itself (infra/rbac.py)
    log_retention_days: int = 30
    log_level: str = "INFO"
    # Per function, overriding infra/functions.py's measured defaults: memory in MB, timeout in seconds.
    function_memory: dict[str, int] = field(default_factory=dict)
    function_timeout: dict[str, int] = field(default_factory=dict)
    # -c featureGates: Karpenter's FEATURE_GATES string (and nodescale's Repack), passed to the functions.
    feature_gates: FeatureGates = field(default_factory=FeatureGates)

    @property
    def stack_name(self) -> str:
        return stack_name(self.cluster_name)

    @property
    def nodepool_parameter_path(self) -> str:
        return f"/nodescale/{self.cluster_name}/nodepools/"

    @property
    def windows_nodes(self) -> bool:
        """Windows nodes need their own role: EKS allows one access entry per IAM principal."""
        return self.windows or any(f.windows for f in self.nodepool_files)

    @property
    def named_node_roles(self) -> tuple[str, ...]:
        """Every node role (name or ARN) the NodePool files' node classes name, then -c nodeRoles', once each:
        the roles the launching functions may pass to EC2 beside the stack's own."""
        named = [role for f in self.nodepool_files for _, _, role in f.node_roles]
        return tuple(dict.fromkeys([*named, *self.node_roles]))

    @property
    def volume_keys(self) -> tuple[str, ...]:
        """Every KMS key (ARN, or key id in this account and region) that launched volumes are encrypted with:
        the NodePool files' node classes' kmsKeyID, then -c ebsKmsKey's, once each."""
        named = [key for f in self.nodepool_files for _, _, key in f.volume_keys]
        return tuple(dict.fromkeys([*named, *self.ebs_kms_keys]))

    @property
    def in_vpc(self) -> bool:
        return bool(self.vpc_subnet_ids)

    @classmethod
    def from_context(cls, get: Callable[[str], Any], base_dir: Path | None = None) -> StackConfig:
        """Read the configuration through `get` (e.g. `app.node.try_get_context`); relative files from base_dir."""
        base_dir = base_dir or Path.cwd()
        cluster = _cluster_name(get("clusterName"))
        sources = _list(get("nodePoolSources")) or ["ssm"]
        bad_sources = [s for s in sources if s not in _SOURCES]
        if bad_sources or len(set(sources)) != len(sources):
            raise ConfigError(f"nodePoolSources={','.join(sources)!r}: allowed are ssm, cluster or ssm,cluster")
        files = tuple(_nodepool_file(base_dir / p) for p in _list(get("nodePoolFiles")))
        names = [f.parameter_name for f in files]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ConfigError(f"nodePoolFiles: two files map to the same SSM parameter name {duplicates}: rename one")
        _check_nodepools(files)
        node_role_arn = _text(get("nodeRoleArn")) or None
        if node_role_arn and not _ROLE_ARN.match(node_role_arn):
            raise ConfigError(f"nodeRoleArn={node_role_arn!r}: expected arn:<partition>:iam::<account>:role/<name>")
        profile = _text(get("instanceProfileName")) or None
        if profile and not node_role_arn:
            raise ConfigError("instanceProfileName is set without nodeRoleArn: give the role the profile holds too")
        node_roles = tuple(_list(get("nodeRoles")))
        for role in node_roles:
            why = _unpassable(role, cluster)
            if why:
                raise ConfigError(f"nodeRoles: {role!r} {why}")
        _check_node_identities(files, cluster, node_roles, profile)
        parameter_keys = _key_arns(get("nodePoolParameterKey"), "nodePoolParameterKey")
        ebs_keys = _key_arns(get("ebsKmsKey"), "ebsKmsKey")
        subnets = tuple(_list(get("vpcSubnetIds")))
        groups = tuple(_list(get("vpcSecurityGroupIds")))
        _check_ids("vpcSubnetIds", subnets, _SUBNET, "subnet-0123456789abcdef0")
        _check_ids("vpcSecurityGroupIds", groups, _SECURITY_GROUP, "sg-0123456789abcdef0")
        if bool(subnets) != bool(groups):
            raise ConfigError("vpcSubnetIds and vpcSecurityGroupIds go together: give both or neither")
        topic = _text(get("alarmTopicArn")) or None
        if topic and not _TOPIC_ARN.match(topic):
            raise ConfigError(f"alarmTopicArn={topic!r}: expected arn:<partition>:sns:<region>:<account>:<topic>")
        email = _text(get("alarmEmail")) or None
        if email and "@" not in email:
            raise ConfigError(f"alarmEmail={email!r}: expected an e-mail address")
        retention = _integer(get("logRetentionDays"), "logRetentionDays", 30)
        if retention not in _RETENTION_DAYS:
            raise ConfigError(f"logRetentionDays={retention}: allowed are {', '.join(map(str, _RETENTION_DAYS))}")
        level = (_text(get("logLevel")) or "INFO").upper()
        if level not in _LOG_LEVELS:
            raise ConfigError(f"logLevel={level!r}: allowed are {', '.join(_LOG_LEVELS)}")
        pending = _integer(get("pendingPodAlarmSeconds"), "pendingPodAlarmSeconds", 600)
        if pending < 60:
            raise ConfigError(f"pendingPodAlarmSeconds={pending}: allowed is 60 or more")
        return cls(
            cluster_name=cluster,
            nodepool_sources=tuple(sources),
            nodepool_files=files,
            windows=_flag(get("windows"), "windows"),
            node_role_arn=node_role_arn,
            instance_profile_name=profile,
            node_roles=node_roles,
            nodepool_parameter_keys=parameter_keys,
            ebs_kms_keys=ebs_keys,
            vpc_subnet_ids=subnets,
            vpc_security_group_ids=groups,
            cluster_limits=_cluster_limits(get("clusterLimits")),
            price_per_hour_alarm=_price(get("pricePerHourAlarm")),
            pending_pod_alarm_seconds=pending,
            alarm_topic_arn=topic,
            alarm_email=email,
            retain_nodes_on_destroy=_flag(get("retainNodesOnDestroy"), "retainNodesOnDestroy"),
            apply_rbac=_flag(get("applyRbac"), "applyRbac"),
            log_retention_days=retention,
            log_level=level,
            function_memory=_function_sizes(get("functionMemory"), "functionMemory", _MEMORY_MB, "MB"),
            function_timeout=_function_sizes(get("functionTimeout"), "functionTimeout", _TIMEOUT_SECONDS, "seconds"),
            feature_gates=_feature_gates(get("featureGates")),
        )


def _cluster_name(value: Any) -> str:
    cluster = _text(value)
    if not cluster:
        raise ConfigError("clusterName is not set: deploy with `-c clusterName=<your EKS cluster name>`")
    if not _CLUSTER_NAME.match(cluster):
        raise ConfigError(
            f"clusterName={cluster!r}: an EKS cluster name is 1-100 letters, digits, '-' or '_', "
            "starting with a letter or digit"
        )
    return cluster


def _text(value: Any) -> str:
    return "" if value is None else str(value).strip()


def _list(value: Any) -> list[str]:
    """A list from context: `a,b` on the command line, or a JSON list in cdk.json."""
    if value is None:
        return []
    items = value if isinstance(value, list | tuple) else str(value).split(",")
    return [str(item).strip() for item in items if str(item).strip()]


def _flag(value: Any, key: str) -> bool:
    if value is None or isinstance(value, bool):
        return bool(value)
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no", ""):
        return False
    raise ConfigError(f"{key}={value!r}: allowed are true or false")


def _integer(value: Any, key: str, default: int) -> int:
    if value is None or _text(value) == "":
        return default
    try:
        return int(str(value).strip())
    except ValueError:
        raise ConfigError(f"{key}={value!r}: allowed is a whole number") from None


def _feature_gates(value: Any) -> FeatureGates:
    """`-c featureGates=NodeRepair=true,...` (or a JSON object of gate -> bool in cdk.json), read as the functions
    read FEATURE_GATES."""
    if isinstance(value, dict):
        value = ",".join(f"{name}={str(flag).lower() if isinstance(flag, bool) else flag}" for name, flag in value.items())
    try:
        return parse_feature_gates(_text(value))
    except FeatureGateError as exc:
        raise ConfigError(str(exc)) from None


def _price(value: Any) -> float | None:
    if value is None or _text(value) == "":
        return None
    try:
        price = float(str(value).strip())
    except ValueError:
        raise ConfigError(f"pricePerHourAlarm={value!r}: allowed is a price per hour in the region's currency "
                          "(USD; CNY in cn-* regions), e.g. 25") from None
    if price <= 0:
        raise ConfigError(f"pricePerHourAlarm={value!r}: allowed is a price above 0")
    return price


def _cluster_limits(value: Any) -> dict[str, str]:
    """The limits as the functions read NODESCALE_CLUSTER_LIMITS: a JSON object of cpu, memory, nodes and
    pricePerHour, each an amount of 0 or more (the functions' own parse_limits decides)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return {}
    parsed = value
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"clusterLimits is not JSON ({exc.msg}): expected e.g. '{{\"cpu\":\"2000\",\"pricePerHour\":\"50\"}}'"
            ) from None
    if not isinstance(parsed, dict):
        raise ConfigError(f"clusterLimits={value!r}: expected a JSON object with keys among {', '.join(_LIMIT_KEYS)}")
    unknown = sorted(k for k in parsed if k not in _LIMIT_KEYS)
    if unknown:
        raise ConfigError(f"clusterLimits: unknown keys {unknown}: allowed are {', '.join(_LIMIT_KEYS)}")
    limits = {k: str(v) for k, v in parsed.items()}
    try:
        parse_limits(limits)
    except SettingsError as exc:
        # The functions' message names their variable; at deploy time the user wrote clusterLimits.
        raise ConfigError("clusterLimits: " + str(exc).split(": ", 1)[-1]) from None
    return limits


def _function_sizes(value: Any, key: str, bounds: tuple[int, int], unit: str) -> dict[str, int]:
    """Per-function sizes: `-c functionMemory=provisioner=2048,disruption=3008` on the command line, or a
    JSON object ({"provisioner": 2048}) in cdk.json or as the value."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return {}
    example = f"-c {key}=provisioner={bounds[1] // 4 if unit == 'MB' else 300}"
    pairs: list[tuple[str, Any]]
    if isinstance(value, dict):
        pairs = list(value.items())
    elif isinstance(value, str) and value.strip().startswith("{"):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{key} is not JSON ({exc.msg}): expected e.g. {example}") from None
        if not isinstance(parsed, dict):
            raise ConfigError(f"{key}={value!r}: expected a JSON object, e.g. {example}")
        pairs = list(parsed.items())
    else:
        pairs = []
        for item in _list(value):
            name, sep, amount = item.partition("=")
            if not sep:
                raise ConfigError(f"{key}={value!r}: expected function=amount pairs separated by commas, "
                                  f"e.g. {example}")
            pairs.append((name.strip(), amount.strip()))
    out: dict[str, int] = {}
    for name, amount in pairs:
        if name not in SIZED_FUNCTIONS:
            raise ConfigError(f"{key}: unknown function {name!r}: allowed are {', '.join(SIZED_FUNCTIONS)}")
        text = str(amount).strip()
        if isinstance(amount, bool) or not text.isdigit() or not bounds[0] <= int(text) <= bounds[1]:
            raise ConfigError(f"{key}: {name}={amount!r}: allowed is a whole number of {unit} from "
                              f"{bounds[0]} to {bounds[1]}")
        out[name] = int(text)
    return out


def _check_ids(key: str, ids: tuple[str, ...], pattern: re.Pattern[str], example: str) -> None:
    bad = [i for i in ids if not pattern.match(i)]
    if bad:
        raise ConfigError(f"{key}: {bad} do not look like ids such as {example}")


def _nodepool_file(path: Path) -> NodePoolFile:
    if not path.is_file():
        raise ConfigError(f"nodePoolFiles: {path} does not exist or is not a file")
    text = path.read_text(encoding="utf-8")
    if len(text.encode()) > _SSM_ADVANCED_LIMIT:
        raise ConfigError(f"nodePoolFiles: {path} is over {_SSM_ADVANCED_LIMIT} bytes, the largest SSM parameter: split it")
    documents = [doc for _, doc in _parse(path, text)]
    if not documents:
        raise ConfigError(f"nodePoolFiles: {path} holds no YAML document")
    for index, doc in enumerate(documents):
        kind = doc.get("kind")
        if kind not in _NODEPOOL_KINDS:
            meant = misspelled_kind(kind)
            hint = f"; did you mean {meant}?" if meant else ""
            raise ConfigError(
                f"nodePoolFiles: {path} document {index} has kind {kind!r}{hint}: allowed are {', '.join(_NODEPOOL_KINDS)}"
            )
    name = path.stem
    if not _PARAMETER_NAME.match(name):
        raise ConfigError(f"nodePoolFiles: {path.name}: the file name (without extension) becomes the SSM "
                          "parameter name and may hold only letters, digits, '.', '-' and '_'")
    return NodePoolFile(path=path, parameter_name=name, text=text, windows=_mentions_windows(documents),
                        node_roles=_identities(documents, "role"),
                        instance_profiles=_identities(documents, "instanceProfile"),
                        volume_keys=_volume_keys(path, documents))


def _key_arns(value: Any, key: str) -> tuple[str, ...]:
    """KMS key ARNs from context (one, or a list); an alias or a bare key id is refused, naming the key."""
    keys = tuple(dict.fromkeys(_list(value)))
    for arn in keys:
        if not _KEY_ARN.match(arn):
            raise ConfigError(f"{key}: {arn!r} is not a KMS key ARN ({_KEY_EXAMPLE}): IAM grants a key's use on "
                              "its key ARN, so an alias or a bare key id cannot be granted")
    return keys


def _volume_keys(path: Path, documents: list[Any]) -> tuple[tuple[str, str, str], ...]:
    """(kind, name, key) of each KMS key a node class's blockDeviceMappings[].ebs.kmsKeyID names; an alias is
    refused at synth: the launching functions need a grant on the key itself, which an alias does not name."""
    out = []
    for doc in documents:
        if doc.get("kind") not in ("EC2NodeClass", "AWSNodeTemplate"):
            continue
        name = str((doc.get("metadata") or {}).get("name", ""))
        for index, mapping in enumerate((doc.get("spec") or {}).get("blockDeviceMappings") or []):
            key = ((mapping or {}).get("ebs") or {}).get("kmsKeyID") if isinstance(mapping, dict) else None
            if key is None:
                continue
            key = str(key).strip()
            if not (_KEY_ARN.match(key) or _BARE_KEY_ID.match(key)):
                raise ConfigError(
                    f"nodePoolFiles: {path}: {doc.get('kind')} {name}: blockDeviceMappings[{index}].ebs.kmsKeyID "
                    f"{key!r} is not a KMS key ARN ({_KEY_EXAMPLE}) or key id: the launching functions are granted "
                    "the key's use on its ARN, which an alias does not name"
                )
            out.append((str(doc.get("kind")), name, key))
    return tuple(out)


def _identities(documents: list[Any], key: str) -> tuple[tuple[str, str, str], ...]:
    """(kind, name, value) of each node class whose spec names ``key`` (role or instanceProfile)."""
    out = []
    for doc in documents:
        if doc.get("kind") not in ("EC2NodeClass", "AWSNodeTemplate"):
            continue
        value = (doc.get("spec") or {}).get(key)
        if value is not None:
            out.append((str(doc.get("kind")), str((doc.get("metadata") or {}).get("name", "")), str(value)))
    return tuple(out)


def _unpassable(role: str, cluster: str) -> str:
    """Why the stack will not let the functions pass ``role`` to EC2, or "" when it will."""
    if not (_ROLE_NAME.match(role) or _ROLE_ARN.match(role)):
        return "is not an IAM role name (1-64 letters, digits and +=,.@_-) or role ARN (arn:<partition>:iam::<account>:role/<name>)"
    name = role.rsplit("/", 1)[-1]
    functions = {physical_name(cluster, f) for f in SIZED_FUNCTIONS} | {physical_name(cluster, "rbac")}
    if name in functions:
        # A node running as a function's role would hold that function's EC2 and Kubernetes rights.
        return "is a nodescale function's role: nodes need a node role (the stack's, or Karpenter's KarpenterNodeRole-<cluster>)"
    return ""


def _check_node_identities(files: tuple[NodePoolFile, ...], cluster: str, node_roles: tuple[str, ...],
                           profile: str | None) -> None:
    """Refuse a node class whose nodes the functions could not launch: a role the stack will not pass, or an
    instance profile other than the stack's without -c nodeRoles (the stack cannot know which role a profile
    holds, and iam:PassRole is checked on that role)."""
    own_profiles = {physical_name(cluster, "node", 128), physical_name(cluster, "windows-node", 128), profile}
    for f in files:
        for kind, name, role in f.node_roles:
            why = _unpassable(role, cluster)
            if why:
                raise ConfigError(f"nodePoolFiles: {f.path}: {kind} {name}: role {role!r} {why}")
        for kind, name, instance_profile in f.instance_profiles:
            if instance_profile not in own_profiles and not node_roles:
                raise ConfigError(
                    f"nodePoolFiles: {f.path}: {kind} {name}: instanceProfile {instance_profile!r} is not the "
                    "stack's, and the stack passes only the node roles it knows: give the role that profile holds "
                    "with -c nodeRoles=<role name>"
                )


def _parse(path: Path, text: str) -> list[tuple[str, dict]]:
    """The file's documents as the functions parse the SSM parameter it becomes."""
    documents, errors = read_documents(text, str(path))
    if errors:  # every bad document of the file at once, as the functions would report them
        raise ConfigError("nodePoolFiles: " + "; ".join(str(e) for e in errors))
    return documents


def _check_nodepools(files: tuple[NodePoolFile, ...]) -> None:
    """Refuse at synth what the functions would refuse at run time (the layer's own validator: unknown
    fields, missing names, bad values, a name defined twice), all problems on one line. A reference to a
    node class is not followed: the class may live in another parameter or in the cluster."""
    documents = [d for f in files for d in _parse(f.path, f.text)]
    errors = validate(documents)
    if errors:
        raise ConfigError("nodePoolFiles: " + "; ".join(str(e) for e in errors))


def _mentions_windows(documents: list[Any]) -> bool:
    """A NodePool asking for kubernetes.io/os=windows, or a node class with a Windows AMI family or alias."""
    for doc in documents:
        if doc.get("kind") not in ("NodePool", "Provisioner", "EC2NodeClass", "AWSNodeTemplate"):
            continue  # a NodeOverlay for Windows types changes prices, it asks for no Windows node
        spec = doc.get("spec") or {}
        family = str(spec.get("amiFamily", ""))
        aliases = [str(term.get("alias", "")) for term in spec.get("amiSelectorTerms") or [] if isinstance(term, dict)]
        if family.lower().startswith("windows") or any(a.lower().startswith("windows") for a in aliases):
            return True
        template_spec = (spec.get("template") or {}).get("spec") or {}
        for requirement in list(spec.get("requirements") or []) + list(template_spec.get("requirements") or []):
            if isinstance(requirement, dict) and requirement.get("key") == "kubernetes.io/os" \
                    and requirement.get("operator") == "In" and "windows" in (requirement.get("values") or []):
                return True
    return False
