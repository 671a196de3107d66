"""PodDisruptionBudgets and DaemonSets typed once where the world is read (#29.1): a malformed one is named
and left out, never stops the read, and the disruption guard only ever sees typed budgets."""

from __future__ import annotations

import pytest

from nodescale.disruption.decisions import Blocker, Hold
from nodescale.disruption.guards import pdb_blocks
from nodescale.model.pdb import PdbError, PodDisruptionBudget, read_pdbs
from nodescale.scheduling.workloads import read_daemonsets
from tests.builders import pod


def _pdb(name: str = "web", ns: str | None = "default", selector: object = None, allowed: object = 0) -> dict:
    meta = {"name": name} | ({"namespace": ns} if ns else {})
    spec = {} if selector is None else {"selector": selector}
    return {"metadata": meta, "spec": spec, "status": {"disruptionsAllowed": allowed}}


WEB = {"matchLabels": {"app": "web"}}


def test_a_budget_at_zero_blocks_the_pods_it_selects_in_its_namespace_only() -> None:
    """#29.1: the guard's rule, now on typed budgets: namespace, selector and disruptionsAllowed <= 0."""
    at_zero = PodDisruptionBudget.from_dict(_pdb(selector=WEB))
    web, other, elsewhere = pod("w", labels={"app": "web"}), pod("o", labels={"app": "x"}), pod(
        "e", labels={"app": "web"}, ns="prod")
    assert pdb_blocks([other, web], [at_zero]) == Hold(
        Blocker.PDB, "pod default/w is protected by PodDisruptionBudget default/web (0 disruptions allowed)")
    assert pdb_blocks([other, elsewhere], [at_zero]) is None
    assert pdb_blocks([web], [PodDisruptionBudget.from_dict(_pdb(selector=WEB, allowed=1))]) is None
    assert pdb_blocks([web], [PodDisruptionBudget.from_dict(_pdb(selector=WEB, allowed=None))]) is None


def test_no_selector_protects_nothing_and_an_empty_one_everything() -> None:
    """#29.1: policy/v1 semantics kept from the raw-dict guard; a missing namespace means default."""
    web = pod("w", labels={"app": "web"})
    assert pdb_blocks([web], [PodDisruptionBudget.from_dict(_pdb(ns=None))]) is None
    assert pdb_blocks([web], [PodDisruptionBudget.from_dict(_pdb(ns=None, selector={}))]) is not None


@pytest.mark.parametrize(("raw", "says"), [
    (_pdb(selector={"matchExpressions": [{"key": "app", "operator": "Near", "values": ["x"]}]}),
     "PodDisruptionBudget default/web: spec.selector"),
    (_pdb(selector=WEB, allowed="zero"), "PodDisruptionBudget default/web: status.disruptionsAllowed"),
    (_pdb(selector="app=web"), "PodDisruptionBudget default/web: spec.selector: expected a mapping"),
    ({"metadata": {}, "spec": {}}, "metadata.name"),
    ({"metadata": {"name": "x", "namespace": "default"}, "spec": [1]}, "PodDisruptionBudget default/x: spec"),
    ("not a pdb", "expected a mapping"),
])
def test_a_malformed_budget_is_named_and_left_out_and_the_others_are_read(raw: object, says: str) -> None:
    """#29.1: before, a bad selector or a non-integer disruptionsAllowed raised out of the disruption pass."""
    with pytest.raises(PdbError) as err:
        PodDisruptionBudget.from_dict(raw)  # type: ignore[arg-type]
    assert says in str(err.value)
    good, errors = read_pdbs([raw, _pdb("ok", selector=WEB)])  # type: ignore[list-item]
    assert [p.key for p in good] == ["default/ok"] and len(errors) == 1 and says in errors[0]


def _ds(name: str, spec: object) -> dict:
    return {"metadata": {"name": name, "namespace": "kube-system"}, "spec": spec}


def test_daemonsets_are_typed_with_their_template_pod_and_a_bad_one_is_named_and_left_out() -> None:
    """#29.1: one template pod per DaemonSet, owned by it; a DaemonSet without containers, with a bad quantity,
    without a name or that is not an object is reported by name and the rest are read."""
    good = _ds("agent", {"template": {"spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "100m"}}}]}}})
    no_containers = _ds("empty", {"template": {"spec": {}}})
    bad_quantity = _ds("bad", {"template": {"spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "x"}}}]}}})
    nameless = {"metadata": {"namespace": "kube-system"}, "spec": {}}
    daemonsets, errors = read_daemonsets([no_containers, good, bad_quantity, nameless, "junk"])  # type: ignore[list-item]
    [agent] = daemonsets
    assert agent.key == "kube-system/agent" and agent.pod.name == "agent-daemon" and agent.pod.is_daemon
    assert agent.pod.requests["cpu"] == 100
    assert len(errors) == 4
    assert errors[0].startswith("DaemonSet kube-system/empty: spec.template.spec.containers")
    assert errors[1].startswith("DaemonSet kube-system/bad: spec.template.spec")
    assert errors[2].startswith("DaemonSet kube-system/: metadata.name")
    assert errors[3].startswith("DaemonSet default/: expected a mapping")
