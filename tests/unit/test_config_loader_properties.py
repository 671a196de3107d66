"""The NodePool/NodeClass loader at the extremes (#27's acceptance, the loader's part; #27.2).

Whatever one document holds (nesting tens of thousands of levels deep, thousands of keys, integers longer
than Python converts, durations of hundreds of digits, alias bombs, keys given twice), reading a source
and loading its configuration ends within a second, with the document either loaded or refused by a
ConfigError naming it, and the good NodePool and EC2NodeClass beside it in the same source still load.
"""

from __future__ import annotations

import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodescale.config.documents import read_documents
from nodescale.config.errors import ConfigError
from nodescale.config.loader import load

GOOD = (Path(__file__).resolve().parents[1] / "fixtures" / "examples" / "karpenter-v1" / "default.yaml").read_text()
GOOD_DOCUMENTS = 2  # the NodePool "default" and the EC2NodeClass "default"
SOURCE = "ssm:/nodescale/demo/nodepools/team"

POOL = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: hostile
spec:
  weight: {weight}
  template:
    metadata:
      labels: {labels}
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      expireAfter: {duration}
      terminationGracePeriod: {duration}
      requirements: [{{key: kubernetes.io/arch, operator: In, values: [amd64]}}]
  disruption:
    consolidateAfter: {duration}
"""


def pool(weight: str = "10", labels: str = "{team: x}", duration: str = "1h") -> str:
    return POOL.format(weight=weight, labels=labels, duration=duration)


digits = st.integers(1, 6000).map(lambda n: "9" * n)
unit = st.sampled_from(["ns", "us", "µs", "ms", "s", "m", "h", "", "d"])
durations = st.one_of(
    st.tuples(st.integers(1, 500), unit).map(lambda t: "1" * t[0] + t[1]),
    st.tuples(st.integers(1, 40), unit, st.integers(1, 40), unit).map(lambda t: "7" * t[0] + t[1] + "5" * t[2] + t[3]),
    st.sampled_from(["99999999999999999h", "2562047h47m16.854775807s", "2562047h47m16.854775808s", "-1s",
                     "1e400h", "NaNs", "Never", "0", "1.h", ".5h"]),
    st.text(max_size=30).map(lambda s: '"' + s.replace("\\", "").replace('"', "") + '"'),
)


def nested_flow(depth: int) -> str:
    return "[" * depth + "]" * depth


def nested_block(depth: int) -> str:
    return "\n" + "".join(" " * (8 + i) + "k:\n" for i in range(depth)) + " " * (8 + depth) + "v: 1"


def alias_bomb(levels: int, fanout: int) -> str:
    lines = [f"l0: &l0 [{', '.join(['lol'] * fanout)}]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * fanout)}]" for i in range(1, levels)]
    return "\n" + "".join(f"        {line}\n" for line in lines).rstrip("\n")


hostile = st.one_of(
    st.integers(0, 20_000).map(lambda n: pool(labels=nested_flow(n))),
    st.integers(0, 300).map(lambda n: pool(labels=nested_block(n))),
    st.integers(0, 20_000).map(lambda n: "- " * n + "x"),
    st.integers(0, 20_000).map(lambda n: '{"a": ' * n + "1" + "}" * n),
    digits.map(lambda d: pool(weight=d)),
    digits.map(lambda d: pool(weight="0x" + d)),
    digits.map(lambda d: pool(labels="{team: " + d + "}")),
    durations.map(lambda d: pool(duration=d)),
    st.integers(0, 5000).map(lambda n: pool(labels="{" + ", ".join(f"k{i}: v" for i in range(n)) + "}")),
    st.tuples(st.integers(1, 12), st.integers(1, 12)).map(lambda t: pool(labels=alias_bomb(*t))),
    st.sampled_from(["team", "kubernetes.io/arch"]).map(lambda k: pool(labels="{" + f"{k}: a, {k}: b" + "}")),
    # Any text, but one document of it: a "---" or "..." line would make it several.
    st.text(max_size=200).filter(lambda s: "--" not in s and ".." not in s),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document=hostile, first=st.booleans())
def test_a_document_loads_or_is_refused_by_name_in_a_second_and_never_stops_the_others(document: str, first: bool):
    """#27 acceptance (#27.2): every input acts or is refused with a reason, within 1 s; the rest load."""
    parts = [document, GOOD] if first else [GOOD, document]
    hostile_index = 0 if first else GOOD_DOCUMENTS
    text = "---\n" + parts[0].rstrip("\n") + "\n---\n" + parts[1]
    # CPU time, not wall time: the bound is on the work a document costs, which other processes on a
    # busy machine (pytest's other worker, a build) do not change.
    start = time.process_time()
    documents, errors = read_documents(text, SOURCE)
    config = load(documents, errors)
    elapsed = time.process_time() - start
    assert elapsed < 1, f"{elapsed:.2f} s"
    assert "default" in config.nodepools and "default" in config.nodeclasses, config.errors
    for error in config.errors:
        assert isinstance(error, ConfigError) and error.message
        assert error.source.startswith(f"{SOURCE}#{hostile_index}"), error  # only the hostile document
        str(error)  # a person can read it: no value too large to print
