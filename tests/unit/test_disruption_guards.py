"""The voluntary-disruption guards answer with a typed Hold (the kind of guard and its message), #29.3."""

from __future__ import annotations

from nodescale.disruption import zonalshift
from nodescale.disruption.budgets import Tally
from nodescale.disruption.decisions import Blocker, Hold
from nodescale.disruption.guards import node_blocks, pdb_blocks, pod_blocks
from nodescale.model.pdb import PodDisruptionBudget
from tests.builders import NOW, node, pod, pool

PDB_AT_ZERO = PodDisruptionBudget.from_dict({"metadata": {"name": "web", "namespace": "default"},
                                            "spec": {"selector": {"matchLabels": {"app": "web"}}},
                                            "status": {"disruptionsAllowed": 0}})


def test_do_not_disrupt_holds_are_typed_with_their_message():
    """#29.3: a guard returns a Hold whose kind the refusal reports, not a bare string."""
    held = pod("job", {"karpenter.sh/do-not-disrupt": "true"})
    assert pod_blocks(held, NOW) == Hold(Blocker.DO_NOT_DISRUPT, "pod default/job has karpenter.sh/do-not-disrupt")
    on_node = node("n1", annotations={"karpenter.sh/do-not-disrupt": "true"})
    assert node_blocks(on_node, NOW) == Hold(Blocker.DO_NOT_DISRUPT, "node n1 has karpenter.sh/do-not-disrupt")
    assert node_blocks(node("n2", [pod("free")]), NOW) is None


def test_a_pdb_at_zero_holds_with_the_pdb_kind():
    """#29.3: the PDB guard says it is a PDB hold, so the caller needs no separate kind."""
    hold = pdb_blocks([pod("w", labels={"app": "web"})], [PDB_AT_ZERO])
    assert hold is not None and hold.kind is Blocker.PDB
    assert str(hold) == "pod default/w is protected by PodDisruptionBudget default/web (0 disruptions allowed)"
    assert pdb_blocks([pod("other", labels={"app": "db"})], [PDB_AT_ZERO]) is None


def test_zonal_shift_and_one_at_a_time_holds_carry_their_kind():
    """#29.3: zonalshift.held and Tally.wait_turn return a Hold of their own kind."""
    in_a = node("n1", labels={"topology.kubernetes.io/zone": "us-east-1a"})
    assert zonalshift.held(in_a, pool(), {"us-east-1b"}) is None
    shifted = zonalshift.held(in_a, pool(), {"us-east-1a"})
    assert shifted is not None and shifted.kind is Blocker.ZONAL_SHIFT
    assert "us-east-1a is under an ARC zonal shift" in shifted.why
    old = pool("legacy", api="karpenter.sh/v1alpha5", one_at_a_time=True)
    tally = Tally(NOW, {"legacy": old}, [node("a", nodepool="legacy"), node("b", nodepool="legacy")], frozenset())
    assert tally.wait_turn("legacy") is None
    tally.take("legacy")
    turn = tally.wait_turn("legacy")
    assert turn is not None and turn.kind is Blocker.ONE_AT_A_TIME and "one at a time" in turn.why
