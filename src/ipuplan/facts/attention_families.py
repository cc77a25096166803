"""Attention products: batched Gemms over heads, re-split as one unit.

Q·Kᵀ reads `[heads, M, K]` (Amp(Left)) and `[heads, N, K]` (Amp(TransposedRight)) and writes
`[heads, M, N]` with no reduction (pK = 1): split `(h, m, n)`. P·V reads `[heads, M, K]` and
`[heads, K, N]` (BlockMajor(Matrix)) and writes partials `[pK, heads, M, N]` that a `Sum { axis: 0 }`
reduces: split `(h, m, n, k)`. Shards sit at tile `head + h*(n_index + n*(k_index + k*m_index))`:
heads stride 1, N stride h, K stride h*n, M stride h*n*k; the left operand is replicated over N,
the right over M. The K block is the Gemm's `inner_block` (and the right operand's `row_block`),
`output_columns` the N columns per shard, the Sum scratch `(pK+1) * shard(Sum result)`; the Sum
result keeps its own layout (a mover reads it). An axis with one partition keeps the stride the
plan gave it. Deriving the input's own split reproduces every input string (a test proves it).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from math import prod

from ipuplan.facts.dataflow import Dataflow
from ipuplan.facts.estimate import shard_bytes
from ipuplan.facts.gemm_families import (
    DerivedSplit,
    IllegalSplit,
    NotAFamily,
    axis_positions,
    gemm_operation,
    inner_block_for,
    inner_block_granule,
    own_split_problems,
    sum_scratch,
    with_row_block,
)
from ipuplan.plan.format import Plan, Value
from ipuplan.plan.layout import Layout, ceil_div

LEFT_ROLES = {"Amp(Left)": ("heads", "m", "k")}
RIGHT_ROLES = {"Amp(TransposedRight)": ("heads", "n", "k"), "BlockMajor(Matrix)": ("heads", "k", "n")}
"""Per order, the role of dimensions 0, 1 and 2."""


@dataclass(frozen=True)
class HeadSplit:
    heads: int
    m: int
    n: int
    k: int = 1

    @property
    def tiles(self) -> int:
        return self.heads * self.m * self.n * self.k

    def partitions(self, role: str) -> int:
        return {"heads": self.heads, "m": self.m, "n": self.n, "k": self.k, "pk": self.k}[role]

    def stride(self, role: str) -> int:
        return {"heads": 1, "n": self.heads, "k": self.heads * self.n, "pk": self.heads * self.n,
                "m": self.heads * self.n * self.k}[role]

    def __str__(self) -> str:
        return f"(heads={self.heads}, pM={self.m}, pN={self.n}, pK={self.k})"


@dataclass(frozen=True)
class AttentionFamily:
    gemm_step: int
    left: int
    right: int
    result: int
    """The Gemm's result: the scores (Q·Kᵀ) or the partials `[pK, ...]` (P·V)."""
    sum_step: int | None
    sum_result: int | None
    roles: dict[int, tuple[str, ...]]
    """Member -> the role of each axis of its layout, in layout order."""

    @property
    def members(self) -> tuple[int, ...]:
        return (self.left, self.right, self.result)

    @property
    def reduces(self) -> bool:
        return self.sum_step is not None

    @property
    def steps(self) -> frozenset[int]:
        """The product's own kernels: they read and write its members in whatever layout its split gives them."""
        return frozenset(s for s in (self.gemm_step, self.sum_step) if s is not None)


def _roles(value: Value, by_dimension: tuple[str, ...], offset: int = 0) -> tuple[str, ...]:
    positions = axis_positions(value, value.parsed_layout, {d + offset: r for d, r in enumerate(by_dimension)})
    if positions is None:
        raise NotAFamily("operands are not tiled on heads and their last two dimensions")
    return tuple(role for role, _ in sorted(positions.items(), key=lambda item: item[1]))


def recognise_attention(plan: Plan, flow: Dataflow, rejected: tuple[tuple[int, str], ...]) -> list[AttentionFamily]:
    """Attention products among the Gemms that are not plain families (`rejected`)."""
    found = []
    by_step = {family.gemm_step: family for family in flow.families}
    for step, _ in rejected:
        try:
            found.append(_recognise(plan, by_step[step]))
        except NotAFamily:
            continue
    return found


