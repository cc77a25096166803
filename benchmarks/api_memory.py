"""Memory across repeated `ipuplan.optimize` calls in one process (issue 35, item 5): no leak per call.

    .venv/bin/python benchmarks/api_memory.py [--calls 100] [--plan PLAN]

Loads the plan once (default: the reference plan), then calls `ipuplan.optimize(plan, workers=1)` CALLS times
in a row, as a long-lived service would, and prints after calls 1, 10, 50 and the last the resident set size
(VmRSS of /proc/self/status, Linux), `gc.get_freeze_count()` and the seconds so far. Target: RSS grows by less
than 5 MB from call 10 to the last (call 1 to 10 still warms caches: the layout parsers' lru_caches, OR-Tools),
and the freeze count is what it was before the first call.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from tables import print_table

import ipuplan

REFERENCE = ROOT / "models" / "vit-so400m-finalist-5.json"
TARGET_MB = 5.0


def resident_mb() -> float:
    """The current resident set size in MB (VmRSS, reported in kB)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status (Linux only)")


def measured_rows(plan_path: Path, calls: int) -> tuple[list[dict], int]:
    """(one row per reported call: call, RSS MB, freeze count, seconds; the freeze count before the first call)."""
    plan = ipuplan.load_plan(plan_path)
    frozen_before = gc.get_freeze_count()
    reported = sorted({1, 10, 50, calls} & set(range(1, calls + 1)))
    rows, started = [], time.perf_counter()
    for call in range(1, calls + 1):
        ipuplan.optimize(plan, workers=1)
        if call in reported:
            rows.append({"call": call, "RSS MB": round(resident_mb(), 1), "freeze count": gc.get_freeze_count(),
                         "seconds": round(time.perf_counter() - started, 1)})
    return rows, frozen_before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--plan", type=Path, default=REFERENCE)
    args = parser.parse_args()
    rows, frozen_before = measured_rows(args.plan, args.calls)
    print_table(rows, f"ipuplan.optimize(plan, workers=1) x {args.calls}, {args.plan.name}")
    by_call = {row["call"]: row for row in rows}
    if 10 in by_call and args.calls > 10:
        growth = by_call[args.calls]["RSS MB"] - by_call[10]["RSS MB"]
        verdict = "met" if growth < TARGET_MB else "NOT met"
        print(f"RSS growth, call 10 to {args.calls}: {growth:+.1f} MB (target < {TARGET_MB:g} MB: {verdict})")
    print(f"freeze count before the first call {frozen_before}, after the last {rows[-1]['freeze count']}")


if __name__ == "__main__":
    main()
