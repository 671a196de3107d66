"""The requirements algebra: operators, intersections, compatibility and the messages people read."""

from __future__ import annotations

import pytest

from nodescale.model import labels as wk
from nodescale.model.requirements import Requirement, RequirementError, Requirements


def req(key: str, op: str, *values: str, min_values: int | None = None) -> Requirement:
    return Requirement.create(key, op, list(values), min_values)


def reqs(*items: Requirement) -> Requirements:
    return Requirements(items)


class TestOperators:
    def test_in_allows_only_its_values(self):
        r = req("team", "In", "a", "b")
        assert r.has("a") and r.has("b") and not r.has("c")
        assert r.operator == "In" and not r.is_empty()

    def test_notin_allows_everything_else(self):
        r = req("team", "NotIn", "a")
        assert not r.has("a") and r.has("b") and r.has("anything")
        assert r.operator == "NotIn"

    def test_exists_allows_any_value(self):
        r = req("team", "Exists")
        assert r.has("x") and r.operator == "Exists" and not r.is_empty()

    def test_does_not_exist_allows_no_value(self):
        r = req("team", "DoesNotExist")
        assert not r.has("x") and r.operator == "DoesNotExist" and r.is_empty()

    def test_gt_compares_as_integers(self):
        r = req(wk.INSTANCE_GENERATION, "Gt", "2")
        assert r.has("3") and r.has("10") and not r.has("2") and not r.has("1")
        assert not r.has("abc")  # a non-integer value is never greater
        assert r.operator == "Gt"

    def test_lt_compares_as_integers(self):
        r = req(wk.INSTANCE_CPU, "Lt", "16")
        assert r.has("8") and r.has("-1") and not r.has("16") and not r.has("32")
        assert r.operator == "Lt"

    @pytest.mark.parametrize(
        ("op", "values", "expected"),
        [
            ("In", [], "needs at least one value"),
            ("NotIn", [], "needs at least one value"),
            ("Exists", ["a"], "takes no values"),
            ("DoesNotExist", ["a"], "takes no values"),
            ("Gt", ["2.5"], "exactly one integer"),
            ("Gt", [" 2"], "exactly one integer"),
            ("Lt", ["1_000"], "exactly one integer"),
            ("Lt", ["1", "2"], "exactly one integer"),
            ("Like", ["a"], "unknown operator 'Like'; allowed are In, NotIn, Exists, DoesNotExist, Gt, Lt"),
        ],
    )
    def test_invalid_operands_are_rejected_with_the_rule(self, op, values, expected):
        with pytest.raises(RequirementError, match=expected.replace("(", r"\(")):
            Requirement.create("key", op, values)


