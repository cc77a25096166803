"""ipuplan as a step of a compiler pipeline: load a plan, re-plan it, keep it if it fits.

Run from the repository root:  .venv/bin/python examples/pipeline.py [PLAN] [--budget BYTES]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import ipuplan

ROOT = Path(__file__).resolve().parent.parent


def replan(path: Path, budget: int | None, interleaved_budget: int | None) -> ipuplan.OptimizeResult | None:
    plan = ipuplan.load_plan(path)
    options = ipuplan.OptimizeOptions(budget=budget, interleaved_budget=interleaved_budget, time_limit=10, workers=1)
    try:
        result = ipuplan.optimize(plan, options)
    except ipuplan.InfeasibleBudget as why:
        print(f"{path.name}: does not fit: {why}")
        return None
    except ipuplan.IpuplanError as why:
        print(f"{path.name}: not re-planned: {why}")
        return None
    print(
        f"{path.name}: raw peak {result.before.raw_peak:,} -> {result.after.raw_peak:,} bytes per tile "
        f"({result.status.value}, bound {result.bound:,}); {len(result.changes)} values changed"
    )
    for change in result.changes[:5]:
        print(f"  value {change.value_id} {change.name}: {change.old_bytes:,} -> {change.new_bytes:,} bytes")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plan", nargs="?", type=Path, default=ROOT / "models" / "vit-so400m-finalist-5.json")
    parser.add_argument("--budget", type=int, default=None, help="per-tile budget to try (default: the plan's)")
    parser.add_argument("--interleaved-budget", type=int, default=None, help="interleaved region per tile")
    arguments = parser.parse_args()
    result = replan(arguments.plan, arguments.budget, arguments.interleaved_budget)
    if result is not None:
        target = Path(tempfile.gettempdir()) / f"{arguments.plan.stem}.replanned.json"
        ipuplan.write_plan(result.plan, target)  # already re-checked by the independent estimate
        print(f"wrote {target}")


if __name__ == "__main__":
    main()
