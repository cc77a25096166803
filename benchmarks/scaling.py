"""Scaling (issues 11 and 20): ipuplan against greedy (and HiGHS) on the same candidates, 176 to 200,640 values.

Each instance is the reference plan unrolled K times (`ipuplan synth --unroll K`), under its own budgets
("loose") and under the budgets of issue 11 ("tight": budget 234,864, interleaved 91,776, reserve 25,584).
Every run is a fresh `ipuplan optimize --json` process with default settings but the solver, so the wall
time and the peak RSS are end to end (load, facts, candidates, solve, rewrite, re-check, write); its exit code
is kept (0 written, 3 the budgets cannot be met; 70 would be a crash) and its stages' seconds (`phase_seconds`).

    .venv/bin/python benchmarks/scaling.py                          # 176 to 200,640 values, cpsat and greedy
    .venv/bin/python benchmarks/scaling.py --unroll 1 57 --solvers cpsat highs greedy

Prints one table, the fitted growth of wall and RSS with the values (least squares of log wall / log RSS over
log values, cpsat tight, 10k values and up: an exponent <= 1.1 is linear growth), and issue 20's targets met or
not; writes benchmarks/results/scaling.json and scaling.png (wall time and gap per instance and solver). Targets
(issue 20): 50,160 values tight optimal in <= 15 s and <= 1 GB; 200,640 values tight within 1% of the bound in
<= 60 s and <= 4 GB; every size exit 0 or 3; exponents <= 1.1.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from tables import busy, cell, head_commit, print_table

REFERENCE = ROOT / "models" / "vit-so400m-finalist-5.json"
RESULTS = ROOT / "benchmarks" / "results"
TIGHT = ["--budget", "234864", "--interleaved-budget", "91776", "--support-reserve", "25584"]
SOLVERS = ("cpsat", "highs", "greedy")
TITLE = "scaling: reference plan unrolled, default settings, one run each (wall and RSS end to end)"


def synthesised(unroll: int, directory: Path) -> Path:
    """The reference plan unrolled `unroll` times (the reference itself for 1)."""
    if unroll == 1:
        return REFERENCE
    path = directory / f"unroll{unroll}.json"
    subprocess.run([sys.executable, "-m", "ipuplan", "synth", str(REFERENCE), "--unroll", str(unroll), "-o", str(path)],
                   check=True, capture_output=True)
    return path


def measured(command: list[str]) -> tuple[dict, float, int, int]:
    """(the --json object, wall seconds, peak RSS in MB, exit code) of one fresh process."""
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    try:
        result = json.loads(output)
    except json.JSONDecodeError:
        result = {"error": f"no JSON on stdout ({len(output)} bytes)"}
    return result, wall, usage.ru_maxrss // 1024, os.waitstatus_to_exitcode(status)


def run(plan: Path, budgets: str, solver: str, directory: Path) -> dict:
    out = directory / f"{plan.stem}-{budgets}-{solver}.json"
    command = [sys.executable, "-m", "ipuplan", "optimize", str(plan), "-o", str(out), "--force", "--json",
               "--solver", solver, *(TIGHT if budgets == "tight" else [])]
    result, wall, rss, code = measured(command)
    out.unlink(missing_ok=True)  # 200k values write 225 MB
    if "raw_peak" not in result:
        return {"solver": solver, "exit": code, "status": result.get("error", "error"), "wall s": wall, "RSS MB": rss}
    gap = None if result["gap"] is None else round(100 * result["gap"], 2)
    stages = result.get("phase_seconds", {})
    return {"solver": solver, "exit": code, "status": result["status"], "fits": result["fits_after"],
            "peak": result["raw_peak"], "bound": result["bound"], "gap %": gap, "wall s": wall,
            "prepare s": sum(stages.get(name, 0.0) for name in ("load", "analyse", "candidates", "problem")),
            "solve s": stages.get("solve", result["solve_seconds"]),
            "rewrite s": stages.get("rewrite", 0.0) + stages.get("write", 0.0), "RSS MB": rss,
            **({"entries": result["model_entries"], "windows": result["bound_windows"]} if solver == "cpsat" else {})}


def exponent(rows: list[dict], figure: str) -> float | None:
    """The fitted growth of `figure` with the values (log-log least squares) over cpsat's tight runs of 10k values
    and more: 1 is linear."""
    points = [(r["values"], r[figure]) for r in rows if r["solver"] == "cpsat" and r["budgets"] == "tight"
              and r["values"] >= 10_000 and r.get(figure)]
    if len(points) < 2:
        return None
    values, figures = (np.log(np.array(column, dtype=float)) for column in zip(*points))
    return float(np.polyfit(values, figures, 1)[0])


def targets(rows: list[dict]) -> list[dict]:
    """Issue 20's targets, each with what this run measured."""
    tight = {r["values"]: r for r in rows if r["solver"] == "cpsat" and r["budgets"] == "tight"}
    found = []
    if 50_160 in tight:
        r = tight[50_160]
        found.append({"target": "50,160 tight: optimal, <= 15 s, <= 1 GB",
                      "measured": f"{r['status']}, {r['wall s']:.1f} s, {r['RSS MB']:,} MB",
                      "met": r["status"] == "optimal" and r["wall s"] <= 15 and r["RSS MB"] <= 1024})
    if 200_640 in tight:
        r = tight[200_640]
        gap = r.get("gap %")
        found.append({"target": "200,640 tight: within 1% of the bound, <= 60 s, <= 4 GB",
                      "measured": f"gap {gap}%, {r['wall s']:.1f} s, {r['RSS MB']:,} MB",
                      "met": gap is not None and gap <= 1 and r["wall s"] <= 60 and r["RSS MB"] <= 4096})
    found.append({"target": "every run exits 0 or 3", "measured": ", ".join(sorted({str(r["exit"]) for r in rows})),
                  "met": all(r["exit"] in (0, 3) for r in rows)})
    for figure in ("wall s", "RSS MB"):
        fitted = exponent(rows, figure)
        found.append({"target": f"{figure.split()[0]} grows no faster than linearly (exponent <= 1.1)",
                      "measured": "-" if fitted is None else f"{fitted:.2f}",
                      "met": fitted is not None and fitted <= 1.1})
    return found


