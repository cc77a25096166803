"""Issue 24: the exact exchange of the reference plan (docs/EXCHANGE.md), before and after optimising.

Run:  .venv/bin/python benchmarks/exchange.py [PLAN]

Per plan (the input, the default scope's optimum with `workers=1`, and `objective="fit"`): the bytes
the written layouts send, movers and reductions apart, each step once; beside them what `optimize`
reports (`exchange_before` / `exchange_after`, which must be the same exact figure) and the optimiser's
own proxy (`model_exchange_before` / `_after`: each candidate priced against the other side at its
input layout, reductions unpriced), and the seconds `plan_exchange` took (its caches cleared first, so
the time is a cold count).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tables import print_table

import ipuplan
from ipuplan import load_plan
from ipuplan.facts.plan_exchange import PlanExchange, plan_exchange, replica_offsets, step_bytes

REFERENCE = Path(__file__).resolve().parent.parent / "models" / "vit-so400m-finalist-5.json"


def timed_exchange(plan: ipuplan.Plan) -> tuple[PlanExchange, float]:
    step_bytes.cache_clear()
    replica_offsets.cache_clear()
    start = time.perf_counter()
    exchange = plan_exchange(plan)
    return exchange, time.perf_counter() - start


def row(label: str, plan: ipuplan.Plan, reported: int, proxy: int) -> dict:
    exchange, seconds = timed_exchange(plan)
    return {"plan": label, "movers": exchange.movers, "reductions": exchange.reductions, "exact": exchange.total,
            "optimize reports": reported, "same": reported == exchange.total, "model's proxy": proxy,
            "unpriced": len(exchange.unpriced), "seconds": seconds}


def main(path: Path) -> None:
    plan = load_plan(path)
    default = ipuplan.optimize(plan, workers=1)
    fit = ipuplan.optimize(plan, workers=1, objective="fit")
    rows = [row("input", plan, default.exchange_before, default.model_exchange_before),
            row(f"optimised ({default.options.scope.value})", default.plan, default.exchange_after,
                default.model_exchange_after),
            row(f"fit ({fit.options.scope.value})", fit.plan, fit.exchange_after, fit.model_exchange_after)]
    first = rows[0]["exact"]
    for line in rows:
        line["change"] = f"{(line['exact'] - first) / first:+.1%}"
    print_table(rows, f"exchange bytes of {path.name}, each step once (optimize reports: exchange_before/after; "
                      "the model's proxy: model_exchange_before/after)")
    before = {s.step: s.bytes for s in plan_exchange(plan).steps}
    changed = [{"step": s.step, "kind": s.kind, "input": before.get(s.step), "optimised": s.bytes}
               for s in plan_exchange(default.plan).steps if before.get(s.step) != s.bytes]
    print_table(changed, "steps whose exchange the default optimum changes")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else REFERENCE)
