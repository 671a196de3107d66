"""The node simulation: EC2 instances of this cluster join the Kubernetes API the way real nodes do.

Every `poll_interval` real seconds the kubelet lists the instances tagged
`nodescale.io/cluster=<cluster>` in moto. A running instance registers a Node built only from what
its launch gave it: the user data (cluster, labels, taints, max pods), the image (OS, Windows
build), the instance type (capacity), its zone and private DNS name. The Node registers NotReady
with the `node.kubernetes.io/not-ready:NoSchedule` taint and turns Ready after `ready_delay`
simulated seconds. A stopping or terminating instance's Node goes NotReady; a terminated one's Node
is deleted. Instances whose user data cannot bootstrap this cluster never join; `status()` says why.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

import boto3

from nodescale.aws.branchinterfaces import branch_interfaces
from sim.aws.amis import windows_build
from sim.aws.constants import DUMMY_CREDENTIALS, OWNERSHIP_TAG
from sim.nodes.capacity import node_resources
from sim.nodes.csinode import csinode_for, ebs_attach_limit
from sim.nodes.userdata import Bootstrap, UserDataError, decode, parse

log = logging.getLogger("sim.kubelet")

NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
UNREACHABLE_TAINTS = [
    {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"},
]
GONE_STATES = ("stopping", "stopped", "shutting-down", "terminated")
FOREIGN_RECHECK_SECONDS = 5.0
MAX_BACKOFF_SECONDS = 2.0
JOIN_CHUNK = 200
JOIN_PER_POLL = 400
_ARCH = {"x86_64": "amd64", "arm64": "arm64", "i386": "386"}


@dataclass
class Member:
    """One instance the kubelet has seen: joined (with its Node) or rejected (with the reason)."""

    instance_id: str
    phase: str  # registered | ready | not-ready | deleted | rejected | gone
    node_name: str = ""
    reason: str = ""
    registered_at: float = 0.0  # simulated seconds (Clock.elapsed) at registration


class Kubelet:
    """Polls moto's EC2 and keeps one Node per running instance of the cluster."""

    def __init__(
        self,
        store: Any,
        clock: Any,
        ec2_endpoint: str,
        cluster: str,
        region: str = "us-east-1",
        ready_delay: float = 2.0,
        poll_interval: float = 0.5,
        kubernetes_version: str = "1.31",
    ) -> None:
        self.store = store
        self.clock = clock
        self.cluster = cluster
        self.region = region
        self.ready_delay = ready_delay
        self.poll_interval = poll_interval
        self.kubernetes_version = kubernetes_version
        self._ec2 = boto3.client("ec2", endpoint_url=ec2_endpoint, region_name=region, **DUMMY_CREDENTIALS)
        self._moto_url = ec2_endpoint.rstrip("/")
        self._members: dict[str, Member] = {}
        self._types: dict[str, dict[str, Any]] = {}
        self._images: dict[str, dict[str, Any] | None] = {}
        self._zone_ids: dict[str, str] = {}
        self._instance_templates: dict[str, tuple[str, str]] = {}
        self._foreign: dict[str, float] = {}  # instance id -> when to look at its tags again
        self._template_roots: dict[tuple[str, str], int | None] = {}
        self._lock = threading.Lock()
        self.polls = 0  # passes completed: a caller that changed instances waits for two to see them applied
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # lifecycle -----------------------------------------------------------------------------------
    def start(self) -> Kubelet:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="sim-kubelet", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.poll_once()
                self.polls += 1
            except Exception:  # keep simulating: a transient moto/store error must not kill the nodes
                log.exception("kubelet poll failed")
            # With thousands of instances a poll costs real CPU, shared with the API server: back off,
            # but by no more than a couple of seconds, or nodes join in bursts minutes apart.
            self._stop.wait(max(self.poll_interval, min(time.monotonic() - started, MAX_BACKOFF_SECONDS)))

    def status(self) -> dict[str, Any]:
        """What joined and what did not (and why), for tests and `python -m sim status`:
        `nodes` (node -> instance, Nodes this kubelet registered and that still exist),
        `rejected` (instance -> why it never joined), `other_nodes` (Nodes in the API that no
        instance registered: someone created them directly), `untagged_instances` (running
        instances without this cluster's ownership tag, which never join)."""
        with self._lock:
            members = [asdict(m) for m in self._members.values()]
            untagged = sorted(self._foreign)
        live = {m["node_name"]: m["instance_id"] for m in members if m["phase"] in ("registered", "ready", "not-ready")}
        registered = {m["node_name"] for m in members if m["node_name"]}
        other = sorted(n["metadata"]["name"] for n in self.store.list("v1/nodes") if n["metadata"]["name"] not in registered)
        return {
            "cluster": self.cluster,
            "ready_delay": self.ready_delay,
            "nodes": live,
            "members": members,
            "rejected": {m["instance_id"]: m["reason"] for m in members if m["phase"] == "rejected"},
            "other_nodes": other,
            "untagged_instances": untagged,
            "polls": self.polls,
        }

    # one pass --------------------------------------------------------------------------------------
    def poll_once(self) -> None:
        # Instance states are cheap to list (describe_instances of thousands is not): details are
        # fetched only for instances not seen before.
        states = self._states()
        now = time.monotonic()
        new = [
            instance_id for instance_id, state in states.items()
            if state == "running" and instance_id not in self._members
            and self._foreign.get(instance_id, 0.0) <= now
        ]
        if new:
            # Bounded per pass: the nodes that joined last pass turn Ready in this one's steps instead
            # of waiting for every instance of a thousand-node launch to be described first.
            self._join(new[:JOIN_PER_POLL], now)
        for instance_id, member in list(self._members.items()):
            if member.phase not in ("deleted", "gone"):
                self._step(member, states.get(instance_id, "terminated"))

    def _join(self, instance_ids: list[str], now: float) -> None:
        # A chunk at a time, so the first nodes of a big launch join while the rest are still described.
        templates_read = False
        for start in range(0, len(instance_ids), JOIN_CHUNK):
            ours = self._ours(instance_ids[start : start + JOIN_CHUNK], now)
            if not ours:
                continue
            if not templates_read:
                self._refresh_launch_templates()
                templates_read = True
            user_data = self._user_data([i["InstanceId"] for i in ours])
            with ThreadPoolExecutor(max_workers=4, thread_name_prefix="sim-kubelet-join") as pool:
                list(pool.map(self._register, ours, [user_data.get(i["InstanceId"]) for i in ours]))

    def _ours(self, instance_ids: list[str], now: float) -> list[dict[str, Any]]:
        ours: list[dict[str, Any]] = []
        described = self._ec2.describe_instances(InstanceIds=instance_ids)
        for reservation in described["Reservations"]:
            for instance in reservation["Instances"]:
                if (instance.get("State") or {}).get("Name") != "running":
                    continue  # ended since the states were listed: no kubelet is left to register it
                tags = {t["Key"]: t["Value"] for t in instance.get("Tags") or []}
                if tags.get(OWNERSHIP_TAG) == self.cluster:
                    ours.append(instance)
                else:
                    # Not this cluster's (yet): look again later in case the tag is added after launch.
                    self._foreign[instance["InstanceId"]] = now + FOREIGN_RECHECK_SECONDS
        return ours

    def _step(self, member: Member, state: str) -> None:
        if member.phase in ("registered", "ready") and state in GONE_STATES:
            self._mark_unreachable(member)
        if member.phase in ("registered", "ready", "not-ready") and state == "terminated":
            self._delete_node(member)
        if member.phase == "rejected" and state == "terminated":
            self._set_phase(member, "gone")
        if member.phase == "registered" and self.clock.elapsed() >= member.registered_at + self.ready_delay:
            self._mark_ready(member)
        if member.phase == "not-ready" and state == "running":
            self._mark_ready(member)  # a stopped instance was started again: its kubelet reports back

    def _states(self) -> dict[str, str]:
        """Every instance's state (DescribeInstanceStatus with IncludeAllInstances, read from moto's side)."""
        request = urllib.request.Request(
            f"{self._moto_url}/sim/v1/instance-states",
            data=json.dumps({"region": self.region}).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            return dict(json.loads(response.read())["states"])

    def _set_phase(self, member: Member, phase: str, reason: str = "") -> None:
        with self._lock:
            member.phase = phase
            if reason:
                member.reason = reason

    # joining ------------------------------------------------------------------------------------------
    def _user_data(self, instance_ids: list[str]) -> dict[str, str | None]:
        """Each instance's user data as its metadata service serves it to the bootstrap (not through
        the EC2 API, whose DescribeInstanceAttribute a real node never calls)."""
        request = urllib.request.Request(
            f"{self._moto_url}/sim/v1/instance-user-data",
            data=json.dumps({"region": self.region, "instanceIds": instance_ids}).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read())["userData"]

    def _register(self, instance: dict[str, Any], user_data: str | None) -> None:
        instance_id = instance["InstanceId"]
        try:
            node = self._node_for(instance, user_data)
        except UserDataError as exc:
            self._reject(instance_id, str(exc))
            return
        try:
            stored = self.store.create("v1/nodes", node)
        except Exception as exc:  # an ApiError such as AlreadyExists: the instance cannot claim the name
            self._reject(instance_id, f"registering node {node['metadata']['name']} failed: {exc}")
            return
        self._register_csinode(instance, stored)
        member = Member(
            instance_id=instance_id,
            phase="registered",
            node_name=node["metadata"]["name"],
            registered_at=self.clock.elapsed(),
        )
        with self._lock:
            self._members[instance_id] = member
        log.info("node %s registered for %s", member.node_name, instance_id)
        if self.ready_delay <= 0:
            self._mark_ready(member)

    def _register_csinode(self, instance: dict[str, Any], node: dict[str, Any]) -> None:
        """The EBS CSI driver's registration on the new node (#31.2): its CSINode, owned by the Node."""
        # An EBS-backed instance maps its root volume too (moto names it /dev/sda1 whatever the image's root device).
        extra = max(0, len(instance.get("BlockDeviceMappings") or []) - 1)
        limit = ebs_attach_limit(self._instance_type(instance["InstanceType"]),
                                 max(1, len(instance.get("NetworkInterfaces") or [])), extra)
        try:
            self.store.create("storage.k8s.io/v1/csinodes", csinode_for(node, instance["InstanceId"], limit))
        except Exception as exc:  # left over from a Node of the same name: the scheduler then sees no limit
            log.warning("csinode %s not registered: %s", node["metadata"]["name"], exc)

    def _reject(self, instance_id: str, reason: str) -> None:
        log.warning("instance %s never joins cluster %s: %s", instance_id, self.cluster, reason)
        with self._lock:
            self._members[instance_id] = Member(instance_id=instance_id, phase="rejected", reason=reason)

    def _node_for(self, instance: dict[str, Any], user_data: str | None) -> dict[str, Any]:
        boot = parse(decode(user_data))
        if boot.cluster != self.cluster:
            raise UserDataError(f"the user data bootstraps cluster {boot.cluster!r}, not {self.cluster!r}")
        image = self._image(instance.get("ImageId", ""))
        windows = self._check_image(image, boot)
        itype = self._instance_type(instance["InstanceType"])
        resources = node_resources(
            itype,
            boot.max_pods,
            self._root_volume_gib(instance, image),
            windows,
            branch_interfaces(instance["InstanceType"]),
            boot.instance_store_raid0,
        )

        name = instance.get("PrivateDnsName") or f"ip-{instance.get('PrivateIpAddress', '').replace('.', '-')}.ec2.internal"
        zone = instance["Placement"]["AvailabilityZone"]
        arch = _ARCH.get((image or {}).get("Architecture") or _type_arch(itype), "amd64")
        os_name = "windows" if windows else "linux"
        labels = {
            **boot.labels,
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": os_name,
            "kubernetes.io/arch": arch,
            "beta.kubernetes.io/os": os_name,
            "beta.kubernetes.io/arch": arch,
            "node.kubernetes.io/instance-type": instance["InstanceType"],
            "beta.kubernetes.io/instance-type": instance["InstanceType"],
            "topology.kubernetes.io/zone": zone,
            "failure-domain.beta.kubernetes.io/zone": zone,
            # The EBS CSI driver's node plugin (an EKS add-on) registers its topology key, and kubelet labels the
            # node with it: the node affinity of every volume that driver provisions requires it.
            "topology.ebs.csi.aws.com/zone": zone,
            "topology.kubernetes.io/region": self.region,
            "failure-domain.beta.kubernetes.io/region": self.region,
        }
        zone_id = self._zone_id(zone)
        if zone_id:
            labels["topology.k8s.aws/zone-id"] = zone_id
        if windows:
            build = windows_build((image or {}).get("Name", ""))
            if build:
                labels["node.kubernetes.io/windows-build"] = build
        now = self.clock.timestamp()
        taints = [dict(t) for t in boot.taints if t["key"] != NOT_READY_TAINT["key"]]
        taints.append({**NOT_READY_TAINT, "timeAdded": now})
        ip = instance.get("PrivateIpAddress", "")
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": labels,
                "annotations": {
                    "node.alpha.kubernetes.io/ttl": "0",
                    "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                    "alpha.kubernetes.io/provided-node-ip": ip,
                },
            },
            "spec": {"providerID": f"aws:///{zone}/{instance['InstanceId']}", "taints": taints},
            "status": {
                "capacity": resources.capacity,
                "allocatable": resources.allocatable,
                "conditions": _conditions(now, ready=False),
                "addresses": [
                    {"type": "InternalIP", "address": ip},
                    {"type": "InternalDNS", "address": name},
                    {"type": "Hostname", "address": name},
                ],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "nodeInfo": self._node_info(instance, image, arch, os_name),
            },
        }

    def _check_image(self, image: dict[str, Any] | None, boot: Bootstrap) -> bool:
        """True for Windows. An EKS image only runs its own bootstrap format; a custom image runs any."""
        name = (image or {}).get("Name") or ""
        windows = (image or {}).get("Platform") == "windows" or boot.os == "windows"
        expected = _image_family(name)
        if expected and boot.family and expected != boot.family:
            raise UserDataError(
                f"image {name} ({expected}) does not run {boot.family} user data, so its kubelet never starts"
            )
        if (image or {}).get("Platform") == "windows" and boot.os != "windows":
            raise UserDataError(f"Windows image {name} ignores Linux user data")
        return windows

    def _node_info(self, instance: dict[str, Any], image: dict[str, Any] | None, arch: str, os_name: str) -> dict[str, str]:
        name = (image or {}).get("Name") or ""
        family = _image_family(name)
        os_image = {
            "AL2": "Amazon Linux 2",
            "AL2023": "Amazon Linux 2023.6.20241031",
            "Bottlerocket": "Bottlerocket OS 1.26.2 (aws-k8s-" + self.kubernetes_version + ")",
            "Windows": "Windows Server 2022 Datacenter" if "2022" in name else "Windows Server 2019 Datacenter",
        }.get(family, "Linux")
        system_uuid = "ec2" + uuid.uuid5(uuid.NAMESPACE_URL, instance["InstanceId"]).hex[3:]
        return {
            "architecture": arch,
            "operatingSystem": os_name,
            "osImage": os_image,
            "kernelVersion": "10.0.20348.2849" if os_name == "windows" else "5.10.227-219.884.amzn2.x86_64",
            "containerRuntimeVersion": "containerd://1.7.23",
            "kubeletVersion": f"v{self.kubernetes_version}.2-eks-94953ac",
            "kubeProxyVersion": f"v{self.kubernetes_version}.2-eks-94953ac",
            "machineID": uuid.uuid5(uuid.NAMESPACE_DNS, instance["InstanceId"]).hex,
            "systemUUID": system_uuid,
            "bootID": str(uuid.uuid5(uuid.NAMESPACE_OID, instance["InstanceId"])),
        }

    # lookups (cached: types, images and zones do not change while an environment runs) -----------------
    def _instance_type(self, name: str) -> dict[str, Any]:
        if name not in self._types:
            found = self._ec2.describe_instance_types(InstanceTypes=[name])["InstanceTypes"]
            if not found:
                raise UserDataError(f"instance type {name} is unknown to EC2")
            self._types[name] = found[0]
        return self._types[name]

    def _image(self, image_id: str) -> dict[str, Any] | None:
        if image_id and image_id not in self._images:
            try:
                images = self._ec2.describe_images(ImageIds=[image_id])["Images"]
            except Exception:  # moto raises InvalidAMIID.NotFound; a custom image is allowed
                images = []
            self._images[image_id] = images[0] if images else None
        return self._images.get(image_id)

    def _zone_id(self, zone: str) -> str:
        if not self._zone_ids:
            for z in self._ec2.describe_availability_zones()["AvailabilityZones"]:
                self._zone_ids[z["ZoneName"]] = z.get("ZoneId", "")
        return self._zone_ids.get(zone, "")

    def _root_volume_gib(self, instance: dict[str, Any], image: dict[str, Any] | None) -> int | None:
        """The root volume size the launch template asked for (moto gives every instance 8 GiB)."""
        template = self._launch_template_of(instance["InstanceId"])
        if template is None:
            return None
        if template not in self._template_roots:
            template_id, version = template
            try:
                versions = self._ec2.describe_launch_template_versions(
                    LaunchTemplateId=template_id, Versions=[version]
                )["LaunchTemplateVersions"]
            except Exception:  # the template may be gone already; the AMI default applies then
                versions = []
            mappings = (versions[0].get("LaunchTemplateData") or {}).get("BlockDeviceMappings") if versions else None
            root_device = (image or {}).get("RootDeviceName") or "/dev/xvda"
            if _image_family((image or {}).get("Name") or "") == "Bottlerocket":
                root_device = "/dev/xvdb"  # Bottlerocket keeps pods' ephemeral storage on its data volume
            sizes = [
                m["Ebs"]["VolumeSize"] for m in mappings or []
                if m.get("Ebs", {}).get("VolumeSize") and m.get("DeviceName") == root_device
            ]
            self._template_roots[template] = int(sizes[0]) if sizes else None
        return self._template_roots[template]

    def _launch_template_of(self, instance_id: str) -> tuple[str, str] | None:
        return self._instance_templates.get(instance_id)

    def _refresh_launch_templates(self) -> None:
        """Which launch template (and version) each fleet instance came from, once per batch of joins."""
        for page in self._ec2.get_paginator("describe_fleets").paginate():
            for fleet in page["Fleets"]:
                for launched in fleet.get("Instances") or []:
                    spec = (launched.get("LaunchTemplateAndOverrides") or {}).get("LaunchTemplateSpecification") or {}
                    if spec.get("LaunchTemplateId"):
                        for launched_id in launched.get("InstanceIds") or []:
                            self._instance_templates[launched_id] = (
                                spec["LaunchTemplateId"], str(spec.get("Version") or "$Default")
                            )

    # transitions -----------------------------------------------------------------------------------------
    def _mark_ready(self, member: Member) -> None:
        now = self.clock.timestamp()
        if not self._update_node(member, lambda node: _set_ready(node, now, True), status=True):
            return
        gone = {NOT_READY_TAINT["key"], UNREACHABLE_TAINTS[0]["key"]}
        self._update_node(
            member, lambda node: _set_taints(node, [t for t in node["spec"].get("taints") or [] if t["key"] not in gone])
        )
        self._set_phase(member, "ready")
        log.info("node %s is Ready", member.node_name)

    def _mark_unreachable(self, member: Member) -> None:
        now = self.clock.timestamp()
        self._update_node(member, lambda node: _set_ready(node, now, None), status=True)

        def taint(node: dict[str, Any]) -> None:
            taints = [t for t in node["spec"].get("taints") or [] if t["key"] != NOT_READY_TAINT["key"]]
            present = {(t["key"], t["effect"]) for t in taints}
            taints += [{**t, "timeAdded": now} for t in UNREACHABLE_TAINTS if (t["key"], t["effect"]) not in present]
            _set_taints(node, taints)

        self._update_node(member, taint)
        self._set_phase(member, "not-ready")

    def _delete_node(self, member: Member) -> None:
        try:
            self.store.delete("v1/nodes", member.node_name)
        except Exception as exc:
            if getattr(exc, "status", None) != 404:
                raise
        self._set_phase(member, "deleted")
        log.info("node %s deleted: instance %s terminated", member.node_name, member.instance_id)

    def _update_node(self, member: Member, change: Any, status: bool = False) -> bool:
        """Apply `change` to the current Node atomically; False when the Node is gone."""
        stored = self.store.modify(
            "v1/nodes", member.node_name, None, change, subresource="status" if status else None
        )
        if stored is None:
            self._set_phase(member, "deleted")
            return False
        return True


