"""Issue 34: `ipuplan sweep` as a person waits for it: how many points, in how long, each legal and priced as written.

Run:  .venv/bin/python benchmarks/sweep.py [PLAN] [--scope S ...] [--workers N] [--time-limit T]

Per scope (default storage, kernels, full) one sweep of the plan (default the reference plan), timed whole in this
process (preparation included; the interpreter and imports are not), with the default points (8) and step (1%). Each
point's plan is written again from its choice (`replan.rewrite`) and judged: `check` (consistent), `against` (the
output contract of its scope) and its exact exchange computed from the written plan against the sweep's figure. The
table beside it: the input plan, the peak optimum (`optimize`, the front's first point) and the least exchange (the
front's last point), and the whole-scope lower bound on the peak (`Problem.lower_bound`).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tables import print_table

from ipuplan import load_plan
from ipuplan.facts.check import check
from ipuplan.facts.plan_exchange import plan_exchange
from ipuplan.replan.against import against
from ipuplan.replan.rewrite import rewrite
from ipuplan.replan.sweep import sweep

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "models" / "vit-so400m-finalist-5.json"


def row(path: Path, scope: str, workers: int | None, time_limit: float) -> dict:
    plan = load_plan(path)
    heard = []
    started = time.perf_counter()
    front = sweep(plan, scope=scope, workers=workers, time_limit=time_limit, on_point=heard.append)
    seconds = time.perf_counter() - started
    prepared = front.prepared
    legal = priced = 0
    for point, swept in zip(heard, front.points):
        written = rewrite(prepared.facts, prepared.space, point.choice, prepared.facts.budgets)
        legal += check(written.plan, written) == [] and against(plan, written.plan, scope) == []
        priced += plan_exchange(written.plan, written).total == swept.exchange_bytes == swept.model_exchange_bytes
    first, last = front.points[0], front.points[-1]
    return {"scope": scope, "points": len(front.points), "seconds": round(seconds, 2), "legal": legal,
            "exchange = plan's": priced, "input peak": front.input_peak, "input exchange": front.input_exchange,
            "peak bound": prepared.problem.lower_bound(), "first peak": first.peak,
            "first exchange": first.exchange_bytes, "last peak": last.peak, "last exchange": last.exchange_bytes,
            "proven": sum(p.proven for p in front.points)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("plan", nargs="?", type=Path, default=REFERENCE)
    parser.add_argument("--scope", nargs="+", default=["storage", "kernels", "full"])
    parser.add_argument("--workers", type=int, default=None, help="default: the optimiser's (the machine's cores)")
    parser.add_argument("--time-limit", type=float, default=10.0)
    options = parser.parse_args()
    rows = [row(options.plan, scope, options.workers, options.time_limit) for scope in options.scope]
    print_table(rows, f"ipuplan sweep of {options.plan.name}, workers {options.workers or 'default'}, "
                      f"--time-limit {options.time_limit:g}")


if __name__ == "__main__":
    main()
