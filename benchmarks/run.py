"""ipuplan against the input plan, a greedy baseline, HiGHS and the lower bounds, in one run.

Run:  .venv/bin/pip install -e ".[bench]" && .venv/bin/python benchmarks/run.py [--scope S ...] [--quick]

Table 1, per plan (models/ and synthesised ones) and scope (storage, kernels, full, side by side): values,
steps, candidates, input peak,
greedy, HiGHS, ipuplan peak, lower bound (every free value at its smallest choice, the choices a cap left out
of a family's candidates included: a bound over the whole scope), the absolute floor, gap, the left-out choices
the solve's bound had to count, build / solve / first-solution times, over several seeds.
Table 2, scaling: unrolled copies of the reference plan up to 10,000+ values and 5,000+ steps.
Results: benchmarks/results/run.json and benchmarks/results/scaling-SCOPE.png.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from measures import absolute_floor
from tables import print_table

from ipuplan import InfeasibleBudget, Plan, load_plan, optimize
from ipuplan.facts.plan_facts import plan_facts
from ipuplan.model.build import problem_of
from ipuplan.model.problem import Problem, alive_left_out
from ipuplan.plan.budgets import Budgets
from ipuplan.replan.rewrite import with_budgets, with_derived_fields
from ipuplan.space.scopes import candidate_space
from ipuplan.workbench.synth import repeat_layers, unroll, with_budget_factor

ROOT = Path(__file__).resolve().parent.parent
SCOPES = ["storage", "kernels", "full"]
RESULTS = ROOT / "benchmarks" / "results"
REFERENCE = ROOT / "models" / "vit-so400m-finalist-5.json"


def synthesised(quick: bool) -> list[tuple[str, Plan]]:
    reference = load_plan(REFERENCE)
    tight = with_derived_fields(with_budgets(reference, Budgets(250_000, 80_000, reference.support_reserve_bytes)))
    plans = [
        ("finalist-5, budget 250,000 / interleaved 80,000", tight),
        ("27 layers (budgets x6)", with_budget_factor(repeat_layers(reference, 27), 6.0)),
    ]
    if not quick:
        plans.append(("27 layers x unroll 4 (budgets x6)",
                      with_budget_factor(unroll(repeat_layers(reference, 27), 4), 6.0)))
    return plans


def backend_run(plan: Plan, solver: str, **options) -> dict:
    """One optimize call with a solver backend: its peak (None when it proves infeasibility), fit and time."""
    started = time.perf_counter()
    try:
        result = optimize(plan, solver=solver, **options)
    except InfeasibleBudget:
        return {"peak": None, "fits": False, "status": "infeasible", "seconds": time.perf_counter() - started}
    status = "unchanged" if result.note else result.status.value
    return {"peak": result.after.raw_peak, "fits": result.after.fits_budget, "status": status, "result": result,
            "seconds": time.perf_counter() - started}


def _peak(run: dict) -> int | str:
    return run["status"] if run["peak"] is None else run["peak"]


def scope_floor(problem: Problem) -> int:
    """Every free group at its least, row by row, over every choice of the scope (left-out ones included)."""
    relaxed = problem.relaxation(alive_left_out(problem, None))
    return (relaxed or problem).lower_bound()


def compare(name: str, plan: Plan, seeds: int, time_limit: float, scope: str) -> dict:
    """Greedy, HiGHS and CP-SAT (several seeds) through the same optimize path, on the same candidates."""
    facts = plan_facts(plan)
    problem = problem_of(facts, candidate_space(facts, scope))
    greedy = backend_run(plan, "greedy", scope=scope)
    mip = backend_run(plan, "highs", scope=scope, time_limit=time_limit)
    runs = [backend_run(plan, "cpsat", scope=scope, time_limit=time_limit, seed=seed, workers=2)
            for seed in range(seeds)]
    row = {"plan": name, "values": len(plan.values), "steps": len(plan.steps),
           "candidates": sum(problem.candidate_counts), "input peak": facts.estimate.raw_peak,
           "greedy": _peak(greedy), "greedy fits": greedy["fits"], "HiGHS": _peak(mip),
           "HiGHS s": round(mip["seconds"], 2)}
    if any(run["peak"] is None for run in runs):
        return {**row, "ipuplan": "infeasible (proven)", "lower bound": scope_floor(problem)}
    results = [run["result"] for run in runs]
    best = min(results, key=lambda r: r.after.raw_peak)
    bound = max(r.bound for r in results)
    return {
        **row,
        "ipuplan": best.after.raw_peak,
        "worst seed": max(r.after.raw_peak for r in results),
        "lower bound": scope_floor(problem),
        "floor": absolute_floor(facts),
        "status": best.status.value,
        "gap": f"{(best.after.raw_peak - bound) / best.after.raw_peak:.2%}",
        "left out": best.solve.left_out,
        "build s": round(statistics.median(r.solve.build_seconds for r in results), 3),
        "solve s": round(statistics.median(r.solve.solve_seconds for r in results), 3),
        "first sol s": round(statistics.median(r.solve.first_solution_seconds or 0 for r in results), 3),
    }


def scale_point(copies: int, time_limit: float, scope: str) -> dict:
    plan = with_budget_factor(unroll(load_plan(REFERENCE), copies), 1.5)
    started = time.perf_counter()
    result = optimize(plan, time_limit=time_limit, workers=2, scope=scope)
    total = time.perf_counter() - started
    return {
        "copies": copies,
        "values": len(plan.values),
        "steps": len(plan.steps),
        "free groups": result.free_groups,
        "candidates": result.candidates,
        "steps in model": result.solve.steps_kept,
        "peak": result.after.raw_peak,
        "bound": result.bound,
        "gap": f"{(result.after.raw_peak - result.bound) / result.after.raw_peak:.2%}",
        "status": result.status.value,
        "build s": round(result.solve.build_seconds, 2),
        "solve s": round(result.solve.solve_seconds, 2),
        "total s": round(total, 2),
    }


def plot(scaling: list[dict], path: Path, scope: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 4))
    values = [row["values"] for row in scaling]
    for key in ("build s", "solve s", "total s"):
        axis.plot(values, [row[key] for row in scaling], marker="o", label=key.replace(" s", ""))
    axis.set_xlabel("values in the plan (steps = 0.66 x values)")
    axis.set_ylabel("seconds")
    axis.set_title(f"ipuplan optimize, {scope} scope, 2-core machine")
    axis.grid(True, alpha=0.3)
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer seeds and scaling points")
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--scope", nargs="+", default=["storage", "kernels", "full"], choices=SCOPES)
    parser.add_argument("--scaling-scope", default="kernels", choices=SCOPES)
    arguments = parser.parse_args()
    seeds = 2 if arguments.quick else 3
    named = [(p.stem, load_plan(p)) for p in sorted((ROOT / "models").glob("*.json"))] + synthesised(arguments.quick)
    plans = [{"scope": scope, **compare(name, plan, seeds, arguments.time_limit, scope)}
             for name, plan in named for scope in arguments.scope]
    print_table(plans, f"ipuplan vs baselines per scope ({seeds} seeds, raw peak bytes per tile)")
    copies = [1, 4, 16] if arguments.quick else [1, 4, 16, 32, 57, 76]
    scope = arguments.scaling_scope
    scaling = [scale_point(k, arguments.time_limit, scope) for k in copies]
    print_table(scaling, f"scaling ({scope} scope): unrolled copies of the reference plan (budgets x1.5)")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "run.json").write_text(json.dumps({"plans": plans, "scaling": scaling}, indent=2) + "\n")
    plot(scaling, RESULTS / f"scaling-{scope}.png", scope)
    print(f"\nwrote {RESULTS / 'run.json'} and {RESULTS / f'scaling-{scope}.png'}")


if __name__ == "__main__":
    main()
