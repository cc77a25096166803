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
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tables import print_table

from ipuplan import load_plan
from ipuplan.facts import pair_exchange
from ipuplan.facts.plan_exchange import plan_exchange, step_bytes
from ipuplan.model.problem import FORBIDDEN, Edge, Problem
from ipuplan.plan.operation import Operation
from ipuplan.replan.options import OptimizeOptions
from ipuplan.replan.pipeline import Prepared, prepare
from ipuplan.replan.rewrite import rewrite
from ipuplan.solvers import solve

REFERENCE = Path(__file__).resolve().parent.parent / "models" / "vit-so400m-finalist-5.json"


@dataclass(frozen=True)
class PricedStep:
    """A step the plan's exchange prices, with each side's group (None: frozen) and (shape, layout) per candidate."""

    step: int
    operation: Operation
    source_group: int | None
    result_group: int | None
    sources: tuple
    results: tuple
    element_size: int

    @property
    def kind(self) -> str:
        a, b = self.source_group, self.result_group
        return "frozen" if a is None and b is None else "one free" if a is None or b is None else (
            "one group" if a == b else "two groups")

    @property
    def needed(self) -> int:
        return len(self.sources) if self.kind == "one group" else len(self.sources) * len(self.results)


def priced_steps(prepared: Prepared) -> list[PricedStep]:
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
        found.append(PricedStep(step.index, operation, a, b, sources, results, plan.values[step.reads[0]].element_size))
    return found


def step_costs(step: PricedStep) -> np.ndarray:
    """The step's bytes: per (source candidate, result candidate), or per candidate of its one group (a vector)."""
    if step.kind == "one group":
        costs = np.zeros(len(step.sources), dtype=np.int64)
        for source_shape, result_shape, rows, layouts in _shape_blocks(step.sources, step.results, paired=True):
            found = pair_exchange.pair_bytes(step.operation, source_shape, result_shape, step.element_size,
                                             *layouts)
            costs[rows] = np.diagonal(found)
        return costs
    costs = np.zeros((len(step.sources), len(step.results)), dtype=np.int64)
    for source_shape, result_shape, (rows, columns), layouts in _shape_blocks(step.sources, step.results):
        costs[np.ix_(rows, columns)] = pair_exchange.pair_bytes(step.operation, source_shape, result_shape,
                                                                step.element_size, *layouts)
    return costs


def _shape_blocks(sources: tuple, results: tuple, paired: bool = False) -> list[tuple]:
    """(source shape, result shape, where, (source layouts, result layouts)) per block one `pair_bytes` prices: per
    pair of shapes (`where`: the rows and the columns); `paired`, the candidates of each pair of shapes with their
    own pairs on the block's diagonal (`where`: the candidates)."""
    if paired:
        blocks: dict[tuple, list[int]] = {}
        for c, ((source_shape, _), (result_shape, _)) in enumerate(zip(sources, results)):
            blocks.setdefault((source_shape, result_shape), []).append(c)
        return [(a, b, chosen, (tuple(sources[c][1] for c in chosen), tuple(results[c][1] for c in chosen)))
                for (a, b), chosen in blocks.items()]
    return [(a, b, (rows, columns), (tuple(sources[i][1] for i in rows), tuple(results[j][1] for j in columns)))
            for a, rows in _by_shape(sources) for b, columns in _by_shape(results)]


def _by_shape(sides: tuple) -> list[tuple]:
    """(shape, the indices of the sides of that shape), in their order."""
    found: dict[tuple, list[int]] = {}
    for k, (shape, _) in enumerate(sides):
        found.setdefault(shape, []).append(k)
    return list(found.items())


def price(steps: list[PricedStep]) -> tuple[list[float], list[np.ndarray]]:
    """Seconds per step of pricing its pairs cold, and the costs."""
    for cache in (pair_exchange.meeting_of, pair_exchange.source_pieces, pair_exchange.result_pieces,
                  pair_exchange._distinct_pair_bytes, step_bytes):
        cache.cache_clear()
    seconds, costs = [], []
    for step in steps:
        started = time.perf_counter()
        costs.append(step_costs(step))
        seconds.append(time.perf_counter() - started)
    return seconds, costs


def distinct_pairs(steps: list[PricedStep]) -> int:
    """Pairs of layouts that place differently, each step shape once (what `pair_bytes` computes)."""
    seen, total = set(), 0
    for step in steps:
        for source_shape, result_shape, _, layouts in _shape_blocks(step.sources, step.results,
                                                                    paired=step.kind == "one group"):
            placed = tuple(frozenset((x.axes, x.replicas, x.tile_count) for x in side) for side in layouts)
            key = (step.operation, step.element_size, source_shape, result_shape, *placed)
            if key not in seen:
                seen.add(key)
                total += len(placed[0]) * len(placed[1])
    return total


