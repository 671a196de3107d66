"""The Nominated event is read back as data (its ``related`` object), never parsed from its text, #29.3.

Pods' events are writable by anyone who may write events in the pod's namespace: a nomination that is
not well formed counts as none (the pod is planned as usual), and the message is never consulted.
"""

from __future__ import annotations

import pytest

from nodescale.model.pod import Pod
from nodescale.usecases.provision.launch import (
    NOMINATED,
    Launch,
    nominate,
    nominated_instance_of,
    nomination_message,
)

IID = "i-0123456789abcdef0"
POD = Pod.from_dict({"metadata": {"name": "p", "namespace": "team", "uid": "uid-p"},
                     "spec": {"containers": [{"name": "c"}]}})


def event(**changes: object) -> dict:
    base = {
        "reason": NOMINATED,
        "message": f"Pod should schedule on NodePool default: instance {IID} (m5.large, us-east-1a, spot) ...",
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": "team", "uid": "uid-p", "apiVersion": "v1"},
        "related": {"kind": "Instance", "name": IID, "apiVersion": "nodescale.io/v1"},
    }
    base.update(changes)
    return base


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def pod(self, namespace, name, reason, message, type_="Normal", uid="", related=None) -> str:
        self.calls.append((namespace, name, reason, message, type_, uid, related))
        return "created"


def test_nominate_writes_the_instance_as_the_related_object_and_keeps_its_text():
    launch = Launch("default", IID, "m5.large", "us-east-1a", "spot", 0.05, ["team/p"])
    recorder = Recorder()
    nominate(recorder, [POD], launch)  # type: ignore[arg-type]
    [(ns, name, reason, message, type_, uid, related)] = recorder.calls
    assert (ns, name, reason, type_, uid) == ("team", "p", NOMINATED, "Normal", "uid-p")
    assert message == nomination_message(launch) == (
        f"Pod should schedule on NodePool default: instance {IID} (m5.large, us-east-1a, spot) launched for it by nodescale")
    assert related.to_dict() == {"kind": "Instance", "name": IID, "apiVersion": "nodescale.io/v1"}
    assert nominated_instance_of({**event(), "related": related.to_dict()}, POD) == IID


def test_the_instance_is_read_from_related_whatever_the_message_says():
    assert nominated_instance_of(event(), POD) == IID
    assert nominated_instance_of(event(message="edited: instance i-0fffffffffffffff0"), POD) == IID
    assert nominated_instance_of(event(message=None), POD) == IID


@pytest.mark.parametrize("changes", [
    {"related": None},  # an event written before nominations were data, or the tenant dropped it
    {"related": "i-0123456789abcdef0"},
    {"related": {"kind": "Node", "name": IID, "apiVersion": "nodescale.io/v1"}},
    {"related": {"kind": "Instance", "name": IID, "apiVersion": "v1"}},
    {"related": {"kind": "Instance", "name": "i-0123456789abcdef0; rm -rf", "apiVersion": "nodescale.io/v1"}},
    {"related": {"kind": "Instance", "name": ["i-0123456789abcdef0"], "apiVersion": "nodescale.io/v1"}},
    {"related": {"kind": "Instance", "apiVersion": "nodescale.io/v1"}},
    {"reason": "FailedScheduling"},
    {"involvedObject": {"kind": "Pod", "name": "p", "namespace": "team", "uid": "uid-other"}},
    {"involvedObject": "team/p"},
])
def test_a_nomination_that_is_not_well_formed_counts_as_none(changes):
    assert nominated_instance_of(event(**changes), POD) is None


def test_a_launch_with_a_nodeclaim_nominates_as_karpenter_does():
    """#30.5: restates kubernetes-sigs/karpenter pkg/controllers/provisioning/scheduling/events.go
    NominatePodEvent: "Pod should schedule on: nodeclaim/NAME" (no node yet at launch), nodescale's detail after."""
    launch = Launch("default", IID, "m5.large", "us-east-1a", "spot", 0.05, ["team/p"], nodeclaim="default-x7k2p")
    recorder = Recorder()
    nominate(recorder, [POD], launch)  # type: ignore[arg-type]
    [(_, _, reason, message, type_, _, related)] = recorder.calls
    assert (reason, type_) == ("Nominated", "Normal")
    assert message == (f"Pod should schedule on: nodeclaim/default-x7k2p (NodePool default: instance {IID} "
                       "(m5.large, us-east-1a, spot) launched for it by nodescale)")
    assert nominated_instance_of({**event(), "related": related.to_dict()}, POD) == IID
