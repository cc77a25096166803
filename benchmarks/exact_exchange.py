"""Issue 24, part 2: the exchange the optimiser writes when it prices the plan's exact figure, against when it chose by
its proxy, side by side in one run.

Run:  .venv/bin/python benchmarks/exact_exchange.py [PLAN ...] [--scope S ...] [--objective O ...]

For each plan (default: every plan in `models/`), scope and objective, with `workers=1` (deterministic):
`optimize`'s front half and first solve (`prepare`, `solve_space`: the proxy's choice, what ipuplan wrote before the
exact stage), then the exact stage (`pipeline.exchange_phase`: every pair of the candidates that can meet the peak
found priced, the least exact exchange solved). Per row: the raw peak of each, the exact exchange (docs/EXCHANGE.md,
`plan_exchange` of the rewritten plan) of the input, of the proxy's plan and of the exact stage's plan, the model's
figure (must equal the last), the exact stage's status and bound over the whole scope (`fit`) or at the peak (`peak`),
and the seconds of the exact stage (pricing and solve). Plans no layout of the scope fits are listed as such.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tables import print_table

from ipuplan import load_plan
from ipuplan.facts.plan_exchange import plan_exchange
from ipuplan.replan.options import OptimizeOptions
from ipuplan.replan.pipeline import exchange_phase, peak_phase, prepare, run_path
from ipuplan.replan.rewrite import rewrite
from ipuplan.solvers import SolveStatus
from ipuplan.solvers.deadline import Deadline

ROOT = Path(__file__).resolve().parent.parent


def row(path: Path, scope: str, objective: str) -> dict:
    plan = load_plan(path)
    options = OptimizeOptions(scope=scope, objective=objective, workers=1)
    prepared = prepare(plan, options)
    settings = options.solver_settings()
    deadline, phases = Deadline.starting(options.time_limit, settings.deterministic), run_path(prepared)
    peak = peak_phase(prepared, settings, deadline, phases)
    head = {"plan": path.name, "scope": scope, "objective": objective}
    prepared, first = peak.prepared, peak.solved
    problem = prepared.problem
    if first.status not in (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE) or problem.usage(first.choice).violation(
            problem.limits):
        return {**head, "proxy: raw peak": f"does not fit ({first.status.value})"}
    started = time.perf_counter()
    priced = exchange_phase(peak, settings, deadline, phases)
    exact, solved = priced.exact, priced.solved
    seconds = time.perf_counter() - started
    facts = prepared.facts

    def written(choice) -> tuple[int, int]:
        after = rewrite(facts, prepared.space, choice, facts.budgets)
        return after.estimate.raw_peak, plan_exchange(after.plan, after).total

    before = plan_exchange(plan, facts).total
    proxy_peak, proxy_exchange = written(first.choice)
    exact_peak, exact_exchange = written(solved.choice)
    return {**head, "input exchange": before, "proxy: raw peak": proxy_peak, "proxy: exchange": proxy_exchange,
            "exact: raw peak": exact_peak, "exact: exchange": exact_exchange,
            "exact - proxy": exact_exchange - proxy_exchange,
            "model = plan": exact.exchange_of(solved.choice) == exact_exchange,
            "status": solved.status.value, "exchange bound": solved.exchange_bound,
            "gap": f"{solved.exchange_gap:.2%}" if solved.exchange_gap is not None else "-",
            "exact stage s": round(seconds, 2)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("plans", nargs="*", type=Path)
    parser.add_argument("--scope", action="append", choices=("storage", "kernels", "full"))
    parser.add_argument("--objective", action="append", choices=("peak", "fit"))
    args = parser.parse_args()
    plans = args.plans or sorted((ROOT / "models").glob("*.json"))
    rows = [row(path, scope, objective) for path in plans for scope in args.scope or ("storage", "kernels", "full")
            for objective in args.objective or ("peak", "fit")]
    print_table(rows, "exact exchange: the proxy's plan (before the exact stage) against the exact stage's, workers=1")


if __name__ == "__main__":
    main()