class TestIntersections:
    def test_in_with_notin_removes_the_excluded_values(self):
        r = req("k", "In", "a", "b").intersect(req("k", "NotIn", "a"))
        assert r.operator == "In" and r.values == {"b"}

    def test_in_with_notin_of_all_of_them_is_impossible_not_absent(self):
        r = req("k", "In", "a").intersect(req("k", "NotIn", "a"))
        assert r.is_empty() and r.is_impossible()
        # Unlike DoesNotExist, a node without the label does not satisfy it either.
        assert not r.allows_absent and r.operator == "In"
        dne = req("k", "DoesNotExist")
        assert dne.is_empty() and not dne.is_impossible() and dne.allows_absent

    def test_absent_is_allowed_only_by_notin_and_does_not_exist(self):
        allowed = {op: req("k", op, *vals).allows_absent for op, vals in [
            ("In", ["a"]), ("NotIn", ["a"]), ("Exists", []), ("DoesNotExist", []), ("Gt", ["1"]), ("Lt", ["1"])
        ]}
        assert allowed == {"In": False, "NotIn": True, "Exists": False, "DoesNotExist": True, "Gt": False, "Lt": False}
        assert req("k", "NotIn", "a").intersect(req("k", "DoesNotExist")).allows_absent
        assert not req("k", "NotIn", "a").intersect(req("k", "Exists")).allows_absent

    def test_notin_with_exists_keeps_both_in_output(self):
        r = req("k", "NotIn", "a").intersect(req("k", "Exists"))
        assert r.to_node_selector_requirements() == [
            {"key": "k", "operator": "NotIn", "values": ["a"]},
            {"key": "k", "operator": "Exists"},
        ]

    def test_two_notins_exclude_both(self):
        r = req("k", "NotIn", "a").intersect(req("k", "NotIn", "b"))
        assert r.operator == "NotIn" and not r.has("a") and not r.has("b") and r.has("c")

    def test_in_with_in_keeps_the_common_values(self):
        assert req("k", "In", "a", "b").intersect(req("k", "In", "b", "c")).values == {"b"}
        assert req("k", "In", "a").intersect(req("k", "In", "c")).is_empty()

    def test_gt_with_lt_is_a_range(self):
        r = req("k", "Gt", "2").intersect(req("k", "Lt", "6"))
        assert [v for v in map(str, range(0, 9)) if r.has(v)] == ["3", "4", "5"]
        assert not r.is_empty()
        assert r.to_node_selector_requirements() == [
            {"key": "k", "operator": "Gt", "values": ["2"]},
            {"key": "k", "operator": "Lt", "values": ["6"]},
        ]
        assert str(r) == "k Gt [2] and k Lt [6]"

    def test_gt_with_lt_without_an_integer_between_is_empty(self):
        assert req("k", "Gt", "5").intersect(req("k", "Lt", "6")).is_empty()
        assert req("k", "Gt", "5").intersect(req("k", "Lt", "3")).is_empty()

    def test_range_whose_every_integer_is_excluded_is_empty(self):
        r = req("k", "Gt", "1").intersect(req("k", "Lt", "4")).intersect(req("k", "NotIn", "2", "3"))
        assert r.is_empty()
        r2 = req("k", "Gt", "1").intersect(req("k", "Lt", "5")).intersect(req("k", "NotIn", "2", "3"))
        assert not r2.is_empty() and r2.has("4")

    def test_in_with_gt_keeps_the_integers_above(self):
        r = req("k", "In", "1", "3", "x", "8").intersect(req("k", "Gt", "2"))
        assert r.values == {"3", "8"}

    def test_exists_with_does_not_exist_is_empty(self):
        assert req("k", "Exists").intersect(req("k", "DoesNotExist")).is_empty()

    def test_exists_with_in_is_the_in(self):
        assert req("k", "Exists").intersect(req("k", "In", "a")).values == {"a"}

    def test_intersection_is_symmetric(self):
        pairs = [
            (req("k", "In", "1", "2", "5"), req("k", "Gt", "1")),
            (req("k", "NotIn", "a"), req("k", "In", "a", "b")),
            (req("k", "Lt", "5"), req("k", "Gt", "1")),
            (req("k", "Exists"), req("k", "DoesNotExist")),
        ]
        for a, b in pairs:
            ab, ba = a.intersect(b), b.intersect(a)
            for v in ["a", "b", "0", "1", "2", "3", "4", "5", "6"]:
                assert ab.has(v) == ba.has(v) == (a.has(v) and b.has(v)), (a, b, v)

    def test_min_values_survive_intersection(self):
        r = req("k", "In", "a", "b", "c", min_values=2).intersect(req("k", "NotIn", "c"))
        assert r.min_values == 2 and r.values == {"a", "b"}

    def test_requirements_on_one_key_are_combined(self):
        rs = reqs(req("k", "In", "a", "b"), req("k", "NotIn", "a"))
        assert len(rs) == 1 and rs["k"].values == {"b"}
        assert rs.empty_keys() == []
        assert reqs(req("k", "In", "a"), req("k", "NotIn", "a")).empty_keys() == ["k"]
        assert reqs(req("k", "DoesNotExist")).empty_keys() == []  # asking for absence is satisfiable


