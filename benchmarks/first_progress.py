"""How soon `ipuplan optimize` says something: seconds from process start to its first progress line.

Run:  .venv/bin/python benchmarks/first_progress.py [--copies 1 12 57]

Plans are the reference unrolled K times (`ipuplan synth --unroll K`); the target is under 1 s on
any plan. Also prints when each later phase (analyse, candidates, solve) began.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tables import print_table

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "models" / "vit-so400m-finalist-5.json"
IPUPLAN = [sys.executable, "-m", "ipuplan"]


def phases(plan: Path, out: Path) -> dict[str, float]:
    """Seconds from the process start to each phase line (read as it arrives)."""
    started = time.perf_counter()
    process = subprocess.Popen([*IPUPLAN, "optimize", str(plan), "-o", str(out), "--force", "--time-limit", "5"],
                               stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    seen: dict[str, float] = {}
    for line in process.stderr:
        name = line.split()[0] if line.startswith("  ") else ""
        if name in ("load", "analyse", "candidates", "solve") and name not in seen:
            seen[name] = time.perf_counter() - started
    process.wait()
    seen["end"] = time.perf_counter() - started
    return seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, nargs="+", default=[1, 12, 57])
    arguments = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for copies in arguments.copies:
            plan = Path(folder, f"unroll{copies}.json")
            subprocess.run([*IPUPLAN, "synth", str(REFERENCE), "-o", str(plan), "--unroll", str(copies),
                            "--budget-factor", "1.5"], check=True, capture_output=True)
            seen = phases(plan, Path(folder, "out.json"))
            values = 176 * copies
            rows.append({"values": values, **{f"{k} s": round(v, 2) for k, v in seen.items()}})
    print_table(rows, "seconds from process start to each phase line of ipuplan optimize")


if __name__ == "__main__":
    main()
