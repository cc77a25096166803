"""What changed between two plans of one scope (typically the input and ipuplan's output): per value and per
operation, each kernel family's changes together as one unit (`report.families`), the peak and the exchange."""

from __future__ import annotations

from dataclasses import dataclass

from ipuplan.errors import PlanError
from ipuplan.facts.check import ValueChange, value_changes
from ipuplan.facts.estimate import Estimate
from ipuplan.facts.plan_exchange import PlanExchange, plan_exchange
from ipuplan.facts.plan_facts import plan_facts
from ipuplan.plan.format import Plan
from ipuplan.plan.layout import parse_layout
from ipuplan.replan.gathers import InsertedGather, inserted_gathers, without_gathers
from ipuplan.report.text import FamilyUnit, family_units, unit_of


@dataclass(frozen=True)
class OperationDiff:
    step: int
    old: str
    new: str


@dataclass(frozen=True)
class PlanDiff:
    values: tuple[ValueChange, ...]
    operations: tuple[OperationDiff, ...]
    before: Estimate
    after: Estimate
    exchange_before: PlanExchange
    """The old plan's exact exchange (docs/EXCHANGE.md)."""
    exchange_after: PlanExchange
    families: tuple[FamilyUnit, ...] = ()
    """The old plan's kernel families: the changes of each are shown together."""
    inserted: tuple[InsertedGather, ...] = ()
    """The steps and values the new plan inserted (scope `program`), by their numbers in the new plan."""


def tiling(layout: str) -> tuple[tuple[int, ...], tuple[int | None, ...]]:
    """A layout's partitions and tile strides, per axis."""
    axes = parse_layout(layout).axes
    return tuple(a.partitions for a in axes), tuple(a.tile_stride for a in axes)


def diff_plans(old: Plan, new: Plan) -> PlanDiff:
    """Per changed value its tiling, class and bytes; per changed operation its text; both estimates and both
    exact exchanges; the steps and values `new` inserted (scope `program`), its other steps compared with `old`'s."""
    before, after = plan_facts(old), plan_facts(new)
    inserted = inserted_gathers(len(old.values), after) if len(new.values) > len(old.values) else ()
    compared = without_gathers(new, inserted)
    if len(old.values) != len(compared.values) or len(old.steps) != len(compared.steps):
        raise PlanError(
            f"plans of different programs ({len(old.values)} vs {len(new.values)} values, "
            f"{len(old.steps)} vs {len(new.steps)} steps, {len(inserted)} inserted copies): diff compares re-plans "
            "of one scope"
        )
    operations = tuple(OperationDiff(a.index, a.operation, b.operation)
                       for a, b in zip(old.steps, compared.steps) if a.operation != b.operation)
    return PlanDiff(value_changes(old, compared, before.estimate, after.estimate), operations, before.estimate,
                    after.estimate, plan_exchange(old, before), plan_exchange(new, after), family_units(before),
                    inserted)


def _strides(strides: tuple[int | None, ...]) -> str:
    return "[" + ", ".join("-" if s is None else str(s) for s in strides) + "]"


def diff_lines(result: PlanDiff) -> list[str]:
    """The diff as text: each kernel family that changed as one block (its kernels, then its changed values and
    operations, indented), then the other values and operations, one line each, then the peak and the exchange."""
    units = unit_of(result.families)
    lines = []
    for unit in result.families:
        values = [c for c in result.values if units.get(c.value_id) is unit]
        operations = [c for c in result.operations if c.step in unit.steps]
        if values or operations:
            lines.append(f"{unit.label}: {len(values)} of {len(unit.members)} values and {len(operations)} "
                         f"operation{'' if len(operations) == 1 else 's'} changed together")
            lines += [f"  {line}" for line in (*map(_value_line, values), *map(_operation_line, operations))]
    steps = {step for unit in result.families for step in unit.steps}
    lines += [_value_line(c) for c in result.values if c.value_id not in units]
    lines += [_operation_line(c) for c in result.operations if c.step not in steps]
    lines += [f"inserted {g} ({g.name})" for g in result.inserted]
    before, after = result.before, result.after
    delta = after.raw_peak - before.raw_peak
    lines.append(
        f"{len(result.values)} values and {len(result.operations)} operations changed"
        f"{f', {len(result.inserted)} Copy steps inserted' if result.inserted else ''}; raw peak "
        f"{before.raw_peak:,} (step {before.total_peak_step}) -> {after.raw_peak:,} (step {after.total_peak_step}), "
        f"{delta:+,} bytes ({delta / max(before.raw_peak, 1):+.1%}); fits {_fits(before)} -> {_fits(after)}"
    )
    return [*lines, exchange_line(result.exchange_before, result.exchange_after)]


def _value_line(change: ValueChange) -> str:
    cls = change.old_class if change.old_class == change.new_class else f"{change.old_class} -> {change.new_class}"
    (old_partitions, old_strides), (new_partitions, new_strides) = tiling(change.old_layout), tiling(change.new_layout)
    return (f"value {change.value_id} {change.name}: partitions {list(old_partitions)} -> {list(new_partitions)}, "
            f"strides {_strides(old_strides)} -> {_strides(new_strides)}, {cls}, "
            f"{change.old_bytes:,} -> {change.new_bytes:,} bytes")


def _operation_line(change: OperationDiff) -> str:
    return f"step {change.step}: {change.old} -> {change.new}"


def exchange_line(before: PlanExchange, after: PlanExchange) -> str:
    """The exact exchange of both plans and its change, with movers and reductions apart (and what is unpriced)."""
    delta = after.total - before.total
    line = (f"exchange {before.total:,} -> {after.total:,} bytes, {delta:+,} ({delta / max(before.total, 1):+.1%}): "
            f"movers {before.movers:,} -> {after.movers:,}, reductions {before.reductions:,} -> {after.reductions:,}")
    if before.unpriced or after.unpriced:
        line += f"; unpriced steps {len(before.unpriced)} -> {len(after.unpriced)} (not in the figures)"
    if before.other_readings or after.other_readings:  # docs/EXCHANGE.md: a view's reading is not in the format
        line += f"; views read factor-inner {before.inner_total:,} -> {after.inner_total:,}"
    return line


def _fits(result: Estimate) -> str:
    return "yes" if result.fits_budget else "no"