class TestCompatibility:
    def test_compatible_requirements(self):
        pool = reqs(req(wk.CAPACITY_TYPE, "In", "spot", "on-demand"))
        pod = reqs(req(wk.CAPACITY_TYPE, "In", "spot"))
        assert pool.incompatibility(pod) is None and pool.compatible(pod)

    def test_conflict_names_both_sides(self):
        pool = reqs(req(wk.CAPACITY_TYPE, "In", "on-demand"))
        pod = reqs(req(wk.CAPACITY_TYPE, "In", "spot"))
        assert pool.incompatibility(pod) == (
            "karpenter.sh/capacity-type In [spot] conflicts with karpenter.sh/capacity-type In [on-demand]"
        )

    def test_undefined_well_known_label_is_allowed(self):
        # Every instance type has a zone, so a pool that does not constrain it still offers one.
        assert reqs().incompatibility(reqs(req(wk.ZONE, "In", "us-east-1a"))) is None

    def test_undefined_custom_label_is_not(self):
        message = reqs().incompatibility(reqs(req("example.com/team", "In", "a")))
        assert message == "label example.com/team is not defined here, so example.com/team In [a] cannot be met"

    def test_undefined_custom_label_is_fine_when_only_excluded(self):
        assert reqs().incompatibility(reqs(req("example.com/team", "NotIn", "a"))) is None
        assert reqs().incompatibility(reqs(req("example.com/team", "DoesNotExist"))) is None

    def test_absence_on_both_sides_is_compatible(self):
        pool = reqs(req("example.com/gpu", "DoesNotExist"))
        assert pool.incompatibility(reqs(req("example.com/gpu", "DoesNotExist"))) is None
        assert pool.incompatibility(reqs(req("example.com/gpu", "NotIn", "true"))) is None
        assert reqs(req("example.com/gpu", "NotIn", "a")).incompatibility(reqs(req("example.com/gpu", "DoesNotExist"))) is None
        assert pool.incompatibility(reqs(req("example.com/gpu", "Exists"))) is not None

    def test_allow_undefined_can_be_narrowed(self):
        pod = reqs(req(wk.ZONE, "In", "us-east-1a"))
        assert reqs().incompatibility(pod, allow_undefined=frozenset()) is not None

    def test_gt_requirement_against_pinned_value(self):
        node = Requirements.from_labels({wk.INSTANCE_GENERATION: "5"})
        assert node.compatible(reqs(req(wk.INSTANCE_GENERATION, "Gt", "4")))
        assert not node.compatible(reqs(req(wk.INSTANCE_GENERATION, "Gt", "5")))


class TestMinValues:
    def test_min_values_range(self):
        for bad in (0, 51, "2", True):
            with pytest.raises(RequirementError, match="minValues must be an integer from 1 to 50"):
                req("k", "In", "a", "b", min_values=bad)

    def test_min_values_more_than_listed(self):
        with pytest.raises(RequirementError, match="minValues 3 is more than the 2 values"):
            req("k", "In", "a", "b", min_values=3)

    def test_min_values_kept_in_output(self):
        r = req(wk.INSTANCE_FAMILY, "Exists", min_values=5)
        assert r.to_dict() == {"key": wk.INSTANCE_FAMILY, "operator": "Exists", "minValues": 5}


class TestAliases:
    @pytest.mark.parametrize(
        ("alias", "canonical"),
        [
            ("beta.kubernetes.io/arch", wk.ARCH),
            ("beta.kubernetes.io/os", wk.OS),
            ("beta.kubernetes.io/instance-type", wk.INSTANCE_TYPE),
            ("failure-domain.beta.kubernetes.io/zone", wk.ZONE),
            ("failure-domain.beta.kubernetes.io/region", wk.REGION),
        ],
    )
    def test_beta_labels_mean_their_ga_key(self, alias, canonical):
        assert Requirement.create(alias, "In", ["x"]).key == canonical
        assert list(Requirements.from_labels({alias: "x"})) == [canonical]

    def test_provisioner_name_is_its_own_key_not_the_nodepools(self):
        # Issue #14: a Provisioner and a NodePool may both be named "default"; each label picks its own.
        assert Requirement.create(wk.LEGACY_PROVISIONER, "In", ["x"]).key == wk.LEGACY_PROVISIONER
        assert list(Requirements.from_labels({wk.LEGACY_PROVISIONER: "x"})) == [wk.LEGACY_PROVISIONER]

    def test_alias_and_ga_key_intersect(self):
        rs = reqs(req("beta.kubernetes.io/arch", "In", "amd64", "arm64"), req(wk.ARCH, "In", "arm64"))
        assert rs[wk.ARCH].values == {"arm64"}


class TestRequirementsOutput:
    def test_labels_are_the_pinned_values(self):
        rs = reqs(req("a", "In", "x"), req("b", "In", "x", "y"), req("c", "Exists"))
        assert rs.labels() == {"a": "x"}

    def test_to_list_round_trips(self):
        rs = reqs(req("a", "In", "y", "x"), req("b", "NotIn", "z"), req("c", "Gt", "3"), req("d", "DoesNotExist"))
        again = Requirements.from_node_selector_requirements(rs.to_list())
        assert again == rs

    def test_from_node_selector_requirements_names_the_item(self):
        with pytest.raises(RequirementError, match=r"nodeAffinity\[1\]: k: unknown operator"):
            Requirements.from_node_selector_requirements(
                [{"key": "k", "operator": "In", "values": ["a"]}, {"key": "k", "operator": "Nope"}], "nodeAffinity"
            )
