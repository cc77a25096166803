"""What holds the peak after optimisation: the bytes at each step at the peak, by what holds them.

Run:  .venv/bin/python benchmarks/peak_anatomy.py [PLAN] [--scope full]

Optimises the plan, then for every step at the new peak sums the live bytes per kind: frozen (per
reason), or free per freedom level (storage, Gemm family, attention family, class only) with how many
of those bytes are above the value's own smallest candidate (0: it is at its smallest, the peak cannot
go lower through it; a family's members trade bytes against each other, so theirs cannot all reach 0),
and the part of AMP-aligned values that is granule padding.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tables import print_table

from ipuplan import load_plan, optimize
from ipuplan.facts.plan_facts import plan_facts
from ipuplan.space.scopes import candidate_space

ROOT = Path(__file__).resolve().parent.parent


def slack_by_value(space, result_plan) -> dict[int, tuple[str, int]]:
    """Free value -> (its group's kind, bytes above the smallest any candidate gives it)."""
    found = {}
    for group in space.free:
        for position, member in enumerate(group.members):
            smallest = min(c.value_bytes[position].bytes for c in group.candidates)
            found[member] = (group.kind, smallest)
    return found


def anatomy(facts, space, step: int) -> list[dict]:
    plan, after = facts.plan, facts.estimate
    free = slack_by_value(space, plan)
    reasons = space.reasons()
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for value_id in plan.steps[step].live:
        size = after.values[value_id].bytes
        if value_id in free:
            kind, smallest = free[value_id]
            key, slack = f"free ({kind})", size - smallest
        else:
            reason = reasons.get(value_id)
            key, slack = f"frozen: {reason.group_label if reason else 'no group'}", 0
        entry = totals[key]
        entry[0] += 1
        entry[1] += size
        entry[2] += slack
        entry[3] += size - after.values[value_id].shard_bytes
    scratch = plan.steps[step].scratch
    rows = [{"step": step, "what": name, "values": n, "bytes": size, "above own smallest": slack,
             "granule padding": pad}
            for name, (n, size, slack, pad) in sorted(totals.items(), key=lambda item: -item[1][1])]
    rows.append({"step": step, "what": "scratch", "values": 0, "bytes": scratch.standard + scratch.interleaved,
                 "above own smallest": 0, "granule padding": 0})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plan", nargs="?", type=Path, default=ROOT / "models" / "vit-so400m-finalist-5.json")
    parser.add_argument("--scope", default="full")
    arguments = parser.parse_args()
    source = load_plan(arguments.plan)
    result = optimize(source, scope=arguments.scope, workers=1, time_limit=30)
    space = candidate_space(plan_facts(source), arguments.scope)
    facts = plan_facts(result.plan)
    totals = [a + b for a, b in zip(facts.estimate.standard, facts.estimate.interleaved)]
    peak = max(totals)
    steps = [s for s, total in enumerate(totals) if total == peak]
    print(f"{arguments.plan.name}, scope {arguments.scope}: raw peak {peak:,} B at steps {steps}, "
          f"status {result.status.value}, bound {result.bound:,}")
    print_table([row for step in steps for row in anatomy(facts, space, step)])


if __name__ == "__main__":
    main()
