"""Issue 5 figures: exploring 8 synthesised finalist scopes with --jobs 1 and --jobs 2, in one run.

Run:  .venv/bin/python benchmarks/explore.py

Writes the 8 scopes to a temporary folder, runs the CLI (`ipuplan explore DIR -o OUT --force`)
once with each job count, prints both wall times and the ranked table of the last run.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ipuplan import load_plan, write_plan
from ipuplan.workbench.synth import repeat_layers, unroll, with_budget_factor, with_scope

ROOT = Path(__file__).resolve().parent.parent
SCOPES = [  # (name, layers, unrolled copies, budget factor)
    ("finalist-1", 2, 6, 1.5),
    ("finalist-2", 4, 4, 2.5),
    ("finalist-3", 6, 4, 2.5),
    ("finalist-4", 2, 12, 1.5),
    ("finalist-5", 2, 1, 1.0),
    ("finalist-6", 8, 3, 3.0),
    ("finalist-7", 12, 2, 3.0),
    ("finalist-8", 2, 16, 1.5),
]


def write_scopes(folder: Path) -> None:
    reference = load_plan(ROOT / "models" / "vit-so400m-finalist-5.json")
    for name, layers, copies, factor in SCOPES:
        plan = with_budget_factor(unroll(repeat_layers(reference, layers), copies), factor)
        write_plan(with_scope(plan, name), folder / f"{name}.json")


def timed_explore(folder: Path, out: Path, jobs: int) -> tuple[float, str]:
    started = time.perf_counter()
    process = subprocess.run(
        [sys.executable, "-m", "ipuplan.cli", "explore", str(folder), "-o", str(out), "--jobs", str(jobs), "--force"],
        check=False, capture_output=True,
        text=True,
        env={"COLUMNS": "150", "PATH": ""},
    )
    if process.returncode != 0:
        raise SystemExit(f"explore failed ({process.returncode}): {process.stderr}")
    return time.perf_counter() - started, process.stdout


def main() -> None:
    with tempfile.TemporaryDirectory() as temporary:
        folder, out = Path(temporary, "scopes"), Path(temporary, "out")
        folder.mkdir()
        write_scopes(folder)
        sizes = [(p.stem, len(load_plan(p).values), len(load_plan(p).steps)) for p in sorted(folder.glob("*.json"))]
        print("scopes:", ", ".join(f"{name} ({values} values, {steps} steps)" for name, values, steps in sizes))
        walls = {jobs: timed_explore(folder, out, jobs) for jobs in (1, 2)}
    for jobs, (wall, _) in walls.items():
        print(f"--jobs {jobs}: {wall:.2f} s wall (8 scopes, fresh process, solver workers per job = 2 // jobs)")
    print(walls[2][1])


if __name__ == "__main__":
    main()
