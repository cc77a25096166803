"""Scaling (issue 11): ipuplan against HiGHS and greedy on the same candidates, 176 to 50,160 values.

Each instance is the reference plan unrolled K times (`ipuplan synth --unroll K`), under its own budgets
("loose") and under the budgets of issue 11 ("tight": budget 234,864, interleaved 91,776, reserve 25,584).
Every run is a fresh `ipuplan optimize --json` process with default settings but the solver, so the wall
time and the peak RSS are end to end (load, facts, candidates, solve, rewrite, re-check, write).

    .venv/bin/python benchmarks/scaling.py                  # 176 / 10,032 / 24,992 / 50,160 values
    .venv/bin/python benchmarks/scaling.py --unroll 1 57    # a quick subset

Prints one table and writes benchmarks/results/scaling.json and scaling.png (wall time and gap per
instance and solver). Targets: 50,160 values with tight budgets fit within 1% of the bound in <= 30 s
and <= 1 GB, no slower than HiGHS; 10,032 values optimal in <= 10 s; the reference plan <= 1.5 s.
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from tables import print_table

REFERENCE = ROOT / "models" / "vit-so400m-finalist-5.json"
RESULTS = ROOT / "benchmarks" / "results"
TIGHT = ["--budget", "234864", "--interleaved-budget", "91776", "--support-reserve", "25584"]
SOLVERS = ("cpsat", "highs", "greedy")


def synthesised(unroll: int, directory: Path) -> Path:
    """The reference plan unrolled `unroll` times (the reference itself for 1)."""
    if unroll == 1:
        return REFERENCE
    path = directory / f"unroll{unroll}.json"
    subprocess.run([sys.executable, "-m", "ipuplan", "synth", str(REFERENCE), "--unroll", str(unroll), "-o", str(path)],
                   check=True, capture_output=True)
    return path


def measured(command: list[str]) -> tuple[dict, float, int]:
    """(the --json object, wall seconds, peak RSS in MB) of one fresh process."""
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    return json.loads(output), wall, usage.ru_maxrss // 1024


def run(plan: Path, budgets: str, solver: str, directory: Path) -> dict:
    out = directory / f"{plan.stem}-{budgets}-{solver}.json"
    command = [sys.executable, "-m", "ipuplan", "optimize", str(plan), "-o", str(out), "--force", "--json",
               "--solver", solver, *(TIGHT if budgets == "tight" else [])]
    result, wall, rss = measured(command)
    if "raw_peak" not in result:
        return {"solver": solver, "status": result.get("error", "error"), "wall s": wall, "RSS MB": rss}
    gap = None if result["gap"] is None else round(100 * result["gap"], 2)
    return {"solver": solver, "status": result["status"], "fits": result["fits_after"], "peak": result["raw_peak"],
            "bound": result["bound"], "gap %": gap, "wall s": wall, "solve s": result["solve_seconds"], "RSS MB": rss,
            **({"entries before": result["model_entries_before"], "entries": result["model_entries"],
                "windows": result["bound_windows"]} if solver == "cpsat" else {})}


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
    wall.axhline(30, color="grey", linewidth=0.5)
    wall.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--unroll", type=int, nargs="+", default=[1, 57, 142, 285])
    parser.add_argument("--solvers", nargs="+", default=list(SOLVERS), choices=SOLVERS)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        for unroll in args.unroll:
            plan = synthesised(unroll, directory)
            values = len(json.loads(plan.read_text())["timeline"]["values"])
            for budgets in ("loose", "tight"):
                for solver in args.solvers:
                    row = {"values": values, "budgets": budgets, **run(plan, budgets, solver, directory)}
                    print(json.dumps(row), flush=True)
                    rows.append(row)
    print_table(rows, "scaling: reference plan unrolled, default settings, one run each (wall and RSS end to end)")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "scaling.json").write_text(json.dumps(rows, indent=1))
    plot(rows, RESULTS / "scaling.png")


if __name__ == "__main__":
    main()
