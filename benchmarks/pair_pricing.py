"""Issue 24, part 2: what pricing every pair of candidate layouts exactly costs (`facts.pair_exchange.pair_bytes`),
and what an exact model then costs to solve.

Run:  .venv/bin/python benchmarks/pair_pricing.py [PLAN] [--scope S] [--repeat N] [--solve]

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

`--solve`: the exact model built here, outside `model.build` (each step's costs: a pair of groups an `Edge`, one
group or one free side a unary cost, both frozen a constant), solved with `--workers 1` for `peak` and `fit`, and
for `peak` once more with the candidates that cannot reach the found peak forbidden (their pairs unpriced): per
solve its seconds, status, peak, the model's exchange (+ the constant) and the exact exchange of the rewritten
plan (`plan_exchange`), which must be equal.
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
from ipuplan.facts.plan_exchange import plan_exchange, step_bytes
from ipuplan.model.exact import exact_problem
from ipuplan.model.exchange_cost import PricedStep, priced_steps, step_costs
from ipuplan.model.problem import Problem, alive_within
from ipuplan.replan.options import OptimizeOptions
from ipuplan.replan.pipeline import Prepared, prepare
from ipuplan.replan.rewrite import rewrite
from ipuplan.solvers import solve

REFERENCE = Path(__file__).resolve().parent.parent / "models" / "vit-so400m-finalist-5.json"


def _all(step: PricedStep) -> tuple[np.ndarray, np.ndarray]:
    """Every candidate of each side alive."""
    return np.ones(len(step.sources), dtype=bool), np.ones(len(step.results), dtype=bool)


def needed(step: PricedStep) -> int:
    """The pairs a model of the step needs: every pair of two groups', each candidate's own within one group."""
    return len(step.sources) if step.kind == "one group" else len(step.sources) * len(step.results)


def _shape_blocks(sources: tuple, results: tuple, paired: bool = False) -> list[tuple]:
    """(source shape, result shape, (source layouts, result layouts)) per block one `pair_bytes` prices."""
    if paired:
        blocks: dict[tuple, list[int]] = {}
        for c, ((source_shape, _), (result_shape, _)) in enumerate(zip(sources, results)):
            blocks.setdefault((source_shape, result_shape), []).append(c)
        return [(a, b, (tuple(sources[c][1] for c in chosen), tuple(results[c][1] for c in chosen)))
                for (a, b), chosen in blocks.items()]
    by_shape = [{}, {}]
    for found, side in zip(by_shape, (sources, results)):
        for shape, layout in side:
            found.setdefault(shape, []).append(layout)
    return [(a, b, (tuple(x), tuple(y))) for a, x in by_shape[0].items() for b, y in by_shape[1].items()]


def price(steps: list[PricedStep]) -> tuple[list[float], list[np.ndarray]]:
    """Seconds per step of pricing its pairs cold, and the costs."""
    for cache in (pair_exchange.meeting_of, pair_exchange.source_pieces, pair_exchange.result_pieces,
                  pair_exchange._distinct_pair_bytes, step_bytes):
        cache.cache_clear()
    seconds, costs = [], []
    for step in steps:
        started = time.perf_counter()
        costs.append(step_costs(step, *_all(step)))
        seconds.append(time.perf_counter() - started)
    return seconds, costs


def distinct_pairs(steps: list[PricedStep]) -> int:
    """Pairs of layouts that place differently, each step shape once (what `pair_bytes` computes)."""
    seen, total = set(), 0
    for step in steps:
        for source_shape, result_shape, layouts in _shape_blocks(step.sources, step.results,
                                                                 paired=step.kind == "one group"):
            placed = tuple(frozenset((x.axes, x.replicas, x.tile_count) for x in side) for side in layouts)
            key = (step.operation, step.element_size, source_shape, result_shape, *placed)
            if key not in seen:
                seen.add(key)
                total += len(placed[0]) * len(placed[1])
    return total


def pairs_alive(steps: list[PricedStep], alive: list[np.ndarray]) -> int:
    """`PricedStep.needed` over the candidates `alive` only."""
    total = 0
    for step in steps:
        sides = [1 if g is None else int(alive[g].sum()) for g in (step.source_group, step.result_group)]
        total += sides[0] if step.kind == "one group" else sides[0] * sides[1]
    return total


def forbidden_beyond(facts, space, problem: Problem, peak: int):
    """The exact problem with the candidates that cannot be part of a choice at `peak` forbidden, their pairs
    unpriced (what `optimize`'s exact stage prices)."""
    return exact_problem(facts, space, problem, alive_within(problem, peak))


def solved_row(label: str, prepared: Prepared, problem: Problem, constant: int, options: OptimizeOptions) -> dict:
    started = time.perf_counter()
    solved = solve(problem, options.solver_settings())
    seconds = time.perf_counter() - started
    written = rewrite(prepared.facts, prepared.space, solved.choice, prepared.facts.budgets).plan
    model, exact = problem.exchange_of(solved.choice) + constant, plan_exchange(written).total
    return {"model": label, "solve seconds": round(seconds, 2), "status": solved.status.value, "peak": solved.peak,
            "model exchange + constant": model, "exact exchange of the written plan": exact, "equal": model == exact}


def solve_exact(plan_path: Path, scope: str) -> None:
    plan = load_plan(plan_path)
    rows = []
    for objective in ("peak", "fit"):
        options = OptimizeOptions(scope=scope, objective=objective, workers=1)
        prepared = prepare(plan, options)
        whole = exact_problem(prepared.facts, prepared.space, prepared.problem)
        rows.append({"model": "input", "exact exchange of the written plan": plan_exchange(plan).total,
                     "model exchange + constant": whole.exchange_of(whole.problem.input_choice)})
        rows.append(solved_row(f"{objective}, every pair", prepared, whole.problem, whole.constant, options))
        if objective == "peak":
            pruned = forbidden_beyond(prepared.facts, prepared.space, prepared.problem, rows[-1]["peak"])
            rows.append(solved_row("peak, only candidates that can reach the peak", prepared, pruned.problem,
                                   pruned.constant, options))
    print_table(rows, f"the exact model of {plan_path.name} ({scope}), solved with one worker")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("plan", nargs="?", type=Path, default=REFERENCE)
    parser.add_argument("--scope", default="full")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--solve", action="store_true")
    args = parser.parse_args()
    prepared = prepare(load_plan(args.plan), OptimizeOptions(scope=args.scope))
    steps = priced_steps(prepared.facts, prepared.space)
    runs = [price(steps)[0] for _ in range(args.repeat)]
    best = min(runs, key=sum)
    kinds = Counter(step.kind for step in steps)
    needed_pairs = sum(needed(step) for step in steps)
    distinct = distinct_pairs(steps)
    total = sum(best)
    floor = prepared.problem.lower_bound()
    at_floor = pairs_alive(steps, alive_within(prepared.problem, floor))
    print_table([{"plan": args.plan.name, "scope": args.scope, "free groups": len(prepared.space.free),
                  "candidates": prepared.space.candidate_count,
                  "steps": ", ".join(f"{n} {kind}" for kind, n in kinds.most_common()), "pairs needed": needed_pairs,
                  "distinct pairs priced": distinct, "seconds (best)": round(total, 2),
                  "seconds (each run)": ", ".join(f"{sum(run):.2f}" for run in runs),
                  "us per distinct pair": round(total / max(distinct, 1) * 1e6, 1),
                  f"pairs alive at the lower bound {floor:,}": at_floor,
                  "their seconds (projected)": round(total * at_floor / max(needed_pairs, 1), 2)}],
                "exact pricing of every candidate pair (cold caches)")
    slowest = sorted(zip(best, steps), key=lambda pair: -pair[0])[:8]
    print_table([{"step": step.step, "operation": step.operation.kind, "kind": step.kind, "sources": len(step.sources),
                  "results": len(step.results), "seconds": round(seconds, 3)} for seconds, step in slowest],
                "slowest steps")
    if args.solve:
        solve_exact(args.plan, args.scope)


if __name__ == "__main__":
    main()
