"""Issue 36, item 1: is `--time-limit T` a contract? Each run is a fresh `ipuplan optimize --json` process (wall and
RSS end to end: import, load, preparation, solve, rewrite, write), on the reference plan unrolled K times, at
several limits; a run is within when its wall is at most T + max(1 s, 10% of T). Beside it the run's own estimate
of the work it does whatever its limit (`mandatory_seconds_estimate`, `replan.size`) and whether it said so (the
`deadline` phase it prints first when the estimate passes T; with `--json` the phases are not printed, so `said` is
that rule applied to the estimate the run gave).

    .venv/bin/python benchmarks/deadline.py                      # K = 1, 57, 285 at T = 1, 2, 5, 10, 20
    .venv/bin/python benchmarks/deadline.py --unroll 1140 --limits 10 60 --busy

`--busy`: two CPU-bound busy loops run beside every run (a shared build machine; on 2 cores the run then gets
about a third of the CPU). Writes the table to benchmarks/results/deadline[-busy].md, with the 1-minute load
before each run.
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
from tables import busy, head_commit, print_table

REFERENCE = ROOT / "models" / "vit-so400m-finalist-5.json"
RESULTS = ROOT / "benchmarks" / "results"
IPUPLAN = [sys.executable, "-m", "ipuplan"]


def unrolled(copies: int, folder: Path) -> Path:
    if copies == 1:
        return REFERENCE
    path = folder / f"unroll{copies}.json"
    if not path.exists():
        subprocess.run([*IPUPLAN, "synth", str(REFERENCE), "-o", str(path), "--unroll", str(copies)], check=True,
                       capture_output=True)
    return path


def run(plan: Path, values: int, limit: float, folder: Path) -> dict:
    """One optimise run of `plan` (of `values` values), timed from outside."""
    load = os.getloadavg()[0]
    started = time.perf_counter()
    done = subprocess.run(["/usr/bin/time", "-f", "%M", *IPUPLAN, "optimize", str(plan), "-o",
                           str(folder / "out.json"), "--force", "--json", "--time-limit", f"{limit:g}"],
                          capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    summary = json.loads(done.stdout) if done.stdout.strip() else {}
    rss = int(done.stderr.strip().splitlines()[-1]) // 1024 if done.stderr.strip() else 0
    estimate = summary.get("mandatory_seconds_estimate")
    return {"values": values, "T s": limit, "wall s": round(wall, 2),
            "within": wall <= limit + max(1.0, 0.1 * limit), "estimate s": estimate,
            "said": estimate is not None and estimate > limit, "exit": done.returncode, "status": summary.get("status"),
            "gap": None if summary.get("gap") is None else f"{summary['gap']:.2%}",
            "solve s": round(summary.get("phase_seconds", {}).get("solve", 0.0), 2), "RSS MB": rss,
            "load": round(load, 1)}


def _values(plan: Path) -> int:
    return len(json.loads(plan.read_text())["timeline"]["values"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--unroll", type=int, nargs="+", default=[1, 57, 285])
    parser.add_argument("--limits", type=float, nargs="+", default=[1, 2, 5, 10, 20])
    parser.add_argument("--busy", action="store_true")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as scratch, busy(args.busy):
        folder = Path(scratch)
        for copies in args.unroll:
            plan = unrolled(copies, folder)
            values = _values(plan)
            for limit in args.limits:
                rows.append(run(plan, values, limit, folder))
                print(rows[-1], flush=True)
    title = f"deadline: --time-limit T end to end, {'busy (2 busy loops beside)' if args.busy else 'alone'}"
    print_table(rows, title)
    RESULTS.mkdir(exist_ok=True)
    header = list(rows[0])
    command = " ".join(["benchmarks/deadline.py", *sys.argv[1:]])
    lines = [f"# {title}", "", f"`.venv/bin/python {command}` (written by it), source of {head_commit()}.", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(row[k]) for k in header) + " |" for row in rows]
    (RESULTS / f"deadline{'-busy' if args.busy else ''}.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
