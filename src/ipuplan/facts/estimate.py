"""The memory estimate (PLAN_FORMAT.md, "The estimate"), as one pure function of a plan.

The checker compares a plan's stored numbers with `estimate(plan)`; the optimiser's
rewrite writes `estimate(plan)` into every derived field. Neither trusts the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np

from ipuplan.facts.liveness import Liveness, liveness
from ipuplan.plan.budgets import Budgets
from ipuplan.plan.format import MAX_COUNT, Peak, Plan, Value
from ipuplan.plan.layout import GRANULE, STANDARD, Layout, round_up
from ipuplan.plan.operation import parse_operation

AMP_ALIGNED_ORDERS = frozenset({"Amp(Left)", "Amp(TransposedLeft)"})


@dataclass(frozen=True)
class ValueBytes:
    shard_bytes: int
    aligned_bytes: int
    bytes: int


@dataclass(frozen=True)
class Estimate:
    values: tuple[ValueBytes, ...]
    standard: tuple[int, ...]
    """`std_s`: live Standard bytes plus standard scratch, per step."""
    interleaved: tuple[int, ...]
    peak: Peak
    total_peak_step: int
    standard_peak_step: int
    interleaved_peak_step: int
    effective_peak_bytes: int
    standard_contiguous_overflow_bytes: int
    fits_budget: bool
    amp_aligned: frozenset[int] = frozenset()
    """Values whose bytes are rounded up to the class granule."""

    @property
    def raw_peak(self) -> int:
        """max over steps of std_s + il_s: what the optimiser minimises."""
        return self.peak.total - self.peak.exchange_rows


def shard_bytes(shape: list[int] | tuple[int, ...], element_size: int, layout: Layout) -> int:
    """Bytes of the largest shard: every tiled axis rounded up to whole blocks per partition."""
    extents = list(shape)
    for axis in layout.axes:
        dimension = axis.axis.dimension(len(shape))
        if dimension is None:
            return axis.extent(prod(shape)) * element_size
        extents[dimension] = axis.extent(shape[dimension])
    return prod(extents) * element_size


def aligned_bytes(shard: int, memory_class: str, amp_aligned: bool) -> int:
    """The bytes a shard takes: an AMP-aligned one rounded up to its class's granule (also every shard of
    a numpy array at once, as the kernel levels size thousands of splits)."""
    return round_up(shard, GRANULE[memory_class]) if amp_aligned else shard


def amp_aligned_values(plan: Plan, live: Liveness) -> frozenset[int]:
    """Results of Gemm steps, and Gemm operands whose order is Amp(Left|TransposedLeft)."""
    aligned: set[int] = set()
    gemm = {text: parse_operation(text).kind == "Gemm" for text in {step.operation for step in plan.steps}}
    for step in plan.steps:
        if not gemm[step.operation]:
            continue
        aligned.update(live.born_at[step.index])
        aligned.update(
            v for v in live.dies_at[step.index] if plan.values[v].parsed_layout.order_kind in AMP_ALIGNED_ORDERS
        )
    return frozenset(aligned)


def value_bytes(value: Value, amp_aligned: bool, layout: Layout | None = None) -> ValueBytes:
    """A value's bytes under its own layout, or under `layout` when given (a candidate)."""
    layout = layout or value.parsed_layout
    shard = shard_bytes(value.shape, value.element_size, layout)
    aligned = aligned_bytes(shard, layout.memory_class, amp_aligned)
    return ValueBytes(shard, aligned, aligned * value.copies)


def sizing_key(value: Value, amp_aligned: bool) -> tuple:
    """Everything `value_bytes` of a value depends on: values with equal keys have equal bytes under any layout."""
    return value.layout, tuple(value.shape), value.precision, value.copies, amp_aligned


