"""A burst of pending pods planned whole by the one-pass (poll) provisioner, on `sim/` (#32 Bursts).

The scheduler marks a burst's pods Unschedulable over a while; a pass that read them once, as soon as
it started, planned the first ones and left the rest to a later pass, which needs more nodes than
planning them together. The pass now waits, as the watch mode's batches do, until no pod has become
pending for a second (ten seconds at most).
"""

from __future__ import annotations

import threading
import time

import pytest

from nodescale.k8s.listing import is_provisionable
from nodescale.k8s.raw import request_json
from nodescale.runtime import Runtime
from nodescale.usecases.provision import provisioner as provisioning
from sim.environment import Environment
from tests.integration import helpers
from tests.integration.helpers import EXAMPLES, pods, put_pool, wait_for

pytestmark = pytest.mark.integration

env = helpers.environment_fixture("burst")
sim = helpers.emptied_environment_fixture(node_timeout=20)
rt = helpers.runtime_fixture()
ns = helpers.namespace_fixture()

# The burst: pods created this far apart, well inside the quiet second that closes a batch.
GAP_SECONDS = 0.5


def create(sim: Environment, ns: str, name: str) -> None:
    """A pod of half a CPU; sim's scheduler marks it Unschedulable, there being no node for it."""
    body = {"metadata": {"name": name, "namespace": ns},
            "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "500m"}}}]}}
    request_json(sim.kube_api_client(), "POST", f"/api/v1/namespaces/{ns}/pods", body=body)


def pending(sim: Environment, ns: str) -> list[dict]:
    return [p for p in pods(sim, ns) if is_provisionable(p)]


def test_a_burst_still_arriving_when_the_pass_starts_is_planned_in_that_pass(
    sim: Environment, rt: Runtime, ns: str
) -> None:
    """#32 Bursts: pods that become pending one every half second for four seconds after the pass started
    are planned with the two pending when it started, in the same pass (the old pass read the pods once,
    early, and left the later ones to the next pass); the next pass launches nothing."""
    put_pool(sim, (EXAMPLES / "karpenter-v1alpha5/default-spot.yaml").read_text(), "default-spot")
    for i in range(2):
        create(sim, ns, f"early-{i}")
    wait_for("the first pods pending", lambda: len(pending(sim, ns)) >= 2)

    def trickle() -> None:
        for i in range(8):
            time.sleep(GAP_SECONDS)
            create(sim, ns, f"late-{i}")

    arriving = threading.Thread(target=trickle)
    arriving.start()
    summary = provisioning.provision_once(rt)
    arriving.join()

    assert summary.pods_seen == 10
    assert sorted(p.split("/")[1] for x in summary.launches for p in x.pods) == sorted(
        [f"early-{i}" for i in range(2)] + [f"late-{i}" for i in range(8)])
    assert provisioning.provision_once(rt).launches == []
