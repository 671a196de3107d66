"""Feeds the continuous checkers while a chaos run goes on: Kubernetes watch streams and an EC2 poll.

Pods, Nodes and PodDisruptionBudgets are followed with watch streams (every change, in the API
server's order, resumed from the last resourceVersion when a stream breaks, so injected faults only
delay the checks). EC2 is polled every `poll_seconds` straight from moto, past the fault proxy: the
checks must see the account as it is, not as a faulted call would show it.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import boto3

from sim.aws.constants import DUMMY_CREDENTIALS, KUBE_ADMIN_TOKEN, REGION

from .checkers import DisruptionChecker, ForeignChecker, InstanceRecord, LimitsChecker, Violation

log = logging.getLogger("sim.chaos.watcher")

WATCH_TIMEOUT_SECONDS = 20
COLLECTIONS = {
    "pods": "/api/v1/pods",
    "nodes": "/api/v1/nodes",
    "pdbs": "/apis/policy/v1/poddisruptionbudgets",
}


def describe_all(ec2: Any) -> dict[str, InstanceRecord]:
    """Every instance in the account, any state."""
    out: dict[str, InstanceRecord] = {}
    for page in ec2.get_paginator("describe_instances").paginate():
        for reservation in page["Reservations"]:
            for inst in reservation["Instances"]:
                out[inst["InstanceId"]] = InstanceRecord(
                    instance_id=inst["InstanceId"],
                    state=inst["State"]["Name"],
                    instance_type=inst.get("InstanceType", ""),
                    zone=(inst.get("Placement") or {}).get("AvailabilityZone", ""),
                    tags={t["Key"]: t["Value"] for t in inst.get("Tags") or []},
                    capacity_type="spot" if inst.get("InstanceLifecycle") == "spot" else "on-demand",
                )
    return out


def moto_ec2(moto_url: str) -> Any:
    return boto3.client("ec2", endpoint_url=moto_url, region_name=REGION, **DUMMY_CREDENTIALS)


class Watcher:
    def __init__(
        self,
        kube_url: str,
        moto_url: str,
        disruption: DisruptionChecker,
        foreign: ForeignChecker,
        limits: LimitsChecker,
        poll_seconds: float = 0.25,
        started: float | None = None,
        token: str = KUBE_ADMIN_TOKEN,
    ) -> None:
        self.kube_url = kube_url.rstrip("/")
        self.ec2 = moto_ec2(moto_url)
        self.disruption = disruption
        self.foreign = foreign
        self.limits = limits
        self.poll_seconds = poll_seconds
        self.started = started if started is not None else time.monotonic()
        self.token = token
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._ready = {name: threading.Event() for name in COLLECTIONS}
        self.instances: dict[str, InstanceRecord] = {}
        self.polls = 0
        self.events = 0
        self.stream_restarts = 0
        self.relists = 0

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    @property
    def violations(self) -> list[Violation]:
        return [*self.disruption.violations, *self.foreign.violations, *self.limits.violations]

    def start(self) -> Watcher:
        # PDBs first, then nodes, then pods: a pod's budget and node are known before its changes.
        for name in ("pdbs", "nodes", "pods"):
            thread = threading.Thread(target=self._follow, args=(name,), name=f"chaos-watch-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)
            if not self._ready[name].wait(30):
                raise RuntimeError(f"the chaos watcher could not list {name} within 30s")
        thread = threading.Thread(target=self._poll_ec2, name="chaos-poll-ec2", daemon=True)
        thread.start()
        self._threads.append(thread)
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=WATCH_TIMEOUT_SECONDS + 5)

    # ---------------------------------------------------------------------------------------- streams
    def _request(self, path: str, timeout: float) -> Any:
        request = urllib.request.Request(self.kube_url + path, headers={"Authorization": f"Bearer {self.token}"})
        return urllib.request.urlopen(request, timeout=timeout)  # noqa: S310 - the sim's loopback URL

    def _dispatch(self, name: str, kind: str, obj: dict[str, Any]) -> None:
        at = self.elapsed()
        self.events += 1
        if name == "pods":
            self.disruption.pod_event(kind, obj, at)
        elif name == "nodes":
            self.disruption.node_event(kind, obj)
            self.foreign.node_event(kind, obj, at)
        else:
            self.disruption.pdb_event(kind, obj)

    def _list(self, name: str) -> str:
        while not self._stop.is_set():
            try:
                with self._request(COLLECTIONS[name], timeout=30) as response:
                    body = json.loads(response.read())
            except (OSError, ValueError, urllib.error.URLError):
                self._stop.wait(0.2)  # an injected fault: the next try is as good
                continue
            for item in body.get("items") or []:
                self._dispatch(name, "ADDED", item)
            return str((body.get("metadata") or {}).get("resourceVersion") or "")
        return ""

    def _follow(self, name: str) -> None:
        version = self._list(name)
        self._ready[name].set()
        while not self._stop.is_set():
            path = f"{COLLECTIONS[name]}?watch=1&resourceVersion={version}&timeoutSeconds={WATCH_TIMEOUT_SECONDS}"
            try:
                with self._request(path, timeout=WATCH_TIMEOUT_SECONDS + 10) as response:
                    for line in response:
                        if not line.strip():
                            continue
                        event = json.loads(line)
                        obj = event.get("object") or {}
                        if event.get("type") == "ERROR":
                            if obj.get("code") == 410:
                                self.relists += 1
                                version = self._list(name)
                            break
                        version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                        if event.get("type") != "BOOKMARK":
                            self._dispatch(name, event["type"], obj)
                        if self._stop.is_set():
                            return
            except urllib.error.HTTPError as exc:
                if exc.code == 410:
                    self.relists += 1
                    version = self._list(name)
                self.stream_restarts += 1
                self._stop.wait(0.1)
            except (OSError, ValueError):
                self.stream_restarts += 1
                self._stop.wait(0.1)

    # ------------------------------------------------------------------------------------------ EC2
    def _poll_ec2(self) -> None:
        while not self._stop.is_set():
            self.poll_once()
            self._stop.wait(self.poll_seconds)

    def poll_once(self) -> None:
        try:
            seen = describe_all(self.ec2)
        except Exception:  # moto busy for a moment: the next poll sees the same account
            log.debug("EC2 poll failed", exc_info=True)
            return
        self.instances = seen
        self.polls += 1
        at = self.elapsed()
        self.foreign.instances_seen(seen, at)
        self.limits.instances_seen(seen, at)

    def wait_until(self, check: Callable[[], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if check():
                return True
            time.sleep(0.1)
        return check()
