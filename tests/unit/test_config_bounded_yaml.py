"""The one YAML loader is bounded as Kubernetes' decoder is (#27.2).

A 616-byte document of nine levels of nine aliases kept every function busy for minutes: PyYAML shares
what an alias names, and whatever walked the result afterwards (`nesting_depth` first) visited all 387
million values. Now the loader counts values as go-yaml does after CVE-2019-11254 and refuses the document
in milliseconds with a named error; keys given twice are refused as strict decoding does (the last one
used to win silently); deep nesting and huge integers are named errors; and each is an error of its own
document, never of the others in the same text.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from nodescale.config.boundedyaml import allowed_alias_share
from nodescale.config.documents import nesting_depth, parse_documents, read_documents
from nodescale.config.loader import load

EXAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "examples"


def alias_bomb(levels: int = 9, fanout: int = 9, indent: str = "        ") -> str:
    """Nine levels of nine aliases (the issue's 616 bytes), under a NodePool's annotations."""
    lines = [f"l0: &l0 [{', '.join(['lol'] * fanout)}]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * fanout)}]" for i in range(1, levels)]
    return ("apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: bomb}\nspec:\n  template:\n"
            "    metadata:\n      annotations:\n" + "".join(f"{indent}{line}\n" for line in lines))


GOOD = (EXAMPLES / "karpenter-v1" / "default.yaml").read_text()


def test_the_nine_by_nine_alias_bomb_is_refused_in_well_under_a_second_with_a_named_error() -> None:
    """#27.2: the bomb is refused quickly, naming the parameter, the line and go-yaml's limit."""
    start = time.monotonic()
    docs, errors = read_documents(alias_bomb(), "ssm:/nodescale/demo/nodepools/bomb")
    assert time.monotonic() - start < 1
    assert docs == []
    (error,) = errors
    assert error.source == "ssm:/nodescale/demo/nodepools/bomb"
    assert "document contains excessive aliasing" in error.message
    assert "more than the 99% allowed" in error.message
    assert error.message.startswith("line ")


def test_a_bomb_beside_good_documents_is_an_error_of_its_own_document() -> None:
    """#27.2: the NodePool and node class in the same text still load."""
    start = time.monotonic()
    docs, errors = read_documents(alias_bomb() + "---\n" + GOOD, "ssm:/pools/mixed")
    assert time.monotonic() - start < 1
    assert [e.source for e in errors] == ["ssm:/pools/mixed#0"]
    config = load(docs)
    assert config.ok and "default" in config.nodepools, config.errors


def test_shared_references_are_walked_once() -> None:
    """#27.2: nesting_depth remembered nothing and walked 9**9 values of this 10-level object."""
    value: object = ["lol"] * 9
    for _ in range(9):
        value = [value] * 9
    start = time.monotonic()
    assert nesting_depth({"spec": value}) == 11
    assert time.monotonic() - start < 0.1


def test_anchors_and_merge_keys_of_real_manifests_still_load() -> None:
    """#27.2: a few anchors (shared requirements, a merged base) are what go-yaml accepts too."""
    text = """\
apiVersion: v1
kind: List
items:
  - apiVersion: karpenter.sh/v1
    kind: NodePool
    metadata: {name: a}
    spec:
      template:
        metadata:
          labels: &labels {team: x, tier: batch}
        spec:
          nodeClassRef: &ref {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
          requirements: &reqs
            - {key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}
            - {key: kubernetes.io/arch, operator: In, values: [amd64]}
  - apiVersion: karpenter.sh/v1
    kind: NodePool
    metadata: {name: b}
    spec:
      template:
        metadata:
          labels:
            <<: *labels
            tier: web
        spec:
          nodeClassRef: *ref
          requirements: *reqs
"""
    docs = parse_documents(text, "pools.yaml")
    config = load(docs + [d for d in parse_documents(GOOD, "good.yaml") if d[1]["kind"] == "EC2NodeClass"])
    assert config.ok, config.errors
    assert docs[1][1]["spec"]["template"]["metadata"]["labels"] == {"team": "x", "tier": "web"}
    assert config.nodepools["b"].requirements == config.nodepools["a"].requirements


def test_go_yaml_alias_share_falls_with_size() -> None:
    assert allowed_alias_share(1000) == 0.99
    assert allowed_alias_share(4_000_000) == 0.10
    assert allowed_alias_share(2_200_000) == pytest.approx(0.545)


def test_a_key_given_twice_is_refused_naming_the_key_and_both_lines() -> None:
    """#27.2: `spec.weight` twice used to keep the last one silently."""
    text = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: a}\nspec:\n  weight: 1\n  weight: 90\n"
    docs, errors = read_documents(text, "ssm:/pools/dup")
    assert docs == []
    (error,) = errors
    assert str(error) == ("ssm:/pools/dup: line 6, column 3: key 'weight' given again in the same mapping: strict "
                          "decoding, as Kubernetes does it, allows each key once (key 'weight' first given on line 5)")


def test_a_key_given_twice_in_json_is_refused_too() -> None:
    docs, errors = read_documents('{"kind": "NodePool",\n "kind": "Pod"}', "j.json")
    assert docs == [] and "key 'kind' given again" in errors[0].message and "line 2" in errors[0].message


def test_a_merged_key_may_be_overridden() -> None:
    assert parse_documents("a: &a {x: 1}\nb: {<<: *a, x: 2}\n", "f")[0][1]["b"] == {"x": 2}


@pytest.mark.parametrize(
    "text",
    [
        "spec: " + "[" * 10_000 + "]" * 10_000,
        '{"spec": ' * 10_000 + "1" + "}" * 10_000,
        "spec:\n" + "".join(" " * i + "- \n" for i in range(1, 200)),
        "- " * 10_000 + "x",
    ],
    ids=["flow", "json", "block", "compact"],
)
def test_deep_nesting_is_a_named_error_not_a_recursion_error(text: str) -> None:
    """#27.2: 10,000 levels are refused with the bound named, in well under a second."""
    start = time.monotonic()
    docs, errors = read_documents(text + "\n---\n" + GOOD if not text.startswith("{") else text, "deep.yaml")
    assert time.monotonic() - start < 1
    assert "levels" in errors[0].message and "64" in errors[0].message, errors
    assert errors[0].source in ("deep.yaml", "deep.yaml#0")


def test_an_anchor_inside_itself_is_refused() -> None:
    """#27.2: PyYAML builds a cycle from this, which the old depth walk followed for ever."""
    docs, errors = read_documents("kind: NodePool\nspec: &s {template: *s}\n", "f")
    assert docs == [] and errors[0].message == "line 2, column 7: anchor &s contains an alias to itself"


def test_an_integer_python_cannot_convert_is_a_named_error() -> None:
    for value in ("9" * 5000, "0x" + "f" * 4000):
        docs, errors = read_documents(f"kind: NodePool\nspec: {{weight: {value}}}\n", "f")
        assert docs == [] and "decimal digits: more than the 4300 allowed" in errors[0].message, errors