def _recognise(plan: Plan, family) -> AttentionFamily:
    values = plan.values
    if None in (family.left, family.right, family.partials):
        raise NotAFamily("operands not identified")
    left, right, result = values[family.left], values[family.right], values[family.partials]
    left_roles = LEFT_ROLES.get(left.parsed_layout.order_kind)
    right_roles = RIGHT_ROLES.get(right.parsed_layout.order_kind)
    if left_roles is None or right_roles is None or len(left.shape) != 3 or len(right.shape) != 3:
        raise NotAFamily("not a batched left/right pair")
    reduces = family.sum_step is not None and plan.steps[family.sum_step].parsed_operation.sum_axis == 0
    if reduces != (right_roles[1] == "k") or len(result.shape) != 3 + reduces:
        raise NotAFamily("result is not [heads, M, N] (Q·Kᵀ) or [pK, heads, M, N] reduced by a Sum (P·V)")
    result_roles = ("pk", "heads", "m", "n") if reduces else ("heads", "m", "n")
    roles = {family.left: _roles(left, left_roles), family.right: _roles(right, right_roles),
             family.partials: _roles(result, result_roles)}
    return AttentionFamily(family.gemm_step, family.left, family.right, family.partials,
                           family.sum_step if reduces else None, family.sum_result if reduces else None, roles)


def current_head_split(plan: Plan, family: AttentionFamily) -> HeadSplit:
    layout = plan.values[family.result].parsed_layout
    found = {role: axis.partitions for role, axis in zip(family.roles[family.result], layout.axes)}
    return HeadSplit(found["heads"], found["m"], found["n"], found.get("pk", 1))


def inner_block(plan: Plan, family: AttentionFamily, k: int) -> int:
    """The K block cutting both operands' K into exactly `k` blocks of whole granules (IllegalSplit if none)."""
    if not family.reduces:
        if k != 1:
            raise IllegalSplit("Q·Kᵀ has no reduction: pK = 1")
        return plan.steps[family.gemm_step].parsed_operation.gemm_field("inner_block")
    sizes = [_dimension_of(plan.values[v], family.roles[v], "k") for v in (family.left, family.right)]
    granule = inner_block_granule(plan, family.gemm_step)
    block = inner_block_for(max(sizes), k, granule)
    if block is None or any(ceil_div(size, block) != k for size in sizes):
        raise IllegalSplit(f"pK={k} does not cut K={max(sizes)} into {k} blocks of a multiple of {granule}")
    return block


def k_options(plan: Plan, family: AttentionFamily) -> range:
    """Every pK that might cut K into whole granules (`inner_block` tells which do): 1 without a reduction, else up to
    one granule per block."""
    if not family.reduces:
        return range(1, 2)
    size = max(_dimension_of(plan.values[v], family.roles[v], "k") for v in (family.left, family.right))
    return range(1, ceil_div(size, inner_block_granule(plan, family.gemm_step)) + 1)


def _dimension_of(value: Value, roles: tuple[str, ...], role: str) -> int:
    axis = value.parsed_layout.axes[roles.index(role)]
    return value.shape[axis.axis.dimension(len(value.shape))]


def _member_layout(layout: Layout, roles: tuple[str, ...], split: HeadSplit, block: int, replicas: int) -> Layout:
    axes = []
    for role, axis in zip(roles, layout.axes):
        partitions = split.partitions(role)
        stride = axis.tile_stride if partitions == 1 or axis.tile_stride is None else split.stride(role)
        changed = replace(axis, partitions=partitions, tile_stride=stride)
        if role == "k" and block != axis.block_size:
            multiple = block if axis.padding_multiple == axis.block_size else axis.padding_multiple
            changed = replace(changed, block_size=block, padding_multiple=multiple)
        axes.append(changed)
    return replace(layout, axes=tuple(axes), replicas=replicas, tile_count=replicas * prod(a.partitions for a in axes))


def derive_attention(plan: Plan, family: AttentionFamily, split: HeadSplit) -> DerivedSplit:
    """Every member's layout, the result's shape, the Gemm string and the Sum scratch for `split`."""
    if min(split.heads, split.m, split.n, split.k) < 1:
        raise IllegalSplit(f"split {split} has an empty axis")
    block = inner_block(plan, family, split.k)
    values = plan.values
    replicas = {family.left: split.n, family.right: split.m, family.result: 1}
    layouts = {v: _member_layout(values[v].parsed_layout, family.roles[v], split, block, replicas[v])
               for v in family.members}
    if family.reduces:
        layouts[family.right] = with_row_block(layouts[family.right], block)
    right, roles = values[family.right], family.roles[family.right]
    n_axis = layouts[family.right].axes[roles.index("n")]
    output_columns = n_axis.extent(_dimension_of(right, roles, "n"))
    result_shape = (split.k, *values[family.result].shape[1:]) if family.reduces else tuple(values[family.result].shape)
    scratch = None
    if family.reduces:
        total = values[family.sum_result]
        scratch = (family.sum_step,
                   sum_scratch(split.k, shard_bytes(total.shape, total.element_size, total.parsed_layout)))
    return DerivedSplit(layouts, family.result, result_shape, block, output_columns,
                        gemm_operation(plan, family.gemm_step, block, output_columns), scratch)


def attention_problems(plan: Plan, family: AttentionFamily) -> list[str]:
    """Every way the family's layouts, result shape, operation and Sum scratch disagree with its own split."""
    return own_split_problems(plan, family, current_head_split, derive_attention)
