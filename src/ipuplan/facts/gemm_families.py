"""Gemm families: the values one lowered matmul uses, and their split (pK, pM, pN).

PLAN_FORMAT.md, "How a logical op is lowered": `Convert LocalKernel` (left operand F16 -> F8,
same tiling), `Copy` (right operand into the Gemm layout), `Gemm` (partials `[pK, ...]`),
`Sum { axis: 0 }` (reduce the pK partials). One split fixes all their layouts:
left (K: pK, M: pM, replicas pN); right (K: pK, N: pN, replicas pM); partials (N: pN,
M: pM, axis 0: pK); the Sum result spreads a x b (a*b divides pK) over N and M;
`inner_block` = the K block, `output_columns` = the right operand's columns per shard,
Sum scratch = (pK + 1) * shard(result) (`sum_scratch`, for attention products too). This module
recognises families, checks that a plan's layouts agree with one split, and derives every layout
for another split.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from math import prod
from typing import TypeVar

from ipuplan.errors import IpuplanError
from ipuplan.facts.dataflow import Dataflow
from ipuplan.facts.estimate import shard_bytes
from ipuplan.plan.debug_syntax import Call, Struct, format_term, int_atom
from ipuplan.plan.format import Plan, Value
from ipuplan.plan.layout import Layout, ceil_div, element_size, round_up
from ipuplan.plan.operation import parse_operation

LEFT_ORDERS = {"Amp(Left)": ("m", "k"), "Amp(TransposedLeft)": ("k", "m")}
RIGHT_ORDERS = {"BlockMajor(Matrix)": ("k", "n"), "BlockMajor(TransposedMatrix)": ("n", "k")}
"""Which of the last two dimensions is which, per order."""
Family = TypeVar("Family")
AnySplit = TypeVar("AnySplit")


class IllegalSplit(IpuplanError, ValueError):
    """A split the family's shapes or kernel rules do not allow; the message says why."""


class NotAFamily(ValueError):
    """A Gemm whose operands or reduction do not follow the lowered pattern; the message says why."""


@dataclass(frozen=True)
class Split:
    k: int
    m: int
    n: int
    sum_n: int = 1
    """The factor `a` of pK spread over the Sum result's N axis."""
    sum_m: int = 1

    @property
    def tiles(self) -> int:
        return self.k * self.m * self.n

    def __str__(self) -> str:
        return f"(pK={self.k}, pM={self.m}, pN={self.n})"


@dataclass(frozen=True)
class KernelFamily:
    gemm_step: int
    sum_step: int
    local_kernel_step: int | None
    left: int
    left_source: int | None
    """The F16 left operand the LocalKernel converts (None when the Gemm reads a program input)."""
    right: int
    partials: int
    sum_result: int
    left_axes: dict[str, int]
    """Role ("k", "m") -> position in the left layout's axes; likewise below."""
    right_axes: dict[str, int]
    partial_axes: dict[str, int]
    sum_axes: dict[str, int]

    @property
    def members(self) -> tuple[int, ...]:
        optional = (self.left_source,) if self.left_source is not None else ()
        return (*optional, self.left, self.right, self.partials, self.sum_result)

    @property
    def steps(self) -> frozenset[int]:
        """The family's own kernels: they read and write its members in whatever layout its split gives them."""
        return frozenset(s for s in (self.local_kernel_step, self.gemm_step, self.sum_step) if s is not None)


def axis_positions(value: Value, layout: Layout, roles_by_dimension: dict[int, str]) -> dict[str, int] | None:
    rank = len(value.shape)
    found = {}
    for position, axis in enumerate(layout.axes):
        dimension = axis.axis.dimension(rank)
        if dimension not in roles_by_dimension:
            return None
        found[roles_by_dimension[dimension]] = position
    return found if len(found) == len(roles_by_dimension) else None


