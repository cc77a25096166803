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

from tables import print_table

from ipuplan import load_plan, optimize
from ipuplan.candidates import candidate_space
from ipuplan.facts import plan_facts
from ipuplan.page import anatomy_rows

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plan", nargs="?", type=Path, default=ROOT / "models" / "vit-so400m-finalist-5.json")
    parser.add_argument("--scope", default="kernels")
    arguments = parser.parse_args()
    result = optimize(load_plan(arguments.plan), scope=arguments.scope, workers=1, time_limit=30)
    facts = plan_facts(result.plan)
    plan, after = result.plan, facts.estimate
    step = after.total_peak_step
    print(f"{arguments.plan.name}, scope {arguments.scope}: raw peak {after.raw_peak:,} B at step {step} "
          f"({plan.steps[step].operation[:60]}), status {result.status.value}, bound {result.bound:,}")
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for row in anatomy_rows(facts, candidate_space(facts, arguments.scope), step):
        entry = totals["free" if row.reason is None else f"frozen: {row.reason.group_label}"]
        entry[0] += 1
        entry[1] += row.bytes
        entry[2] += row.bytes - after.values[row.value_id].shard_bytes
    scratch = plan.steps[step].scratch
    rows = [{"what": name, "values": n, "bytes": size, "of which granule padding": pad}
            for name, (n, size, pad) in sorted(totals.items(), key=lambda item: -item[1][1])]
    rows.append({"what": "scratch", "values": 0, "bytes": scratch.standard + scratch.interleaved,
                 "of which granule padding": 0})
    print_table(rows)


if __name__ == "__main__":
    main()
