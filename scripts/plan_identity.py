"""Are the core's plans what they were? (#29, "plans stay identical"; `make plan-identity`)

    python scripts/plan_identity.py                 # check: the random cases, then the suite's plan calls
    python scripts/plan_identity.py --random-only   # check the random cases only (about 10 s)
    python scripts/plan_identity.py record          # record both again (only on purpose: a plan changed)

The random cases (tests/plan_workloads.py) are held to tests/fixtures/plans/random.json by case id; the suite's
calls (tests/plan_recorder.py) to tests/fixtures/plans/suite.jsonl.gz by input digest. Prints the cases
checked, identical and differing, with a summary of each difference; exits 1 if any differs.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "plans"
RANDOM, SUITE = FIXTURES / "random.json", FIXTURES / "suite.jsonl.gz"
# The suites whose plan calls are recorded: the unit tests and the provisioning and disruption integration
# tests (the whole integration suite takes over 25 minutes with the recorder on, and its timing tests of the
# demo and of emptiness then fail). Left out: the random cases (tests/unit/test_plan_identity.py, recorded on
# their own) and the benchmarks run as scripts (test_bench_entry_points.py, child processes).
SUITE_ARGS = ["tests/unit", *sorted(str(p.relative_to(ROOT)) for pattern in ("test_provision*.py", "test_disruption*.py")
                                    for p in (ROOT / "tests" / "integration").glob(pattern)),
              "--deselect", "tests/unit/test_plan_identity.py", "--deselect", "tests/unit/test_bench_entry_points.py"]
sys.path[:0] = [str(ROOT), str(ROOT / "layers" / "nodescale" / "python")]


def _pytest(env: dict[str, str], workers: str) -> int:
    env = {**os.environ, **env, "PYTHONPATH": f"{ROOT}:{ROOT / 'layers/nodescale/python'}"}
    cmd = [sys.executable, "-m", "pytest", "-q", "-n", workers, "-p", "no:cacheprovider", *SUITE_ARGS]
    return subprocess.run(cmd, cwd=ROOT, env=env).returncode


def record_random() -> None:
    from tests import plan_workloads

    recorded = plan_workloads.record()
    RANDOM.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
    print(f"recorded {len(recorded)} random cases in {RANDOM.relative_to(ROOT)}")


def record_suite(workers: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "calls.jsonl"
        raw.touch()
        _pytest({"NODESCALE_PLAN_RECORD": str(raw)}, workers)
        rows, seen = [], set()
        for line in raw.read_text().splitlines():
            row = json.loads(line)
            if (row["in"], row["out"]) not in seen:
                seen.add((row["in"], row["out"]))
                rows.append(row)
    rows.sort(key=lambda r: (r["test"], r["in"]))
    with gzip.GzipFile(SUITE, "wb", mtime=0) as f:
        f.write("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows).encode())
    print(f"recorded {len(rows)} distinct plan calls of the suite in {SUITE.relative_to(ROOT)}")


def check_random() -> int:
    from tests import plan_workloads

    recorded = json.loads(RANDOM.read_text())
    differing = plan_workloads.differences(recorded)
    print(f"random cases: {len(recorded)} checked, {len(recorded) - len(differing)} identical, "
          f"{len(differing)} differing")
    for line in differing:
        print("  " + line)
    return len(differing)


def check_suite(workers: str) -> int:
    from tests.plan_recorder import load

    with tempfile.TemporaryDirectory() as tmp:
        stats_path = Path(tmp) / "stats.jsonl"
        stats_path.touch()
        code = _pytest({"NODESCALE_PLAN_CHECK": str(SUITE), "NODESCALE_PLAN_STATS": str(stats_path)}, workers)
        stats = [json.loads(line) for line in stats_path.read_text().splitlines()]
    calls, hits = sum(s["calls"] for s in stats), sum(s["hits"] for s in stats)
    mismatches = {test: lines for s in stats for test, lines in s["mismatches"].items()}
    differing = sum(len(lines) for lines in mismatches.values())
    print(f"suite plan calls: {calls} made, {hits} checked (recorded: {len(load(SUITE))}), "
          f"{hits - differing} identical, {differing} differing")
    for test, lines in sorted(mismatches.items()):
        print(f"  {test}:\n    " + "\n    ".join(lines))
    if code and not mismatches:
        print(f"  (pytest exited {code} for another reason: see its output above)")
    return differing + (1 if code else 0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", nargs="?", choices=["check", "record"], default="check")
    parser.add_argument("--random-only", action="store_true", help="the random cases only, not the suite")
    parser.add_argument("-n", "--workers", default="2", help="pytest-xdist workers for the suite (default 2)")
    args = parser.parse_args()
    if args.command == "record":
        record_random()
        if not args.random_only:
            record_suite(args.workers)
        return 0
    failed = check_random()
    if not args.random_only:
        failed += check_suite(args.workers)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
