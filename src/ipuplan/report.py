"""Plans and check results as text: rich tables for people, plain lines for pipes."""

from __future__ import annotations

from collections.abc import Iterable

from rich.table import Table

from ipuplan.dataflow import Dataflow
from ipuplan.estimate import Estimate
from ipuplan.format import Plan
from ipuplan.layout import STANDARD


def _kib(count: int) -> str:
    return f"{count:,} B ({count / 1024:,.1f} KiB)"


def summary_table(plan: Plan, result: Estimate) -> Table:
    """Scope, budgets, peaks with their steps, and whether the plan fits."""
    table = Table(title=f"plan {plan.scope}: {len(plan.values)} values, {len(plan.steps)} steps", show_header=False)
    table.add_column("what")
    table.add_column("value", justify="right")
    rows = [
        ("budget per tile", _kib(plan.budget_bytes)),
        ("interleaved budget", _kib(plan.interleaved_budget_bytes)),
        ("support reserve", _kib(plan.support_reserve_bytes)),
        ("raw peak (std + il)", f"{_kib(result.raw_peak)} at step {result.total_peak_step}"),
        ("peak total (+ exchange rows)", _kib(result.peak.total)),
        ("peak standard (+ exchange rows)", f"{_kib(result.peak.standard)} at step {result.standard_peak_step}"),
        ("peak interleaved", f"{_kib(result.peak.interleaved)} at step {result.interleaved_peak_step}"),
        ("effective peak", _kib(result.effective_peak_bytes)),
        ("standard overflow", _kib(result.standard_contiguous_overflow_bytes)),
        ("fits budget", "yes" if result.fits_budget else "NO"),
    ]
    for row in rows:
        table.add_row(*row)
    return table


def contributors_table(plan: Plan, result: Estimate, step_index: int, top: int = 12) -> Table:
    """The largest live values (and scratch) at one step."""
    step = plan.steps[step_index]
    table = Table(title=f"top contributors at step {step_index} ({step.parsed_operation.kind})")
    for name, justify in (("value", "right"), ("name", "left"), ("class", "left"), ("bytes", "right"), ("share", "right")):
        table.add_column(name, justify=justify)
    total = result.standard[step_index] + result.interleaved[step_index]
    live = sorted(step.live, key=lambda v: (-result.values[v].bytes, v))
    for value_id in live[:top]:
        value = plan.values[value_id]
        size = result.values[value_id].bytes
        cls = "standard" if value.memory_class == STANDARD else "interleaved"
        table.add_row(str(value_id), value.name, cls, f"{size:,}", f"{size / max(total, 1):.1%}")
    scratch = step.scratch.standard + step.scratch.interleaved
    if scratch:
        table.add_row("-", "scratch", "", f"{scratch:,}", f"{scratch / max(total, 1):.1%}")
    if len(live) > top:
        rest = sum(result.values[v].bytes for v in live[top:])
        table.add_row("-", f"{len(live) - top} more values", "", f"{rest:,}", f"{rest / max(total, 1):.1%}")
    return table


def graph_lines(plan: Plan, flow: Dataflow) -> Iterable[str]:
    """One line per step: `index source operation: reads -> writes [released ...]`."""
    for step, step_flow in zip(plan.steps, flow.steps):
        reads = ", ".join(map(str, step_flow.reads)) or "-"
        writes = ", ".join(map(str, step_flow.writes)) or "-"
        line = f"{step.index:>5}  src {step.source:<4} {step.operation[:48]:<48}  {reads} -> {writes}"
        if step_flow.releases:
            line += f"  [released {', '.join(map(str, step_flow.releases))}]"
        yield line
    for ambiguity in flow.ambiguities:
        yield f"ambiguous: {ambiguity}"