def _own_bytes(plan: Plan, aligned: frozenset[int]) -> tuple[ValueBytes, ...]:
    """`value_bytes` of every value under its own layout.

    A large plan repeats a few hundred distinct tensors thousands of times, so values alike
    (`sizing_key`) share one (immutable) result.
    """
    known: dict[tuple, ValueBytes] = {}
    found = []
    for value in plan.values:
        key = sizing_key(value, value.id in aligned)
        sizes = known.get(key)
        if sizes is None:
            sizes = known[key] = value_bytes(value, key[-1])
        found.append(sizes)
    return tuple(found)


def _per_step_sums(lengths: np.ndarray, value_of: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Sum of `weights` over each step's live values (`lengths` entries of `value_of` per step, in step order).

    Differences of one running total: exact wherever a step's own sum fits in int64, as
    int64 arithmetic wraps consistently.
    """
    ends = np.cumsum(lengths)
    running = np.concatenate(([0], np.cumsum(weights[value_of])))
    return running[ends] - running[ends - lengths]


def _first_max(series: np.ndarray) -> tuple[int, int]:
    if series.size == 0:
        return 0, 0
    step = int(np.argmax(series))
    return int(series[step]), step


def _sum_type(sizes: list[int], lengths: np.ndarray) -> type:
    """int64 for the per-step sums, unless a step's might pass it (a damaged plan's absurd shape, padding or
    copies; scratch is at most MAX_COUNT per class): then Python's ints, exact where int64 would wrap."""
    most = max(sizes, default=0) * int(lengths.max(initial=0)) + 2 * MAX_COUNT
    return np.int64 if most < 2**63 else object


def estimate(plan: Plan, budgets: Budgets | None = None, live: Liveness | None = None) -> Estimate:
    """Every derived number of a plan, from its layouts, live sets and scratch.

    `live` is the plan's liveness, when the caller has it already.
    """
    budgets = budgets or Budgets.of(plan)
    live = live or liveness(plan)
    aligned = amp_aligned_values(plan, live)
    values = _own_bytes(plan, aligned)
    lengths, value_of = live.entries
    byte_counts = [v.bytes for v in values]
    sizes = np.array(byte_counts, dtype=_sum_type(byte_counts, lengths))
    is_standard = np.array([v.memory_class == STANDARD for v in plan.values], dtype=bool)
    scratch = np.array([(s.scratch.standard, s.scratch.interleaved) for s in plan.steps], dtype=np.int64).reshape(-1, 2)
    standard = _per_step_sums(lengths, value_of, np.where(is_standard, sizes, 0)) + scratch[:, 0]
    interleaved = _per_step_sums(lengths, value_of, np.where(is_standard, 0, sizes)) + scratch[:, 1]
    max_standard, standard_step = _first_max(standard)
    max_interleaved, interleaved_step = _first_max(interleaved)
    max_total, total_step = _first_max(standard + interleaved)
    exchange = plan.peak.exchange_rows
    standard_sizes = [v.bytes for v, std in zip(values, is_standard) if std]
    # computed, not read: the loader's bounds do not apply (`check` reports a damaged plan's numbers past them)
    peak = Peak.model_construct(
        standard=max_standard + exchange,
        interleaved=max_interleaved,
        total=max_total + exchange,
        exchange_rows=exchange,
        maximum_standard_allocation=max(standard_sizes, default=0),
    )
    overflow = max(0, max_standard - budgets.standard_limit)
    effective = max_total + budgets.support_reserve_bytes
    return Estimate(
        values=values,
        standard=tuple(standard.tolist()),
        interleaved=tuple(interleaved.tolist()),
        peak=peak,
        total_peak_step=total_step,
        standard_peak_step=standard_step,
        interleaved_peak_step=interleaved_step,
        effective_peak_bytes=effective,
        standard_contiguous_overflow_bytes=overflow,
        amp_aligned=aligned,
        fits_budget=all(limit.usage(standard, interleaved).max(initial=0) <= limit.bytes for limit in budgets.limits),
    )
