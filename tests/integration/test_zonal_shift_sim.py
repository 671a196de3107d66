"""ARC zonal shifts on `sim/`: the events replayed to the interruption function (as the functions' own IAM
identity), then the provisioner's launches keep out of the shifted zone until the shift ends.

Restates Karpenter's Zonal Shift RFC, technical requirement 1 ("stop provisioning capacity in the impaired
AZ", done by marking the zone's offerings unavailable), and what the "ARC zonal shift support for EKS Auto
Mode and Karpenter" post says a user sees: no new nodes in that zone while the shift lasts, normal
operation once it is canceled. sim's account maps us-east-1a to use1-az6 and us-east-1c to use1-az2, so a
zone name mistaken for an id would show.
"""

from __future__ import annotations

import json
import time
import uuid
from datetime import timedelta
from typing import Any

import pytest

from nodescale import clock
from nodescale.commands import status as status_cmd
from nodescale.interruption.intents import ShiftKind
from nodescale.k8s.raw import request_json
from nodescale.runtime import Runtime
from nodescale.usecases import status
from nodescale.usecases.disrupt import run as disrupting
from nodescale.usecases.interrupt import entry
from nodescale.usecases.interrupt.summary import EventSummary
from nodescale.usecases.provision import provisioner as provisioning
from sim.environment import Environment
from tests.integration import helpers
from tests.integration.helpers import ROOT, pods, put_pool, wait_for

pytestmark = pytest.mark.integration

EVENTS = ROOT / "tests" / "fixtures" / "events"
ACCOUNT = "123456789012"
ZONE_A, ZONE_C = ("us-east-1a", "use1-az6"), ("us-east-1c", "use1-az2")

env = helpers.environment_fixture("zonal-shift")
sim = helpers.emptied_environment_fixture(node_timeout=30)
rt = helpers.runtime_fixture()
ns = helpers.namespace_fixture()

POOL = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: zonal
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a, us-east-1c]}
""" + helpers.DEMO_NODECLASS


class Events:
    """The fixture samples re-aimed at a zone, with fresh ids and increasing times from the sim's clock."""

    def __init__(self, sim: Environment) -> None:
        self.start = clock.parse_timestamp(sim.clock()["now"])
        self.n = 0

    def __call__(self, sample: str, zone_id: str) -> dict[str, Any]:
        event = json.loads((EVENTS / sample).read_text())
        self.n += 1
        event["id"] = str(uuid.uuid4())
        event["time"] = clock.format_timestamp(self.start + timedelta(seconds=self.n))
        event["detail"]["metadata"]["awayFrom"] = zone_id
        return event


def replay(rt: Runtime, event: dict[str, Any]) -> EventSummary:
    summary = entry.process(event, rt.settings, lambda: rt, account=ACCOUNT, deadline_monotonic=time.monotonic() + 30)
    assert isinstance(summary, EventSummary), summary
    return summary


def deploy(sim: Environment, ns: str, replicas: int) -> None:
    """`replicas` pods of one CPU each: one m5.large (2 vCPU) takes one."""
    body = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": ns},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "public.ecr.aws/eks-distro/kubernetes/pause:3.9",
                                                       "resources": {"requests": {"cpu": "1200m"}}}]}}},
    }
    api = sim.kube_api_client()
    try:
        request_json(api, "POST", f"/apis/apps/v1/namespaces/{ns}/deployments", body=body)
    except Exception:  # noqa: BLE001 - it exists: scale it
        request_json(api, "PATCH", f"/apis/apps/v1/namespaces/{ns}/deployments/web",
                     body={"spec": {"replicas": replicas}}, content_type="application/merge-patch+json")


def pending(sim: Environment, ns: str) -> list[dict]:
    return [p for p in pods(sim, ns) if not p["spec"].get("nodeName")]


def zones(summary: dict[str, Any]) -> list[str]:
    return [launch.zone for launch in summary.launches]