def _type_arch(itype: dict[str, Any]) -> str:
    archs = (itype.get("ProcessorInfo") or {}).get("SupportedArchitectures") or ["x86_64"]
    return "arm64" if "arm64" in archs else archs[0]


def _image_family(name: str) -> str:
    if name.startswith("amazon-eks-node-al2023") or name.startswith("amazon-eks-al2023"):
        return "AL2023"
    if name.startswith("amazon-eks-"):
        return "AL2"
    if name.startswith("bottlerocket-"):
        return "Bottlerocket"
    if name.startswith("Windows_Server-") and "EKS_Optimized" in name:
        return "Windows"
    return ""


def _conditions(now: str, ready: bool | None) -> list[dict[str, str]]:
    conditions = [
        {"type": kind, "status": "False", "reason": f"KubeletHas{reason}", "message": message,
         "lastHeartbeatTime": now, "lastTransitionTime": now}
        for kind, reason, message in (
            ("MemoryPressure", "SufficientMemory", "kubelet has sufficient memory available"),
            ("DiskPressure", "NoDiskPressure", "kubelet has no disk pressure"),
            ("PIDPressure", "SufficientPID", "kubelet has sufficient PID available"),
        )
    ]
    conditions.append(_ready_condition(now, ready))
    return conditions


def _ready_condition(now: str, ready: bool | None) -> dict[str, str]:
    if ready is True:
        status, reason, message = "True", "KubeletReady", "kubelet is posting ready status"
    elif ready is False:
        status, reason = "False", "KubeletNotReady"
        message = "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady"
    else:
        status, reason, message = "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status."
    return {"type": "Ready", "status": status, "reason": reason, "message": message,
            "lastHeartbeatTime": now, "lastTransitionTime": now}


def _set_ready(node: dict[str, Any], now: str, ready: bool | None) -> None:
    status = node.setdefault("status", {})
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != "Ready"]
    conditions.append(_ready_condition(now, ready))
    if ready is None:
        for cond in conditions:
            if cond["type"] != "Ready":
                cond.update(status="Unknown", reason="NodeStatusUnknown",
                            message="Kubelet stopped posting node status.", lastTransitionTime=now)
    elif ready:
        fresh = {c["type"]: c for c in _conditions(now, True)}
        conditions = [fresh[c["type"]] if c.get("status") == "Unknown" and c["type"] in fresh else c for c in conditions]
    status["conditions"] = conditions


def _set_taints(node: dict[str, Any], taints: list[dict[str, Any]]) -> None:
    node.setdefault("spec", {})["taints"] = taints
