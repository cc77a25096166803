"""Issue 34, item 1: how long the reference plan takes with default settings, by how it is run, and the floor under it.

Run:  .venv/bin/python benchmarks/interactive.py [PLAN] [--repeat N] [--results benchmarks/results/interactive.md]

Rows (medians of `--repeat` fresh processes, interleaved so that load drifts alike):
- the floor every command pays before it reads a plan: the interpreter and the imports an optimise run needs
  (numpy, pydantic, typer, OR-Tools, ipuplan), alone and without ipuplan's own;
- `ipuplan optimize` with default settings and with `--workers 1`, each with no exchange price kept (a plan met for
  the first time), with the prices a first run kept (`IPUPLAN_CACHE_DIR`, a store of the benchmark's own), and with
  `--exact-exchange never` without and with the prices kept (what "x never" divides by: the run of the same
  settings and store);
- the library (`ipuplan.optimize`, then the plan dumped and its exchange counted, what the CLI writes and says) called
  in one process: its first call, with and without kept prices, and the median of its next calls: a compiler pipeline
  that keeps the library loaded pays these, not the process.
Every run's output but the `never` runs' must be the same bytes; the targets (<= 1.0 s end to end, <= 1.15x the
`never` run of the same settings) are checked against the CLI rows (the API's against the default's `never`).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tables import cell, print_table

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "models" / "vit-so400m-finalist-5.json"
IMPORTS = {
    "third-party imports (numpy, pydantic, typer, OR-Tools)":
        "import numpy, pydantic, typer, rich.console, ortools.sat.python.cp_model",
    "every import of an optimise run": "import ipuplan.cli, ipuplan.replan.pipeline",
}
SETTINGS = {"default settings": (), "--workers 1": ("--workers", "1")}
"""The CLI's settings timed: the default (the workers this machine gives: with two, the exact exchange is priced in
two processes), and one worker (one core; the same output bytes)."""
API = """
import sys, time
from ipuplan import dump_plan, load_plan, optimize
from ipuplan.replan.options import OptimizeOptions
walls = []
for _ in range(int(sys.argv[2])):
    started = time.perf_counter()
    result = optimize(load_plan(sys.argv[1]), OptimizeOptions(workers=1))
    text, exchange = dump_plan(result.plan), result.exchange_after
    walls.append(time.perf_counter() - started)
print(" ".join(f"{wall:.4f}" for wall in walls))
"""


def timed(command: list[str], cache: str) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, env={**os.environ, "IPUPLAN_CACHE_DIR": cache})
    return time.perf_counter() - started


def api_calls(plan: Path, calls: int, cache: str) -> list[float]:
    done = subprocess.run([sys.executable, "-c", API, str(plan), str(calls)], check=True, capture_output=True,
                          text=True, env={**os.environ, "IPUPLAN_CACHE_DIR": cache})
    return [float(wall) for wall in done.stdout.split()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plan", nargs="?", type=Path, default=REFERENCE)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--results", type=Path, help="also write the table here (markdown)")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        store, outputs = str(Path(folder, "store")), Path(folder)
        runs = {}
        for settings, extra in SETTINGS.items():
            cli = [sys.executable, "-m", "ipuplan", "optimize", str(arguments.plan), "--force", *extra, "-o"]
            name = "-".join(extra) or "default"
            runs |= {
                f"CLI {settings}, no price kept": (cli + [str(outputs / f"first{name}.json")], "off"),
                f"CLI {settings}, prices kept by an earlier run": (cli + [str(outputs / f"kept{name}.json")], store),
                f"CLI {settings}, --exact-exchange never": (cli + [str(outputs / f"never{name}.json"),
                                                               "--exact-exchange", "never"], "off"),
                f"CLI {settings}, --exact-exchange never, prices kept": (
                    cli + [str(outputs / f"never-kept{name}.json"), "--exact-exchange", "never"], store),
            }
        timed(runs[f"CLI {next(iter(SETTINGS))}, prices kept by an earlier run"][0], store)  # keeps the prices
        walls: dict[str, list[float]] = {name: [] for name in [*IMPORTS, *runs]}
        api: dict[str, list[float]] = {"first": [], "first kept": [], "next": []}
        for _ in range(arguments.repeat):
            for name, code in IMPORTS.items():
                walls[name].append(timed([sys.executable, "-c", code], "off"))
            for name, (command, cache) in runs.items():
                walls[name].append(timed(command, cache))
            calls = api_calls(arguments.plan, 4, "off")
            api["first"].append(calls[0])
            api["next"].extend(calls[1:])
            api["first kept"].append(api_calls(arguments.plan, 1, store)[0])
        digests = {hashlib.sha256(path.read_bytes()).hexdigest()[:12] for path in outputs.glob("*.json")
                   if not path.name.startswith("never")}
    median = {name: statistics.median(found) for name, found in walls.items()}

    def never(name: str) -> float:
        """The `--exact-exchange never` run of the row's settings (the default's for the others), with prices kept
        where the row has them (the never run too reads the proxy's prices and the plans' exchange from the store)."""
        settings = next((s for s in SETTINGS if name.startswith(f"CLI {s},")), next(iter(SETTINGS)))
        kept = ", prices kept" if "kept" in name and "no price kept" not in name else ""
        return median[f"CLI {settings}, --exact-exchange never{kept}"]

    rows = [{"run": name, "median s": round(median[name], 2), "x never": round(median[name] / never(name), 2),
             "<= 1.0 s": median[name] <= 1.0} for name in median]
    for name, key in (("API, first call in a process, no price kept", "first"),
                      ("API, first call in a process, prices kept", "first kept"),
                      ("API, every next call in the process", "next")):
        found = statistics.median(api[key])
        rows.append({"run": name, "median s": round(found, 2), "x never": round(found / never(name), 2),
                     "<= 1.0 s": found <= 1.0})
    print_table(rows)
    said = (f"load {os.getloadavg()[0]:.1f}; outputs {'the same bytes' if len(digests) == 1 else 'DIFFER'} "
            f"({', '.join(sorted(digests))})")
    print(said)
    if arguments.results:
        write_markdown(arguments.results, rows, f"`benchmarks/interactive.py --repeat {arguments.repeat}` on "
                       f"{arguments.plan.name}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {said}.")


def write_markdown(path: Path, rows: list[dict], caption: str) -> None:
    headers = list(max(rows, key=len))
    lines = [f"# {__doc__.splitlines()[0]}", "", caption, "", "| " + " | ".join(headers) + " |",
             "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(row.get(h, "")) for h in headers) + " |" for row in rows]
    path.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