def _recognise(plan: Plan, flow: Dataflow, family) -> KernelFamily:
    """The Gemm's family in the PLAN_FORMAT.md pattern; raises NotAFamily saying why it is not one."""
    values = plan.values
    gemm = plan.steps[family.gemm_step].parsed_operation
    if family.left is None or family.right is None or family.partials is None or family.sum_result is None:
        raise NotAFamily("operands, partials or Sum result not identified")
    if gemm.struct is None or {"inner_block", "output_columns"} - {k for k, _ in gemm.struct.fields}:
        raise NotAFamily("Gemm without inner_block / output_columns")
    if plan.steps[family.sum_step].parsed_operation.sum_axis != 0:
        raise NotAFamily("the partials are not reduced by `Sum { axis: 0 }`")
    left, right, partials, total = (values[v] for v in (family.left, family.right, family.partials, family.sum_result))
    left_layout, right_layout = left.parsed_layout, right.parsed_layout
    left_roles = LEFT_ORDERS.get(left_layout.order_kind)
    right_roles = RIGHT_ORDERS.get(right_layout.order_kind)
    if left_roles is None or right_roles is None:
        raise NotAFamily(f"operand orders {left_layout.order_kind} / {right_layout.order_kind} "
                         "are not a left/right pair")
    if list(partials.shape[1:]) != list(total.shape):
        raise NotAFamily("partials are not [pK, ...Sum result]")
    left_axes = axis_positions(
        left, left_layout, {len(left.shape) - 2: left_roles[0], len(left.shape) - 1: left_roles[1]}
    )
    right_axes = axis_positions(
        right, right_layout, {len(right.shape) - 2: right_roles[0], len(right.shape) - 1: right_roles[1]}
    )
    if left_axes is None or right_axes is None:
        raise NotAFamily("operands are not tiled on exactly their last two dimensions")
    sizes = {"k": left.shape[len(left.shape) - 2 + left_roles.index("k")],
             "m": left.shape[len(left.shape) - 2 + left_roles.index("m")],
             "n": right.shape[len(right.shape) - 2 + right_roles.index("n")]}
    if sizes["k"] != right.shape[len(right.shape) - 2 + right_roles.index("k")]:
        raise NotAFamily("left and right operands disagree on K")
    blocks = {"m": left_layout.axes[left_axes["m"]].block_size, "n": right_layout.axes[right_axes["n"]].block_size}
    sum_dims = _output_dimensions(total, sizes, blocks)
    if sum_dims is None:
        raise NotAFamily("cannot tell the Sum result's M and N dimensions apart")
    sum_axes = axis_positions(total, total.parsed_layout, sum_dims)
    partial_axes = axis_positions(partials, partials.parsed_layout, {0: "k", **{d + 1: r for d, r in sum_dims.items()}})
    if sum_axes is None or partial_axes is None:
        raise NotAFamily("partials or Sum result are not tiled on exactly M, N (and pK)")
    if any(a.tile_stride is not None for a in left_layout.axes):
        raise NotAFamily("left operand with placed tile strides")
    writers = flow.writers.get(family.left, ())
    local = writers[-1] if writers else None
    local_kernel = (local if local is not None and plan.steps[local].parsed_operation.conversion == "LocalKernel"
                    else None)
    return KernelFamily(
        gemm_step=family.gemm_step,
        sum_step=family.sum_step,
        local_kernel_step=local_kernel,
        left=family.left,
        left_source=family.left_source if local_kernel is not None else None,
        right=family.right,
        partials=family.partials,
        sum_result=family.sum_result,
        left_axes=left_axes,
        right_axes=right_axes,
        partial_axes=partial_axes,
        sum_axes=sum_axes,
    )


def _output_dimensions(total: Value, sizes: dict[str, int], blocks: dict[str, int]) -> dict[int, str] | None:
    """Which dimension of the Sum result is M and which is N, by size and block."""
    layout = total.parsed_layout
    rank = len(total.shape)
    found: dict[int, str] = {}
    for axis in layout.axes:
        dimension = axis.axis.dimension(rank)
        if dimension is None:
            return None
        matches = [r for r in ("m", "n") if total.shape[dimension] == sizes[r] and axis.block_size == blocks[r]]
        if len(matches) != 1:
            return None
        found[dimension] = matches[0]
    return found if sorted(found.values()) == ["m", "n"] else None


def recognise_families(plan: Plan, flow: Dataflow) -> tuple[list[KernelFamily], list[tuple[int, str]]]:
    """Families in the PLAN_FORMAT.md pattern, and (Gemm step, reason) for every other Gemm."""
    families, rejected = [], []
    for family in flow.families:
        if family.sum_step is None:
            rejected.append((family.gemm_step, "no step reduces its result"))
            continue
        try:
            families.append(_recognise(plan, flow, family))
        except NotAFamily as reason:
            rejected.append((family.gemm_step, str(reason)))
    return families, rejected


def current_split(plan: Plan, family: KernelFamily) -> Split:
    partials = plan.values[family.partials].parsed_layout.axes
    total = plan.values[family.sum_result].parsed_layout.axes
    k, m, n = (partials[family.partial_axes[r]].partitions for r in ("k", "m", "n"))
    sum_n = total[family.sum_axes["n"]].partitions // max(n, 1)
    sum_m = total[family.sum_axes["m"]].partitions // max(m, 1)
    return Split(k, m, n, sum_n, sum_m)