def test_launches_keep_out_of_a_shifted_zone_until_the_shift_ends(sim: Environment, rt: Runtime, ns: str) -> None:
    put_pool(sim, POOL, "zonal")
    events = Events(sim)

    # Both of the pool's zones shifted: an autoshift away from us-east-1a (AWS's observer notification, no
    # resources) and an operator's manual shift of this cluster away from us-east-1c.
    autoshift = replay(rt, events("zonal-autoshift-in-progress.json", ZONE_A[1]))
    assert autoshift.zonal_shift is not None and autoshift.zonal_shift.zone == ZONE_A[0]
    assert autoshift.zonal_shift.recorded
    manual = replay(rt, events("zonal-manual-shift-started.json", ZONE_C[1]))
    assert manual.zonal_shift is not None and manual.zonal_shift.zone == ZONE_C[0]
    assert manual.zonal_shift.kind == ShiftKind.MANUAL

    # `nodescale status` shows both, by zone name.
    shown = status.read_status(rt).to_dict()["zonalShifts"]
    assert [(z["zone"], z["zoneId"], z["kinds"]) for z in shown] == [
        (ZONE_C[0], ZONE_C[1], ["manual"]), (ZONE_A[0], ZONE_A[1], ["autoshift"])]
    assert "us-east-1c  use1-az2  manual" in status_cmd.to_text(status.read_status(rt).to_dict())

    deploy(sim, ns, 1)
    wait_for("a pending pod", lambda: len(pending(sim, ns)) == 1)
    held = provisioning.provision_once(rt)
    assert held.launches == [], "every zone the pool allows is shifted away from"
    assert len(pending(sim, ns)) == 1

    # A broken event is logged and dropped: it changes nothing.
    broken = events("zonal-manual-shift-canceled.json", ZONE_C[1])
    broken["detail"]["metadata"]["awayFrom"] = ZONE_C[0]  # a zone name where ARC gives an id
    assert "detail.metadata.awayFrom" in (replay(rt, broken).ignored or "")
    assert provisioning.provision_once(rt).launches == []

    # The manual shift is canceled: us-east-1c takes the launch, us-east-1a (still autoshifted) does not.
    replay(rt, events("zonal-manual-shift-canceled.json", ZONE_C[1]))
    assert zones(provisioning.provision_once(rt)) == [ZONE_C[0]]
    wait_for("the pod to be placed", lambda: not pending(sim, ns), timeout=60)

    # Now the other way round: the autoshift completes and the operator shifts us-east-1c again.
    replay(rt, events("zonal-autoshift-completed.json", ZONE_A[1]))
    replay(rt, events("zonal-manual-shift-started.json", ZONE_C[1]))
    assert [z["zone"] for z in status.read_status(rt).to_dict()["zonalShifts"]] == [ZONE_C[0]]
    deploy(sim, ns, 3)
    wait_for("two pending pods", lambda: len(pending(sim, ns)) == 2)
    assert zones(provisioning.provision_once(rt)) == [ZONE_A[0], ZONE_A[0]]


def test_a_pool_that_opts_in_has_its_node_in_the_shifted_zone_replaced_elsewhere(
    sim: Environment, rt: Runtime, ns: str
) -> None:
    """With ``nodescale.io/zonal-shift: replace`` in its template, a pool's node in a shifted zone is drifted
    (ZonalShift) and replaced outside the zone (without it the node stays: see test_disruption_zonal_shift)."""
    put_pool(sim, POOL.replace("  template:\n", "  template:\n    metadata:\n      annotations: "
                                                "{nodescale.io/zonal-shift: replace}\n", 1), "zonal")
    events = Events(sim)
    replay(rt, events("zonal-autoshift-in-progress.json", ZONE_A[1]))  # so that the first node lands in 1c
    deploy(sim, ns, 1)
    wait_for("a pending pod", lambda: len(pending(sim, ns)) == 1)
    assert zones(provisioning.provision_once(rt)) == [ZONE_C[0]]
    wait_for("the pod to run", lambda: not pending(sim, ns) and helpers.managed_nodes(sim), timeout=60)
    (node,) = helpers.managed_nodes(sim)
    assert disrupting.disrupt_once(rt)["decisions"] == [], "its own zone is not shifted"

    replay(rt, events("zonal-autoshift-completed.json", ZONE_A[1]))
    replay(rt, events("zonal-manual-shift-started.json", ZONE_C[1]))
    moved = disrupting.disrupt_once(rt)
    (decision,) = moved["decisions"]
    assert decision["nodes"] == [node["metadata"]["name"]]
    assert (decision["reason"], decision["drift"], decision["action"]) == ("Drifted", "ZonalShift", "replace")
    (replacement,) = decision["replacementInstances"]
    placed = sim.boto3_client("ec2").describe_instances(InstanceIds=[replacement])["Reservations"][0]["Instances"][0]
    assert placed["Placement"]["AvailabilityZone"] == ZONE_A[0], "the replacement is outside the shifted zone"
