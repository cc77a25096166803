"""Capacity per scope (issue 19's table): the reference plan optimised, and how many layers fit on the real chip.

A benchmark, not a test: it runs the CLI in fresh processes (minutes in all) and writes what it measured.

Run:  .venv/bin/python benchmarks/capacity.py [--scope S ...] [--time-limit S]

Per scope (`storage`, `kernels`, `full`, and the opt-in `program`):
1. the reference plan, `ipuplan optimize models/vit-so400m-finalist-5.json --workers 1 --scope S`: raw peak, bound,
   status and the seconds end to end (a fresh process: load, solve, rewrite, write);
2. capacity: the largest N for which `ipuplan synth models/vit-so400m-finalist-5.json --layers N`, optimised with
   `--workers 1` on the real chip's budgets (586,960 total, 424,880 interleaved, 49,152 support reserve), fits
   (exit code 0), and the exit code of N + 1 (3: the budgets cannot be met) with its error line (a proven
   conflict names its step and what it needs; "no layout ... found within --time-limit" is no proof). N is found
   by doubling, then halving the interval: a plan of more layers holds more, so what fits is every N up to the
   largest (from 2, the reference plan's own layers; 1 when not even 2 fit).
Results: printed, and written to benchmarks/results/capacity.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tables import cell, print_table

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "models" / "vit-so400m-finalist-5.json"
RESULTS = ROOT / "benchmarks" / "results" / "capacity.md"
CHIP = ("--budget", "586960", "--interleaved-budget", "424880", "--support-reserve", "49152")
SCOPES = ("storage", "kernels", "full", "program")


def ipuplan(*arguments: str) -> subprocess.CompletedProcess:
    """One CLI run in a fresh process; its exit code is read, not raised (3 is an answer here)."""
    return subprocess.run([sys.executable, "-m", "ipuplan", *arguments], check=False, capture_output=True, text=True)


def reference(scope: str, time_limit: float, folder: Path) -> dict:
    """The reference plan optimised in `scope`, end to end in a fresh process."""
    started = time.perf_counter()
    done = ipuplan("optimize", str(REFERENCE), "-o", str(folder / f"reference-{scope}.json"), "--force", "--json",
                   "--workers", "1", "--scope", scope, "--time-limit", str(time_limit))
    seconds = time.perf_counter() - started
    summary = json.loads(done.stdout)
    return {"scope": scope, "raw peak": summary.get("raw_peak"), "bound": summary.get("bound"),
            "status": summary.get("status_in_words", summary.get("status")), "seconds": round(seconds, 2)}


def layers_exit(layers: int, scope: str, time_limit: float, folder: Path) -> tuple[int, str]:
    """The exit code of optimising the reference plan synthesised with `layers` layers on the chip's budgets, and
    its one error line (why it does not fit: a proven conflict, or no claim)."""
    plan = folder / f"layers-{layers}.json"
    if not plan.exists():
        ipuplan("synth", str(REFERENCE), "--layers", str(layers), "-o", str(plan), "--force").check_returncode()
    done = ipuplan("optimize", str(plan), "-o", str(folder / f"out-{scope}-{layers}.json"), "--force", "--json",
                   "--workers", "1", "--scope", scope, "--time-limit", str(time_limit), *CHIP)
    return done.returncode, json.loads(done.stdout or "{}").get("error") or ""


FEWEST = 2
"""Layers of the reference plan itself: `synth --layers` asks for at least as many."""


def largest(fits: Callable[[int], bool]) -> int:
    """The largest N >= FEWEST with fits(N) (FEWEST - 1 when none), when fits is true up to some N and false after."""
    low, high = FEWEST - 1, FEWEST
    while fits(high):
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low


def capacity(scope: str, time_limit: float, folder: Path) -> dict:
    codes: dict[int, tuple[int, str]] = {}

    def fits(layers: int) -> bool:
        if layers not in codes:
            codes[layers] = layers_exit(layers, scope, time_limit, folder)
        return codes[layers][0] == 0

    started = time.perf_counter()
    most = largest(fits)
    fits(most + 1)
    code, why = codes[most + 1]
    return {"layers that fit": most, "next": most + 1, "exit code of next": code, "why next does not fit": why,
            "runs": len(codes), "capacity seconds": round(time.perf_counter() - started, 1)}


def markdown(rows: list[dict]) -> str:
    headers = list(dict.fromkeys(h for row in rows for h in row))
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(row.get(h, "")) for h in headers) + " |" for row in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scope", action="append", choices=SCOPES, help="a scope (repeatable; default: all four)")
    parser.add_argument("--time-limit", type=float, default=10.0)
    arguments = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as name:
        for scope in arguments.scope or SCOPES:
            row = reference(scope, arguments.time_limit, Path(name))
            row.update(capacity(scope, arguments.time_limit, Path(name)))
            rows.append(row)
            print_table([row])
    print_table(rows, "capacity per scope (--workers 1; chip budgets 586,960 / 424,880 / 49,152)")
    RESULTS.write_text("# Capacity per scope\n\n`.venv/bin/python benchmarks/capacity.py` (a benchmark: CLI runs in "
                       "fresh processes, `--workers 1`, the real chip's budgets 586,960 total / 424,880 interleaved / "
                       "49,152 support reserve for the layer counts).\n\n" + markdown(rows) + "\n")


if __name__ == "__main__":
    main()
