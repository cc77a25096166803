"""Freedom level 4 (element-wise families): the reference plan's peak, and how many layers fit on the real chip.

Run:  .venv/bin/python benchmarks/elementwise.py [--time-limit S] [--start N]

Scope `full` with and without the element-wise level (registered here for scope full, before the classes level,
unless the registry has it already):
1. the reference plan: raw peak, bound, status, the bytes at the peak step of the parameters that element-wise
   kernels broadcast (the biases; a LayerNorm's scales stay whole on every tile that holds a row), and the
   seconds to prepare (facts, candidate space, problem) and to solve (`--workers 1`);
2. capacity: `ipuplan synth --layers N` of the reference plan, optimised on the real chip's budgets (586,960 total,
   424,880 interleaved, 49,152 support reserve), N from `--start` up to the first that does not fit: the most
   layers that fit, their raw peak, and the lowest raw peak any layout of the next N reaches (what it would need).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tables import print_table

from ipuplan import load_plan
from ipuplan.errors import InfeasibleBudget
from ipuplan.facts.elementwise_families import recognise_elementwise
from ipuplan.replan.options import OptimizeOptions
from ipuplan.replan.pipeline import prepare, solve_prepared
from ipuplan.space import scopes
from ipuplan.space.levels.elementwise import elementwise_level
from ipuplan.workbench.synth import repeat_layers

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "models" / "vit-so400m-finalist-5.json"
CHIP = {"budget": 586_960, "interleaved_budget": 424_880, "support_reserve": 49_152}


@contextmanager
def registry(with_level: bool) -> Iterator[None]:
    """The level registry as it is, or without the element-wise level; restored after."""
    kept = scopes.LEVELS
    if not with_level:
        scopes.LEVELS = tuple(level for level in kept if level.decide is not elementwise_level)
    try:
        yield
    finally:
        scopes.LEVELS = kept


def timed_run(plan, time_limit: float, **options):
    """(result, seconds to prepare, seconds to solve and rewrite) of one deterministic optimisation in scope full."""
    start = time.perf_counter()
    prepared = prepare(plan, OptimizeOptions(scope="full", workers=1, time_limit=time_limit, **options))
    ready = time.perf_counter()
    result = solve_prepared(prepared)
    return result, ready - start, time.perf_counter() - ready


def reference_row(name: str, time_limit: float) -> dict:
    plan = load_plan(REFERENCE)
    result, preparing, solving = timed_run(plan, time_limit)
    after = result.after
    families = recognise_elementwise(plan, result.prepared.facts.flow)
    parameters = {m for family in families if not family.rows_whole for m in family.parameters}
    peak = after.total_peak_step
    broadcast = sum(after.values[m].bytes for m in parameters & set(result.plan.steps[peak].live))
    return {"scope full": name, "raw peak": after.raw_peak, "bound": result.bound, "status": result.status.value,
            "peak steps": ", ".join(str(s) for s, (a, b) in enumerate(zip(after.standard, after.interleaved))
                                    if a + b == after.raw_peak),
            "biases at peak": broadcast, "candidates": result.candidates,
            "prepare s": preparing, "solve s": solving}


def capacity_row(name: str, start: int, time_limit: float) -> dict:
    """The most layers that fit from `start` up, and what the first that does not would need."""
    reference = load_plan(REFERENCE)
    fitted, layers, need = None, start, None
    while layers <= 1000:
        try:
            result, _, _ = timed_run(repeat_layers(reference, layers), time_limit, **CHIP)
        except InfeasibleBudget as conflict:
            need = conflict.explanation.lowest_peak
            break
        if not result.after.fits_budget:
            need = result.after.raw_peak
            break
        fitted, layers = (layers, result.after.raw_peak), layers + 1
    return {"scope full": name, "layers that fit": fitted[0] if fitted else f"< {start}",
            "their raw peak": fitted[1] if fitted else None, "next N": layers,
            "lowest raw peak of next N": need, "limit (budget - reserve)": CHIP["budget"] - CHIP["support_reserve"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=30.0)
    parser.add_argument("--start", type=int, default=14, help="the first layer count tried (default: 14)")
    arguments = parser.parse_args()
    variants = (("without level 4", False), ("with level 4", True))
    rows = []
    for name, with_level in variants:
        with registry(with_level):
            rows.append(reference_row(name, arguments.time_limit))
    print_table(rows, f"{REFERENCE.name}: raw peak (issue 19: 159,076 without level 4, a legal 136,714 with it)")
    rows = []
    for name, with_level in variants:
        with registry(with_level):
            rows.append(capacity_row(name, arguments.start, arguments.time_limit))
    print_table(rows, "layers that fit on the real chip (issue 19: 14 today, about 22 with level 4)")


if __name__ == "__main__":
    main()
