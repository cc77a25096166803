"""Issue 24, part 2: what pricing every pair of candidate layouts exactly costs (`facts.pair_exchange.pair_bytes`).

Run:  .venv/bin/python benchmarks/pair_pricing.py [PLAN] [--scope S] [--repeat N]

Prepares the plan (`replan.pipeline.prepare`, default scope `full`), then walks the steps `plan_exchange`
prices (movers and `Sum` reductions with one read and one write) and, per step, each side's candidate
layouts (a frozen side: its one layout): both sides in two free groups, every pair; both in one group, each
candidate's own pair; one side frozen, a row. Prints the steps by kind, the pairs the model needs, the
distinct pairs priced (layouts that place alike, and steps that repeat, merged), the seconds of a cold
pricing (caches cleared; the best of `--repeat`), the seconds per distinct pair, and the slowest steps:
the floor an exact model would pay before its first solve. Also the pairs among the candidates that may be
part of a choice at the per-row lower bound of the peak (`alive_at`: none of their rows, every other group at its
least, goes above it), and their seconds at the same rate: what pricing only the candidates an optimum at that
peak can use would cost.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tables import print_table

from ipuplan import load_plan
from ipuplan.facts import pair_exchange
from ipuplan.facts.plan_exchange import step_bytes
from ipuplan.replan.options import OptimizeOptions
from ipuplan.replan.pipeline import Prepared, prepare

REFERENCE = Path(__file__).resolve().parent.parent / "models" / "vit-so400m-finalist-5.json"


def priced_steps(prepared: Prepared) -> list[tuple]:
    """(step, operation, kind, source sides, result sides, element size) per step the plan's exchange prices; a
    side is (shape, layout) per candidate of its group, or its one layout when frozen."""
    plan, space = prepared.facts.plan, prepared.space
    where = {m: (g, position) for g, group in enumerate(space.free) for position, m in enumerate(group.members)}

    def sides(value_id: int) -> tuple[int | None, tuple]:
        value = plan.values[value_id]
        if value_id not in where:
            return None, ((tuple(value.shape), value.parsed_layout),)
        g, position = where[value_id]
        return g, tuple((tuple(c.shapes[position]) if c.shapes else tuple(value.shape), c.layouts[position])
                        for c in space.free[g].candidates)

    found = []
    for step in prepared.facts.flow.steps:
        operation = plan.steps[step.index].parsed_operation
        if not (operation.is_mover or operation.kind == "Sum") or len(step.reads) != 1 or len(step.writes) != 1:
            continue
        (a, sources), (b, results) = sides(step.reads[0]), sides(step.writes[0])
        kind = "frozen" if a is None and b is None else "one free" if a is None or b is None else (
            "one group" if a == b else "two groups")
        found.append((step.index, operation, kind, sources, results, plan.values[step.reads[0]].element_size))
    return found


def needed_pairs(kind: str, sources: tuple, results: tuple) -> int:
    return len(sources) if kind == "one group" else len(sources) * len(results)


def price(steps: list[tuple]) -> list[float]:
    """Seconds per step of pricing its pairs cold, each pair of shapes of its candidates in one `pair_bytes`."""
    for cache in (pair_exchange.meeting_of, pair_exchange.source_pieces, pair_exchange.result_pieces,
                  pair_exchange._distinct_pair_bytes, step_bytes):
        cache.cache_clear()
    seconds = []
    for _, operation, kind, sources, results, element_size in steps:
        started = time.perf_counter()
        for source_shape, result_shape, source_layouts, result_layouts in shape_blocks(kind, sources, results):
            pair_exchange.pair_bytes(operation, source_shape, result_shape, element_size, source_layouts,
                                     result_layouts)
        seconds.append(time.perf_counter() - started)
    return seconds


def shape_blocks(kind: str, sources: tuple, results: tuple) -> list[tuple]:
    """(source shape, result shape, source layouts, result layouts) per block of pairs one `pair_bytes` prices: per
    pair of shapes; in one group only the candidates of that source shape (their own pairs are on the diagonal)."""
    if kind != "one group":
        return [(a, b, tuple(s), tuple(r)) for a, s in _by_shape(sources) for b, r in _by_shape(results)]
    blocks: dict[tuple, tuple[list, list]] = {}
    for (source_shape, source), (result_shape, result) in zip(sources, results):
        found = blocks.setdefault((source_shape, result_shape), ([], []))
        found[0].append(source)
        found[1].append(result)
    return [(a, b, tuple(s), tuple(r)) for (a, b), (s, r) in blocks.items()]


def _by_shape(sides: tuple) -> list[tuple]:
    """(shape, the layouts of that shape) per shape of the sides, in their order."""
    found: dict[tuple, list] = {}
    for shape, layout in sides:
        found.setdefault(shape, []).append(layout)
    return list(found.items())


def distinct_pairs(steps: list[tuple]) -> int:
    """Pairs of layouts that place differently, each step shape once (what `pair_bytes` computes)."""
    seen, total = set(), 0
    for _, operation, kind, sources, results, element_size in steps:
        for block in shape_blocks(kind, sources, results):
            key = (operation, element_size, *block[:2], *(frozenset((x.axes, x.replicas, x.tile_count) for x in side)
                                                          for side in block[2:]))
            if key not in seen:
                seen.add(key)
                total += len(key[4]) * len(key[5])
    return total


def alive_at(prepared: Prepared, peak: int) -> list[np.ndarray]:
    """Per group, the candidates that may be part of a choice with this peak: none of its rows, with every other
    group at its least there, goes above it (what an exact model at that peak would need priced)."""
    problem = prepared.problem
    alive = [np.ones(n, dtype=bool) for n in problem.candidate_counts]
    for row in problem.rows:
        totals = [standard + interleaved for _, standard, interleaved in row.terms]
        floor = row.standard + row.interleaved + sum(int(t.min()) for t in totals)
        for (g, _, _), total in zip(row.terms, totals):
            alive[g] &= floor - int(total.min()) + total <= peak
    return alive


def pairs_alive(prepared: Prepared, steps: list[tuple], alive: list[np.ndarray]) -> int:
    """`needed_pairs` over the candidates `alive` only."""
    where = {m: g for g, group in enumerate(prepared.space.free) for m in group.members}
    flow = prepared.facts.flow
    total = 0
    for index, _, kind, _, _, _ in steps:
        a, b = (where.get(v) for v in (flow.steps[index].reads[0], flow.steps[index].writes[0]))
        sides = [1 if g is None else int(alive[g].sum()) for g in (a, b)]
        total += sides[0] if kind == "one group" else sides[0] * sides[1]
    return total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("plan", nargs="?", type=Path, default=REFERENCE)
    parser.add_argument("--scope", default="full")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    prepared = prepare(load_plan(args.plan), OptimizeOptions(scope=args.scope))
    steps = priced_steps(prepared)
    runs = [price(steps) for _ in range(args.repeat)]
    best = min(runs, key=sum)
    kinds = Counter(kind for _, _, kind, *_ in steps)
    needed = sum(needed_pairs(kind, sources, results) for _, _, kind, sources, results, _ in steps)
    distinct = distinct_pairs(steps)
    total = sum(best)
    floor = prepared.problem.lower_bound()
    at_floor = pairs_alive(prepared, steps, alive_at(prepared, floor))
    print_table([{"plan": args.plan.name, "scope": args.scope, "free groups": len(prepared.space.free),
                  "candidates": prepared.space.candidate_count,
                  "steps": ", ".join(f"{n} {kind}" for kind, n in kinds.most_common()), "pairs needed": needed,
                  "distinct pairs priced": distinct, "seconds (best)": round(total, 2),
                  "seconds (each run)": ", ".join(f"{sum(run):.2f}" for run in runs),
                  "us per distinct pair": round(total / max(distinct, 1) * 1e6, 1),
                  f"pairs alive at the lower bound {floor:,}": at_floor,
                  "their seconds (projected)": round(total * at_floor / max(needed, 1), 2)}],
                "exact pricing of every candidate pair (cold caches)")
    slowest = sorted(zip(best, steps), key=lambda pair: -pair[0])[:8]
    print_table([{"step": step[0], "operation": step[1].kind, "kind": step[2], "sources": len(step[3]),
                  "results": len(step[4]), "seconds": round(seconds, 3)} for seconds, step in slowest], "slowest steps")


if __name__ == "__main__":
    main()
