"""Where the memory of a large optimisation goes (issue 11's 1 GB target): resident set size at each phase.

    .venv/bin/python benchmarks/memory_stages.py [--unroll 285] [--tight]

Synthesises the reference plan unrolled K times (default 285: 50,160 values), then runs `ipuplan.optimize`
in this process and prints, at the load and at each phase as it starts, the current RSS and its high-water
mark (`/proc/self/status`, Linux). What stays resident after the load is the pydantic plan; the rise to the
solve is the candidate space and the `Problem`'s step rows; the rise to the end is the rewritten plan and its
re-derived facts, held next to the input's.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from tables import print_table

from ipuplan import load_plan
from ipuplan.replan.pipeline import optimize

TIGHT = {"budget": 234864, "interleaved_budget": 91776, "support_reserve": 25584}


def resident() -> tuple[int, int]:
    """(current RSS, high-water RSS) in MB."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) // 1024, int(fields["VmHWM"].split()[0]) // 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--unroll", type=int, default=285)
    parser.add_argument("--tight", action="store_true", help="issue 11's budgets instead of the plan's own")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "plan.json"
        # Synthesised in another process, so that this one's high-water mark is the optimiser's alone.
        subprocess.run([sys.executable, "-m", "ipuplan", "synth", str(ROOT / "models" / "vit-so400m-finalist-5.json"),
                        "--unroll", str(args.unroll), "-o", str(path)], check=True, capture_output=True)
        rows = []
        started = time.perf_counter()

        def mark(stage: str) -> None:
            now, high = resident()
            rows.append({"stage": stage, "seconds": time.perf_counter() - started, "RSS MB": now,
                         "high-water MB": high})

        mark("start")
        plan = load_plan(path)
        mark(f"loaded ({len(plan.values):,} values)")
        optimize(plan, on_phase=lambda name, detail: mark(name), **(TIGHT if args.tight else {}))
        mark("done")
    print_table(rows, "memory by stage of ipuplan.optimize")


if __name__ == "__main__":
    main()