def inner_block_granule(plan: Plan, gemm_step: int) -> int:
    """K blocks must be whole multiples of 32 bytes of the Gemm's multiply precision."""
    multiply = plan.steps[gemm_step].parsed_operation.struct.get("multiply")
    return max(1, 32 // element_size(format_term(multiply)))


def inner_block_for(k_dimension: int, k: int, granule: int) -> int | None:
    """The K block that cuts K into exactly `k` blocks of a whole number of granules, if one does.

    >>> inner_block_for(1152, 4, 32), inner_block_for(588, 4, 32), inner_block_for(1152, 7, 32)
    (288, 160, None)
    """
    block = round_up(ceil_div(k_dimension, k), granule)
    return block if ceil_div(k_dimension, block) == k else None


def sum_scratch(k, result_shard):
    """The scratch of a `Sum { axis: 0 }` over pK = `k` partials: `k + 1` shards of its result (ints or arrays)."""
    return (k + 1) * result_shard


def sum_scratch_interleaved(plan: Plan, sum_step: int) -> bool:
    """Whether the compiler put the Sum's scratch in interleaved memory; a re-split keeps it in that class."""
    given = plan.steps[sum_step].scratch
    return given.standard == 0 and given.interleaved > 0


def placed_sum_scratch(plan: Plan, sum_step: int, amount: int) -> tuple[int, int, int]:
    """(step, standard, interleaved): the Sum's scratch for another split, in the class the input put it in."""
    return (sum_step, 0, amount) if sum_scratch_interleaved(plan, sum_step) else (sum_step, amount, 0)


def sum_scratch_problems(plan: Plan, sum_step: int, expected: int) -> list[str]:
    """The Sum's scratch, in whichever class, when it is not `expected` (`sum_scratch` of the plan's own split)."""
    scratch = plan.steps[sum_step].scratch
    total = scratch.standard + scratch.interleaved
    return [] if total == expected else [f"Sum scratch {total} is not (pK+1) x shard = {expected}"]


def family_problems(plan: Plan, family: KernelFamily) -> list[str]:
    """Every way the family's layouts, partials, operation and Sum scratch disagree with its own split."""
    return own_split_problems(plan, family, current_split, derive)


def own_split_problems(plan: Plan, family: Family, current_split_of: Callable[[Plan, Family], AnySplit],
                       derive_split: Callable[[Plan, Family, AnySplit], DerivedSplit]) -> list[str]:
    """Every way a family (Gemm or attention) disagrees with the derivation of its own split, which
    `current_split_of(plan, family)` reads and `derive_split(plan, family, split)` derives."""
    split = current_split_of(plan, family)
    try:
        return split_problems(plan, derive_split(plan, family, split), str(split))
    except IllegalSplit as problem:
        return [str(problem)]


def split_problems(plan: Plan, expected: DerivedSplit, split: str) -> list[str]:
    """Every way a family of `plan` disagrees with `expected`, the derivation of its own split (named `split`)."""
    problems = []
    for value_id, layout in expected.layouts.items():
        actual = plan.values[value_id].parsed_layout
        if tiling_key(actual) != tiling_key(layout):
            problems.append(f"value {value_id} is not tiled as split {split} requires")
        elif actual.order != layout.order:
            problems.append(f"value {value_id} order disagrees with the K block (row_block {expected.inner_block})")
    shape = plan.values[expected.result].shape
    if tuple(shape) != expected.result_shape:
        problems.append(f"result {expected.result} shape {shape} is not {list(expected.result_shape)}")
    operation = plan.steps[expected.operation[0]].parsed_operation
    for key, value in (("inner_block", expected.inner_block), ("output_columns", expected.output_columns)):
        if operation.gemm_field(key) != value:
            problems.append(f"{key} {operation.gemm_field(key)} but split {split} needs {value}")
    if expected.sum_scratch is not None:
        problems += sum_scratch_problems(plan, *expected.sum_scratch)
    return problems


def tiling_key(layout: Layout) -> tuple:
    return (layout.tile_count, layout.replicas, layout.memory_class,
            tuple((a.axis, a.partitions, a.block_size, a.padding_multiple, a.tile_stride) for a in layout.axes))


@dataclass(frozen=True)
class DerivedSplit:
    """Everything one split of a Gemm family or attention product fixes: what a candidate writes, what `check`
    compares a plan with."""

    layouts: dict[int, Layout]
    """Member -> its layout."""
    result: int
    """The Gemm's result (partials `[pK, ...]`, or an attention product's scores): the member whose shape may change."""
    result_shape: tuple[int, ...]
    inner_block: int
    output_columns: int
    operation: tuple[int, str]
    """(Gemm step, its operation text with this split's `inner_block` and `output_columns`)."""
    sum_scratch: tuple[int, int] | None
    """(Sum step, its scratch bytes); None when no Sum reduces the result."""


def gemm_operation(plan: Plan, gemm_step: int, inner_block: int, output_columns: int) -> tuple[int, str]:
    """(step, text): the Gemm's operation with another split's K block and columns per shard."""
    operation = parse_operation(plan.steps[gemm_step].operation)
    return gemm_step, operation.with_gemm_fields(inner_block=inner_block, output_columns=output_columns).text


def _set_axis(layout: Layout, position: int, **changes) -> Layout:
    axes = list(layout.axes)
    axes[position] = replace(axes[position], **changes)
    return replace(layout, axes=tuple(axes))


def with_row_block(layout: Layout, inner_block: int) -> Layout:
    order = layout.order
    if isinstance(order, Call) and order.args and isinstance(order.args[0], Struct):
        inner = order.args[0]
        if "row_block" in {k for k, _ in inner.fields}:
            return replace(layout, order=Call(order.name, (inner.replace("row_block", int_atom(inner_block)),)))
    return layout


def _finish(layout: Layout, replicas: int) -> Layout:
    return replace(layout, replicas=replicas, tile_count=replicas * prod(a.partitions for a in layout.axes))


def derive(plan: Plan, family: KernelFamily, split: Split) -> DerivedSplit:
    """Every member's layout, the partials' shape, the Gemm string and the Sum scratch for `split`.

    Raises IllegalSplit when the split cannot be laid out.
    """
    if min(split.k, split.m, split.n, split.sum_n, split.sum_m) < 1 or split.k % (split.sum_n * split.sum_m):
        raise IllegalSplit(f"split {split} with Sum spread {split.sum_n} x {split.sum_m} is not a split of pK")
    values = plan.values
    left = values[family.left].parsed_layout
    k_dimension = values[family.left].shape[_dimension(values[family.left], left, family.left_axes["k"])]
    granule = inner_block_granule(plan, family.gemm_step)
    inner_block = inner_block_for(k_dimension, split.k, granule)
    if inner_block is None:
        raise IllegalSplit(f"pK={split.k} does not cut K={k_dimension} into {split.k} blocks "
                           f"of a multiple of {granule}")
    if k_dimension % inner_block and left.axes[family.left_axes["k"]].padding == "Reject":
        raise IllegalSplit(f"K={k_dimension} rejects padding, and blocks of {inner_block} would pad it")
    k_axis = {"block_size": inner_block, "padding_multiple": inner_block, "partitions": split.k}
    new_left = _set_axis(_set_axis(left, family.left_axes["k"], **k_axis), family.left_axes["m"], partitions=split.m)
    new_left = _finish(new_left, split.n)
    right = values[family.right].parsed_layout
    k_stride = None if right.axes[family.right_axes["k"]].tile_stride is None else split.n
    n_stride = None if right.axes[family.right_axes["n"]].tile_stride is None else 1
    new_right = _set_axis(right, family.right_axes["k"], tile_stride=k_stride, **k_axis)
    new_right = _finish(with_row_block(_set_axis(new_right, family.right_axes["n"], partitions=split.n,
                                                 tile_stride=n_stride), inner_block), split.m)
    partials = values[family.partials].parsed_layout
    new_partials = _set_axis(partials, family.partial_axes["k"], partitions=split.k, tile_stride=split.n)
    new_partials = _set_axis(new_partials, family.partial_axes["n"], partitions=split.n, tile_stride=1)
    new_partials = _finish(_set_axis(new_partials, family.partial_axes["m"], partitions=split.m,
                                     tile_stride=split.n * split.k), 1)
    total = values[family.sum_result].parsed_layout
    n_parts = split.n * split.sum_n
    new_total = _set_axis(total, family.sum_axes["n"], partitions=n_parts, tile_stride=1)
    new_total = _finish(_set_axis(new_total, family.sum_axes["m"], partitions=split.m * split.sum_m,
                                  tile_stride=n_parts), 1)
    layouts = {family.left: new_left, family.right: new_right, family.partials: new_partials,
               family.sum_result: new_total}
    if family.left_source is not None:
        source = values[family.left_source].parsed_layout
        layouts[family.left_source] = replace(new_left, order=source.order, memory_class=source.memory_class)
    right_value = values[family.right]
    n_axis = new_right.axes[family.right_axes["n"]]
    n_dimension = right_value.shape[_dimension(right_value, new_right, family.right_axes["n"])]
    output_columns = n_axis.extent(n_dimension)
    total = values[family.sum_result]
    scratch = sum_scratch(split.k, shard_bytes(total.shape, total.element_size, new_total))
    return DerivedSplit(layouts, family.partials, (split.k, *values[family.partials].shape[1:]), inner_block,
                        output_columns, gemm_operation(plan, family.gemm_step, inner_block, output_columns),
                        (family.sum_step, scratch))


def _dimension(value: Value, layout: Layout, position: int) -> int:
    return layout.axes[position].axis.dimension(len(value.shape))