def alive_at(problem: Problem, peak: int) -> list[np.ndarray]:
    """Per group, the candidates that may be part of a choice with this peak: none of its rows, with every other
    group at its least there, goes above it (what an exact model at that peak would need priced)."""
    alive = [np.ones(n, dtype=bool) for n in problem.candidate_counts]
    for row in problem.rows:
        totals = [standard + interleaved for _, standard, interleaved in row.terms]
        floor = row.standard + row.interleaved + sum(int(t.min()) for t in totals)
        for (g, _, _), total in zip(row.terms, totals):
            alive[g] &= floor - int(total.min()) + total <= peak
    return alive


def pairs_alive(steps: list[PricedStep], alive: list[np.ndarray]) -> int:
    """`PricedStep.needed` over the candidates `alive` only."""
    total = 0
    for step in steps:
        sides = [1 if g is None else int(alive[g].sum()) for g in (step.source_group, step.result_group)]
        total += sides[0] if step.kind == "one group" else sides[0] * sides[1]
    return total


def exact_problem(problem: Problem, steps: list[PricedStep], costs: list[np.ndarray]) -> tuple[Problem, int]:
    """The problem with every step's exact costs (edges between the same two groups summed) and the constant of the
    steps between frozen values."""
    unary = [np.zeros(n, dtype=np.int64) for n in problem.candidate_counts]
    edges: dict[tuple[int, int], np.ndarray] = {}
    constant = 0
    for step, cost in zip(steps, costs):
        a, b = step.source_group, step.result_group
        if step.kind == "frozen":
            constant += int(cost[0, 0])
        elif step.kind == "one group":
            unary[a] += cost
        elif a is None or b is None:
            unary[b if a is None else a] += cost.ravel()
        else:
            key, oriented = ((a, b), cost) if a < b else ((b, a), cost.T)
            edges[key] = edges.get(key, 0) + oriented
    exact = replace(problem, exchange=tuple(tuple(u.tolist()) for u in unary),
                    edges=tuple(Edge(a, b, matrix) for (a, b), matrix in sorted(edges.items())))
    return exact, constant


def forbidden_beyond(problem: Problem, peak: int) -> Problem:
    """The candidates that cannot be part of a choice at `peak` forbidden, their pairs unpriced."""
    alive = alive_at(problem, peak)
    exchange = tuple(tuple(x if alive[g][c] else FORBIDDEN for c, x in enumerate(costs))
                     for g, costs in enumerate(problem.exchange))
    edges = tuple(Edge(e.a, e.b, e.costs * np.outer(alive[e.a], alive[e.b])) for e in problem.edges)
    return replace(problem, exchange=exchange, edges=edges)


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
        steps = priced_steps(prepared)
        exact, constant = exact_problem(prepared.problem, steps, price(steps)[1])
        rows.append({"model": "input", "exact exchange of the written plan": plan_exchange(plan).total,
                     "model exchange + constant": exact.exchange_of(exact.input_choice) + constant})
        rows.append(solved_row(f"{objective}, every pair", prepared, exact, constant, options))
        if objective == "peak":
            pruned = forbidden_beyond(exact, rows[-1]["peak"])
            rows.append(solved_row("peak, only candidates that can reach the peak", prepared, pruned, constant, options))
    print_table(rows, f"the exact model of {plan_path.name} ({scope}), solved with one worker")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("plan", nargs="?", type=Path, default=REFERENCE)
    parser.add_argument("--scope", default="full")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--solve", action="store_true")
    args = parser.parse_args()
    prepared = prepare(load_plan(args.plan), OptimizeOptions(scope=args.scope))
    steps = priced_steps(prepared)
    runs = [price(steps)[0] for _ in range(args.repeat)]
    best = min(runs, key=sum)
    kinds = Counter(step.kind for step in steps)
    needed = sum(step.needed for step in steps)
    distinct = distinct_pairs(steps)
    total = sum(best)
    floor = prepared.problem.lower_bound()
    at_floor = pairs_alive(steps, alive_at(prepared.problem, floor))
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
    print_table([{"step": step.step, "operation": step.operation.kind, "kind": step.kind, "sources": len(step.sources),
                  "results": len(step.results), "seconds": round(seconds, 3)} for seconds, step in slowest],
                "slowest steps")
    if args.solve:
        solve_exact(args.plan, args.scope)


if __name__ == "__main__":
    main()
