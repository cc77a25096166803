"""What holds the peak after optimisation: bytes at the peak step, by why they cannot move.

Run:  .venv/bin/python benchmarks/peak_anatomy.py [PLAN] [--scope kernels]

Optimises the plan, then at the new peak step sums the live bytes per reason (free, or the
first reason the value is frozen) and the part of AMP-aligned values that is granule padding.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tables import print_table  # noqa: E402

from ipuplan import load_plan, optimize  # noqa: E402
from ipuplan.estimate import estimate  # noqa: E402
from ipuplan.page import anatomy_rows  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def category(state: str) -> str:
    if state == "free":
        return "free"
    reason = state.removeprefix("frozen: ")
    for marker in (" at step", ":"):
        reason = reason.split(marker)[0]
    return f"frozen: {reason}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plan", nargs="?", type=Path, default=ROOT / "models" / "vit-so400m-finalist-5.json")
    parser.add_argument("--scope", default="kernels")
    arguments = parser.parse_args()
    result = optimize(load_plan(arguments.plan), scope=arguments.scope, deterministic=True, time_limit=30)
    plan, after = result.plan, estimate(result.plan)
    step = after.total_peak_step
    print(f"{arguments.plan.name}, scope {arguments.scope}: raw peak {after.raw_peak:,} B at step {step} "
          f"({plan.steps[step].operation[:60]}), status {result.status.value}, bound {result.bound:,}")
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for value_id, _, _, size, state in anatomy_rows(plan, after, step, arguments.scope):
        entry = totals[category(state)]
        entry[0] += 1
        entry[1] += size
        entry[2] += size - after.values[value_id].shard_bytes
    scratch = plan.steps[step].scratch
    rows = [{"what": name, "values": n, "bytes": size, "of which granule padding": pad}
            for name, (n, size, pad) in sorted(totals.items(), key=lambda item: -item[1][1])]
    rows.append({"what": "scratch", "values": 0, "bytes": scratch.standard + scratch.interleaved,
                 "of which granule padding": 0})
    print_table(rows)


if __name__ == "__main__":
    main()
