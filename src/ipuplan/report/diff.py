"""What changed between two plans of one scope (typically the input and ipuplan's output)."""

from __future__ import annotations

from dataclasses import dataclass

from ipuplan.errors import PlanError
from ipuplan.facts.estimate import Estimate, estimate
from ipuplan.plan.format import Plan
from ipuplan.plan.layout import Layout


@dataclass(frozen=True)
class ValueDiff:
    value_id: int
    name: str
    old_partitions: tuple[int, ...]
    new_partitions: tuple[int, ...]
    old_strides: tuple[int | None, ...]
    new_strides: tuple[int | None, ...]
    old_class: str
    new_class: str
    old_bytes: int
    new_bytes: int


@dataclass(frozen=True)
class OperationDiff:
    step: int
    old: str
    new: str


@dataclass(frozen=True)
class PlanDiff:
    values: tuple[ValueDiff, ...]
    operations: tuple[OperationDiff, ...]
    before: Estimate
    after: Estimate


def _tiling(layout: Layout) -> tuple[tuple[int, ...], tuple[int | None, ...]]:
    return tuple(a.partitions for a in layout.axes), tuple(a.tile_stride for a in layout.axes)


def diff_plans(old: Plan, new: Plan) -> PlanDiff:
    """Per changed value its tiling, class and bytes; per changed operation its text; both estimates."""
    if len(old.values) != len(new.values) or len(old.steps) != len(new.steps):
        raise PlanError(
            f"plans of different programs ({len(old.values)} vs {len(new.values)} values, "
            f"{len(old.steps)} vs {len(new.steps)} steps): diff compares re-plans of one scope"
        )
    before, after = estimate(old), estimate(new)
    values = []
    for a, b in zip(old.values, new.values):
        if a.layout == b.layout and a.memory_class == b.memory_class:
            continue
        (old_p, old_s), (new_p, new_s) = _tiling(a.parsed_layout), _tiling(b.parsed_layout)
        values.append(
            ValueDiff(a.id, a.name, old_p, new_p, old_s, new_s, a.memory_class, b.memory_class,
                      before.values[a.id].bytes, after.values[b.id].bytes)
        )
    operations = tuple(
        OperationDiff(a.index, a.operation, b.operation) for a, b in zip(old.steps, new.steps) if a.operation != b.operation
    )
    return PlanDiff(tuple(values), operations, before, after)


def _strides(strides: tuple[int | None, ...]) -> str:
    return "[" + ", ".join("-" if s is None else str(s) for s in strides) + "]"


def diff_lines(result: PlanDiff) -> list[str]:
    """The diff as text, one line per change, then the peak summary."""
    lines = []
    for change in result.values:
        cls = change.old_class if change.old_class == change.new_class else f"{change.old_class} -> {change.new_class}"
        lines.append(
            f"value {change.value_id} {change.name}: partitions {list(change.old_partitions)} -> "
            f"{list(change.new_partitions)}, strides {_strides(change.old_strides)} -> {_strides(change.new_strides)}, "
            f"{cls}, {change.old_bytes:,} -> {change.new_bytes:,} bytes"
        )
    for change in result.operations:
        lines.append(f"step {change.step}: {change.old} -> {change.new}")
    before, after = result.before, result.after
    delta = after.raw_peak - before.raw_peak
    lines.append(
        f"{len(result.values)} values and {len(result.operations)} operations changed; raw peak "
        f"{before.raw_peak:,} (step {before.total_peak_step}) -> {after.raw_peak:,} (step {after.total_peak_step}), "
        f"{delta:+,} bytes ({delta / max(before.raw_peak, 1):+.1%}); fits {_fits(before)} -> {_fits(after)}"
    )
    return lines


def _fits(result: Estimate) -> str:
    return "yes" if result.fits_budget else "no"
