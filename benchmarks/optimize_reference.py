"""ipuplan per scope (storage, kernels, full) against the input, a greedy baseline and the lower bound, end to end.

Run:  .venv/bin/python benchmarks/optimize_reference.py [PLAN ...] [--repeat N]

For each plan it times the whole CLI (`ipuplan optimize IN -o OUT --workers 1`, a fresh
process, end to end), checks that the output differs from the input only where it must,
and prints one table row. Deterministic mode is run twice and the outputs compared. Each run
is timed three ways (medians): with no exchange price kept (`IPUPLAN_CACHE_DIR=off`, a first
run), with the prices a first run kept (a store of the benchmark's own: a second run of the
plan), and with `--exact-exchange never`, without and with the prices kept (each ratio divides by
the `never` run of the same store); and whether the kept prices change the output.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from measures import unneeded_changes
from tables import print_table

from ipuplan import load_plan
from ipuplan.facts.estimate import estimate
from ipuplan.facts.plan_facts import plan_facts
from ipuplan.model.build import problem_of
from ipuplan.model.exact import exact_problem
from ipuplan.plan.layout import format_layout
from ipuplan.solvers.greedy import greedy_choice
from ipuplan.space.scopes import candidate_space

ROOT = Path(__file__).resolve().parent.parent


def cli_run(plan: Path, output: Path, *extra: str, cache: str = "off") -> tuple[float, dict]:
    started = time.perf_counter()
    process = subprocess.run(
        [sys.executable, "-m", "ipuplan.cli", "optimize", str(plan), "-o", str(output), "--json", "--force", *extra],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "IPUPLAN_CACHE_DIR": cache},
    )
    return time.perf_counter() - started, json.loads(process.stdout)


def median(walls: list[float]) -> float:
    return round(sorted(walls)[len(walls) // 2], 2)


def row(plan_path: Path, repeat: int, scope: str) -> dict:
    plan = load_plan(plan_path)
    facts = plan_facts(plan)
    space = candidate_space(facts, scope)
    problem = problem_of(facts, space)
    greedy = problem.usage(greedy_choice(problem)).peak
    with tempfile.TemporaryDirectory() as folder:
        out_a, out_b, out_c = Path(folder, "a.json"), Path(folder, "b.json"), Path(folder, "c.json")
        options, store = ("--workers", "1", "--scope", scope), str(Path(folder, "store"))
        walls, kept, never, never_kept = [], [], [], []
        for _ in range(repeat):
            wall, summary = cli_run(plan_path, out_a, *options)
            walls.append(wall)
        cli_run(plan_path, out_b, *options)
        digests = {hashlib.sha256(p.read_bytes()).hexdigest() for p in (out_a, out_b)}
        cli_run(plan_path, out_c, *options, cache=store)  # keeps the prices
        for _ in range(repeat):
            kept.append(cli_run(plan_path, out_c, *options, cache=store)[0])
            never.append(cli_run(plan_path, out_b, *options, "--exact-exchange", "never")[0])
            never_kept.append(cli_run(plan_path, out_b, *options, "--exact-exchange", "never", cache=store)[0])
        same_with_kept = out_c.read_bytes() == out_a.read_bytes()
        rewritten = load_plan(out_a)
    before = estimate(plan)
    chosen = tuple(
        next(c for c, cand in enumerate(g.candidates)
             if all(format_layout(x) == rewritten.values[m].layout for m, x in zip(g.members, cand.layouts)))
        for g in space.free
    )
    return {
        "plan": plan_path.name,
        "scope": scope,
        "values": len(plan.values),
        "steps": len(plan.steps),
        "free groups": len(space.free),
        "candidates": space.candidate_count,
        "input peak": before.raw_peak,
        "greedy": greedy,
        "ipuplan": estimate(rewritten).raw_peak,
        "lower bound": problem.lower_bound(),
        "status": summary["status"],
        "gap": f"{summary['gap']:.2%}",
        "values changed": summary["values_changed"],
        "exchange": summary["exchange_bytes_after"],
        "exchange bound": summary["model_exchange_bound"],
        "changes not needed": len(unneeded_changes(exact_problem(facts, space, problem).problem, chosen)),
        "build s": summary["build_seconds"],
        "solve s": summary["solve_seconds"],
        "first sol s": summary["first_solution_seconds"],
        "end-to-end s (median)": median(walls),
        "prices kept s": median(kept),
        "exact never s": median(never),
        "first / never": round(median(walls) / median(never), 2),
        "never, kept s": median(never_kept),
        "kept / never kept": round(median(kept) / median(never_kept), 2),
        "same with kept": "yes" if same_with_kept else "NO",
        "deterministic": "yes" if len(digests) == 1 else "NO",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plans", nargs="*", type=Path, default=[ROOT / "models" / "vit-so400m-finalist-5.json"])
    parser.add_argument("--repeat", type=int, default=3, help="end-to-end runs per plan (median reported)")
    parser.add_argument("--scope", nargs="+", default=["storage", "kernels", "full"], help="freedom levels to compare")
    arguments = parser.parse_args()
    rows = [row(path, arguments.repeat, scope) for path in arguments.plans for scope in arguments.scope]
    print_table(rows)
    results = ROOT / "benchmarks" / "results"
    results.mkdir(exist_ok=True)
    (results / "optimize_reference.json").write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
