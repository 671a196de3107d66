"""The consolidation family benchmark (#32: "consolidation on the same family converges within 1.05 of a fresh
bound; print pods moved per $/h saved, so churn is visible"), run on one small mix of the family."""

from __future__ import annotations

import re

from bench import consolidationfamily

LINE = re.compile(
    r"seed +(\d+) (\S+) +(\d+) pods: +(\d+) -> +(\d+) nodes, start (\d+\.\d+) -> final (\d+\.\d+) x bound "
    r"\(\$[\d,.]+/h\); (\d+) runs, ([\d,]+) pods moved, (\d+\.\d) pods per \$/h saved; \d+ s$"
)


def test_the_family_prints_each_mix_and_the_summary_and_consolidation_never_raises_the_price() -> None:
    """#32: each mix's line (nodes before and after, start and final price over the bound, runs, pods moved,
    pods moved per $/h saved) and the summary's median and worst; the final price never above the start's."""
    lines = list(consolidationfamily.run(19, 1))
    print("\n".join(lines))  # shown when an assertion fails
    assert lines[0].startswith("consolidation family: 1 mixes, seeds 19..19")
    found = LINE.search(lines[1].strip())
    assert found, lines[1]
    _seed, pool, pods, before, after, start, final = found.groups()[:7]
    runs, moved, churn = int(found.group(8)), int(found.group(9).replace(",", "")), float(found.group(10))
    assert pool in ("default", "spot") and int(pods) > 0 and int(after) <= int(before)
    assert 1.0 <= float(final) <= float(start)  # never below the bound, never dearer than where it started
    assert runs >= 2 and moved > 0 and churn > 0  # the scale-down leaves work to do, and a run that is quiet
    assert lines[2].strip().startswith("final / fresh bound: median ") and "worst" in lines[2]
    assert lines[4].strip().startswith("runs: median ") and "not quiet: 0" in lines[4]
    assert lines[3].strip().startswith("on-demand mixes only (")
    assert "pods per $/h" in lines[5] and lines[6].strip().startswith("time: ")
    assert "UNPLACED" not in lines[1]