def plot(rows: list[dict], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot (pip install -e '.[bench]')")
        return
    figure, (wall, gap) = plt.subplots(1, 2, figsize=(11, 4))
    for budgets in ("loose", "tight"):
        for solver in SOLVERS:
            points = [r for r in rows if r["budgets"] == budgets and r["solver"] == solver]
            style = "-" if budgets == "loose" else "--"
            wall.plot([r["values"] for r in points], [r["wall s"] for r in points], style, marker="o",
                      label=f"{solver}, {budgets}")
            gap.plot([r["values"] for r in points], [r.get("gap %") if r.get("gap %") is not None else float("nan")
                                                     for r in points], style, marker="o", label=f"{solver}, {budgets}")
    wall.set(xlabel="values", ylabel="wall seconds, end to end", xscale="log", title="time")
    gap.set(xlabel="values", ylabel="gap to the proven bound, %", xscale="log", title="quality")
    wall.axhline(15, color="grey", linewidth=0.5)
    wall.axhline(60, color="grey", linewidth=0.5)
    wall.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--unroll", type=int, nargs="+", default=[1, 57, 142, 285, 570, 1140])
    parser.add_argument("--solvers", nargs="+", default=["cpsat", "greedy"], choices=SOLVERS)
    parser.add_argument("--busy", action="store_true",
                        help="two CPU-bound loops beside every run (issue 36); results to scaling-busy.*")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as scratch, busy(args.busy):
        directory = Path(scratch)
        for unroll in args.unroll:
            plan = synthesised(unroll, directory)
            values = len(json.loads(plan.read_text())["timeline"]["values"])
            for budgets in ("loose", "tight"):
                for solver in args.solvers:
                    row = {"values": values, "budgets": budgets, **run(plan, budgets, solver, directory),
                           "load": round(os.getloadavg()[0], 1)}
                    print(json.dumps(row), flush=True)
                    rows.append(row)
    title = TITLE + (", busy (two CPU-bound loops beside)" if args.busy else ", alone")
    print_table(rows, title)
    print_table(targets(rows), "issue 20's targets")
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = "scaling-busy" if args.busy else "scaling"
    (RESULTS / f"{name}.json").write_text(json.dumps(rows, indent=1))
    (RESULTS / f"{name}.md").write_text(markdown(rows, title, "".join(f" {arg}" for arg in sys.argv[1:])))
    plot(rows, RESULTS / f"{name}.png")


def markdown(rows: list[dict], title: str = TITLE, flags: str = "") -> str:
    """The run's table and issue 20's targets as markdown (results/scaling.md)."""
    def table(items: list[dict]) -> list[str]:
        headers = list(max(items, key=len))
        return ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers),
                *("| " + " | ".join(cell(item.get(h, "")) for h in headers) + " |" for item in items)]

    command = f"`.venv/bin/python benchmarks/scaling.py{flags}` (written by it), source of {head_commit()}."
    return "\n".join([f"# {title}", "", command, "",
                      *table(rows), "", "## Issue 20's targets", "", *table(targets(rows)), ""])


if __name__ == "__main__":
    main()
