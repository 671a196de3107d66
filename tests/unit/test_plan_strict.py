"""`nodescale plan -f` refuses misspelled fields and kinds (exit 2, one line each naming file, path and the
valid name) instead of planning as if they were absent: a spot-only pool with `requirments:` used to plan
on-demand nodes with exit 0.

Upstream behaviour restated: `kubectl apply --validate=strict -f` against Karpenter's CRDs refuses the same
files (`unknown field "spec.requirments"`; `no matches for kind "Provisoner"`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nodescale.cli import main

EXAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "examples"
DEFAULT_SPOT = (EXAMPLES / "karpenter-v1alpha5" / "default-spot.yaml").read_text()
V1_DEFAULT = (EXAMPLES / "karpenter-v1" / "default.yaml").read_text()
INFLATE = EXAMPLES / "workloads" / "inflate.yaml"


def plan(capsys: pytest.CaptureFixture, *paths: Path) -> tuple[int, list[str]]:
    args = ["plan"]
    for p in paths:
        args += ["-f", str(p)]
    code = main(args)
    return code, capsys.readouterr().err.splitlines()


@pytest.mark.parametrize(
    ("source", "old", "new", "line"),
    [
        (DEFAULT_SPOT, "  requirements:", "  requirments:", "#0: spec.requirments: unknown field; did you mean requirements?"),
        (DEFAULT_SPOT, "ttlSecondsAfterEmpty", "ttlSecondAfterEmpty",
         "#0: spec.ttlSecondAfterEmpty: unknown field; did you mean ttlSecondsAfterEmpty?"),
        (V1_DEFAULT, "      requirements:", "      requirments:",
         "#0: spec.template.spec.requirments: unknown field; did you mean requirements?"),
        (V1_DEFAULT, "consolidateAfter", "consolidateAftr",
         "#0: spec.disruption.consolidateAftr: unknown field; did you mean consolidateAfter?"),
    ],
)
def test_a_misspelled_field_exits_2_with_one_line_naming_it(capsys, tmp_path, source, old, new, line):
    pool = tmp_path / "pool.yaml"
    pool.write_text(source.replace(old, new, 1))
    code, err = plan(capsys, pool, INFLATE)
    assert code == 2
    assert err == [f"nodescale plan: {pool}{line}"]


def test_a_misspelled_karpenter_kind_exits_2_suggesting_the_kind(capsys, tmp_path):
    pool = tmp_path / "pool.yaml"
    pool.write_text(DEFAULT_SPOT.replace("kind: Provisioner", "kind: Provisoner"))
    code, err = plan(capsys, pool, INFLATE)
    assert code == 2 and len(err) == 1
    assert err[0].startswith(
        f'nodescale plan: {pool}#0: kind: "Provisoner" (apiVersion "karpenter.sh/v1alpha5") is not a kind nodescale '
        "reads; did you mean Provisioner? allowed are Provisioner (karpenter.sh/v1alpha5)"
    )


def test_a_karpenter_kind_misspelled_under_another_api_version_is_no_workload(capsys, tmp_path):
    pool = tmp_path / "pool.yaml"
    pool.write_text(V1_DEFAULT.replace("apiVersion: karpenter.sh/v1\nkind: NodePool", "apiVersion: v1\nkind: NodePol"))
    code, err = plan(capsys, pool, INFLATE)
    assert code == 2 and len(err) == 1
    assert err[0].startswith(f'nodescale plan: {pool}#0: kind: "NodePol" (apiVersion "v1") is not a kind')
    assert "did you mean NodePool?" in err[0]


def test_every_problem_of_every_file_is_listed(capsys, tmp_path):
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(DEFAULT_SPOT.replace("  requirements:", "  requirments:").replace("ttlSecondsAfterEmpty", "ttlSecondAfterEmpty"))
    b.write_text(V1_DEFAULT.replace("kind: NodePool", "kind: NodePools").replace("name: default", "name: other"))
    code, err = plan(capsys, a, b)
    assert code == 2
    assert err[:2] == [
        f"nodescale plan: {a}#0: spec.requirments: unknown field; did you mean requirements?",
        f"nodescale plan: {a}#0: spec.ttlSecondAfterEmpty: unknown field; did you mean ttlSecondsAfterEmpty?",
    ]
    assert err[2].startswith(f'nodescale plan: {b}#0: kind: "NodePools"') and "did you mean NodePool?" in err[2]
    assert len(err) == 3


def test_an_unknown_workload_kind_exits_2_and_built_in_kinds_are_passed_over_with_a_note(capsys, tmp_path):
    pool = tmp_path / "pool.yaml"
    pool.write_text(DEFAULT_SPOT)
    extras = tmp_path / "extras.yaml"
    extras.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n---\n"
                      "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n")
    code, err = plan(capsys, pool, INFLATE, extras)
    assert code == 0
    assert err == [
        f"nodescale plan: note: {extras}#0: ConfigMap passed over (it places no pods)",
        f"nodescale plan: note: {extras}#1: Service passed over (it places no pods)",
    ]
    typo = tmp_path / "typo.yaml"
    typo.write_text(INFLATE.read_text().replace("kind: Deployment", "kind: Deploymnet"))
    code, err = plan(capsys, pool, typo)
    assert code == 2 and len(err) == 1
    assert err[0].startswith(f"nodescale plan: {typo}#0: kind: 'Deploymnet' is not a kind nodescale reads; did you mean Deployment?")
