"""Typed view of layout and precision strings, over the generic Debug syntax.

`parse_layout` and `format_layout` are exact inverses on every layout the compiler
writes; the `order` is kept as a syntax term because only its kind matters here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from math import prod

from ipuplan.errors import SyntaxProblem
from ipuplan.plan.debug_syntax import (
    Atom,
    Call,
    ListTerm,
    Struct,
    Term,
    as_int,
    as_name,
    format_term,
    int_atom,
    parse_term,
)

STANDARD = "Ipu21Standard"
INTERLEAVED = "Ipu21Interleaved"
GRANULE = {STANDARD: 16 * 1024, INTERLEAVED: 32 * 1024}
"""Bytes an AMP-aligned shard of each memory class is rounded up to (PLAN_FORMAT.md)."""
MEMORY_CLASSES = (STANDARD, INTERLEAVED)
PADDINGS = ("Zero", "Reject")
KNOWN_ORDERS = frozenset(
    {"RowMajor", "Amp(Left)", "Amp(TransposedLeft)", "Amp(TransposedRight)", "BlockMajor(Matrix)",
     "BlockMajor(TransposedMatrix)"}
)
"""Orders whose meaning ipuplan knows; a layout with another order (or padding) is kept verbatim and frozen."""
AXIS_FIELDS = (
    "axis",
    "partitions",
    "padding_groups",
    "block_size",
    "padding_multiple",
    "shard_padding_multiple",
    "padding",
    "tile_stride",
)


def ceil_div(numerator: int, denominator: int) -> int:
    """
    >>> ceil_div(7, 2), ceil_div(8, 2)
    (4, 4)
    """
    return -(-numerator // denominator)


def round_up(amount: int, multiple: int) -> int:
    """`amount` rounded up to a whole number of `multiple`s (elementwise on numpy arrays too).

    >>> round_up(7, 4), round_up(8, 4), round_up(0, 4)
    (8, 8, 0)
    """
    return ceil_div(amount, multiple) * multiple


@dataclass(frozen=True)
class Axis:
    """Which dimension an AxisTiling splits: `FromStart(k)`, `FromEnd(k)` or `Linear`."""

    kind: str
    index: int | None = None

    def dimension(self, rank: int) -> int | None:
        """The dimension index in a tensor of `rank` (None for `Linear`)."""
        if self.kind == "Linear":
            return None
        return self.index if self.kind == "FromStart" else rank - self.index

    def to_term(self) -> Term:
        if self.kind == "Linear":
            return Atom("Linear")
        return Call(self.kind, (int_atom(self.index),))

    @property
    def text(self) -> str:
        """`FromEnd(1)`, `Linear`: as the layout string names it."""
        return format_term(self.to_term())


@dataclass(frozen=True)
class AxisTiling:
    axis: Axis
    partitions: int
    padding_groups: int
    block_size: int
    padding_multiple: int
    shard_padding_multiple: int
    padding: str
    tile_stride: int | None

    def blocks(self, dim: int) -> int:
        return ceil_div(round_up(dim, self.padding_multiple), self.block_size)

    def extent(self, dim: int) -> int:
        """Elements per shard along this axis (a whole number of blocks)."""
        return self.extent_of_blocks(self.blocks(dim), self.partitions)

    def extent_of_blocks(self, blocks: int, partitions: int) -> int:
        """Elements per shard when `blocks` blocks are cut into `partitions` shards."""
        return ceil_div(blocks, partitions) * self.block_size

    def padding_problem(self, length: int) -> str | None:
        """Why this axis, over `length` elements, breaks its padding rule, or None. PLAN_FORMAT.md: `padding: Reject`
        = the dimension is a multiple of `padding_multiple` and of `block_size` (no padding)."""
        if self.padding != "Reject":
            return None
        for name, multiple in (("padding_multiple", self.padding_multiple), ("block_size", self.block_size)):
            if length % multiple:
                return (f"axis {self.axis.text} rejects padding, but its {length} elements are not a multiple of "
                        f"{name} {multiple}")
        return None


@dataclass(frozen=True)
class Layout:
    order: Term
    tile_count: int
    replicas: int
    axes: tuple[AxisTiling, ...]
    memory_class: str

    def __hash__(self) -> int:
        # layouts key the candidate levels' caches, and each lookup hashed the whole tree again (823k hashes of
        # layouts and their axes at 50k values): the hash is kept once made
        found = self.__dict__.get("_hash")
        if found is None:
            found = hash((self.order, self.tile_count, self.replicas, self.axes, self.memory_class))
            object.__setattr__(self, "_hash", found)
        return found

    def __getstate__(self) -> dict:
        # a string's hash differs from process to process: a kept hash never leaves this one
        return {name: value for name, value in self.__dict__.items() if name != "_hash"}

    @property
    def order_kind(self) -> str:
        """`RowMajor`, `Amp(Left)`, `BlockMajor(Matrix)`, ...: the order without its numbers."""
        if isinstance(self.order, Call):
            inner = self.order.args[0] if self.order.args else Atom("")
            inner_name = inner.name if isinstance(inner, (Struct, Call)) else format_term(inner)
            return f"{self.order.name}({inner_name})"
        return format_term(self.order)

    @property
    def unknown_parts(self) -> tuple[str, ...]:
        """What of this layout ipuplan does not know (an order, a padding), so must not change."""
        found = () if self.order_kind in KNOWN_ORDERS else (f"order {self.order_kind}",)
        return found + tuple(f"padding {a.padding}" for a in self.axes if a.padding not in PADDINGS)

    @property
    def partition_product(self) -> int:
        return prod(axis.partitions for axis in self.axes)

    def axis_lengths(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """Elements along each tiled axis of a tensor of `shape` (a Linear axis: the flattened tensor's)."""
        lengths = []
        for axis in self.axes:
            dimension = axis.axis.dimension(len(shape))
            lengths.append(prod(shape) if dimension is None else shape[dimension])
        return tuple(lengths)

    def largest_shard_elements(self, shape: tuple[int, ...]) -> int:
        """Elements of the largest shard of a tensor of `shape`: each tiled axis cut into whole blocks per
        partition, the other dimensions whole (a Linear axis stands alone and tiles the flattened tensor)."""
        extents = [axis.extent(length) for axis, length in zip(self.axes, self.axis_lengths(shape))]
        if any(axis.axis.kind == "Linear" for axis in self.axes):
            return prod(extents)
        tiled = {axis.axis.dimension(len(shape)) for axis in self.axes}
        return prod(extents) * prod(size for dimension, size in enumerate(shape) if dimension not in tiled)

    def padding_problem(self, shape: tuple[int, ...]) -> str | None:
        """Why a tensor of `shape` would need padding on an axis that rejects it, or None."""
        for axis, length in zip(self.axes, self.axis_lengths(shape)):
            problem = axis.padding_problem(length)
            if problem is not None:
                return problem
        return None

    def with_tiling(self, partitions: tuple[int, ...], strides: tuple[int | None, ...], replicas: int) -> Layout:
        axes = tuple(
            replace(axis, partitions=p, tile_stride=s)
            for axis, p, s in zip(self.axes, partitions, strides, strict=True)
        )
        return replace(self, axes=axes, replicas=replicas, tile_count=replicas * prod(partitions))


def _axis_from_term(term: Term) -> Axis:
    if isinstance(term, Atom) and term.text == "Linear":
        return Axis("Linear")
    if isinstance(term, Call) and term.name in ("FromStart", "FromEnd") and len(term.args) == 1:
        return Axis(term.name, as_int(term.args[0], "axis index"))
    raise SyntaxProblem(f"unknown axis {format_term(term)!r}")


def _stride_from_term(term: Term) -> int | None:
    if isinstance(term, Atom) and term.text == "None":
        return None
    if isinstance(term, Call) and term.name == "Some" and len(term.args) == 1:
        return as_int(term.args[0], "tile_stride")
    raise SyntaxProblem(f"tile_stride must be Some(n) or None, found {format_term(term)!r}")


def _struct(term: Term, name: str, fields: tuple[str, ...]) -> Struct:
    if not isinstance(term, Struct) or term.name != name:
        raise SyntaxProblem(f"expected {name} {{ .. }}, found {format_term(term)[:40]!r}")
    found = tuple(key for key, _ in term.fields)
    if found != fields:
        raise SyntaxProblem(f"{name} fields must be {', '.join(fields)}; found {', '.join(found)}")
    return term


def _axis_tiling_from_term(term: Term) -> AxisTiling:
    struct = _struct(term, "AxisTiling", AXIS_FIELDS)
    numbers = {
        key: as_int(struct.get(key), key)
        for key in ("partitions", "padding_groups", "block_size", "padding_multiple", "shard_padding_multiple")
    }
    for key in ("partitions", "block_size", "padding_multiple"):
        if numbers[key] < 1:
            raise SyntaxProblem(f"{key} must be at least 1, found {numbers[key]}")
    padding = as_name(struct.get("padding"), "padding")
    stride = _stride_from_term(struct.get("tile_stride"))
    if stride is not None and stride < 0:
        raise SyntaxProblem(f"tile_stride must not be negative, found {stride}")
    return AxisTiling(axis=_axis_from_term(struct.get("axis")), padding=padding, tile_stride=stride, **numbers)


def _axis_tiling_to_term(axis: AxisTiling) -> Struct:
    stride = Atom("None") if axis.tile_stride is None else Call("Some", (int_atom(axis.tile_stride),))
    values = {
        "axis": axis.axis.to_term(),
        "partitions": int_atom(axis.partitions),
        "padding_groups": int_atom(axis.padding_groups),
        "block_size": int_atom(axis.block_size),
        "padding_multiple": int_atom(axis.padding_multiple),
        "shard_padding_multiple": int_atom(axis.shard_padding_multiple),
        "padding": Atom(axis.padding),
        "tile_stride": stride,
    }
    return Struct("AxisTiling", tuple((key, values[key]) for key in AXIS_FIELDS))


@lru_cache(maxsize=65536)
def parse_layout(text: str) -> Layout:
    """Parse a `Layout { .. }` string; raises SyntaxProblem naming what is wrong."""
    layout = _struct(parse_term(text), "Layout", ("order", "tiling", "memory_class"))
    tiling = _struct(layout.get("tiling"), "TensorTiling", ("tile_count", "replicas", "axes"))
    axes_term = tiling.get("axes")
    if not isinstance(axes_term, ListTerm):
        raise SyntaxProblem("axes must be a list")
    memory_class = as_name(layout.get("memory_class"), "memory_class")
    if memory_class not in MEMORY_CLASSES:
        raise SyntaxProblem(f"memory_class must be one of {', '.join(MEMORY_CLASSES)}, found {memory_class!r}")
    result = Layout(
        order=layout.get("order"),
        tile_count=as_int(tiling.get("tile_count"), "tile_count"),
        replicas=as_int(tiling.get("replicas"), "replicas"),
        axes=tuple(_axis_tiling_from_term(item) for item in axes_term.items),
        memory_class=memory_class,
    )
    if result.replicas < 1 or result.tile_count < 1:
        raise SyntaxProblem("tile_count and replicas must be at least 1")
    return result


@lru_cache(maxsize=65536)
def padding_problem_of(layout: str, shape: tuple[int, ...]) -> str | None:
    """`Layout.padding_problem` keyed by the layout's text (cached: a large plan repeats a few hundred tensors)."""
    return parse_layout(layout).padding_problem(shape)


@lru_cache(maxsize=4096)
def format_layout(layout: Layout) -> str:
    """The compiler's text of `layout`; cached, as a large plan's few distinct layouts are printed again and again."""
    tiling = Struct(
        "TensorTiling",
        (
            ("tile_count", int_atom(layout.tile_count)),
            ("replicas", int_atom(layout.replicas)),
            ("axes", ListTerm(tuple(_axis_tiling_to_term(axis) for axis in layout.axes))),
        ),
    )
    term = Struct("Layout", (("order", layout.order), ("tiling", tiling), ("memory_class", Atom(layout.memory_class))))
    return format_term(term)


@lru_cache(maxsize=1024)
def element_size(precision: str) -> int:
    """Bytes per element of a precision string (`F16`, `F32`, `F8F143 { .. }`, ...)."""
    term = parse_term(precision)
    name = term.name if isinstance(term, (Struct, Call)) else format_term(term)
    sizes = {"F32": 4, "I32": 4, "U32": 4, "F16": 2, "BF16": 2, "I16": 2, "I8": 1, "U8": 1, "Bool": 1}
    if name in sizes:
        return sizes[name]
    if name.startswith("F8"):
        return 1
    raise SyntaxProblem(f"unknown precision {precision!r}")
