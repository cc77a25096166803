"""Typed view of step operation strings.

Every operation string parses into an `Operation`: its `kind` (the first name), the
syntax terms, and typed accessors for the kinds ipuplan reasons about. Unknown kinds
are kept verbatim; `is_known` is False for them, and the optimiser freezes what they touch.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache

from ipuplan.errors import SyntaxProblem
from ipuplan.plan.debug_syntax import Atom, Call, ListTerm, Struct, Term, as_int, format_terms, int_atom, parse_terms
from ipuplan.plan.layout import element_size

KNOWN_KINDS = frozenset(
    {
        "Gemm",
        "Copy",
        "Sum",
        "Convert",
        "Repeat",
        "Add",
        "Gelu",
        "LayerNorm",
        "LayerNormMoments",
        "LayerNormApply",
        "AttentionSoftmax",
        "AttentionMerge",
    }
)
GEMM_BLOCKS = ("inner_block", "output_columns")
MOVER_CONVERSIONS = frozenset({"DirectRetile", "StageLogicalThenTransform"})
IN_PLACE_KINDS = frozenset({"Add", "Gelu", "Repeat"})


@dataclass(frozen=True)
class Operation:
    """An operation's terms, and what ipuplan reads of them, each worked out once: `parse_operation` gives one object
    per text, so a plan's steps that repeat a text share its readings (a large plan repeats a few dozen texts)."""

    terms: tuple[Term, ...]

    @cached_property
    def kind(self) -> str:
        head = self.terms[0]
        return head.name if isinstance(head, (Struct, Call)) else head.text

    @cached_property
    def text(self) -> str:
        return format_terms(self.terms)

    @cached_property
    def is_known(self) -> bool:
        return self.kind in KNOWN_KINDS

    @cached_property
    def conversion(self) -> str | None:
        """`LocalKernel`, `DirectRetile`, ... for `Convert X`, else None."""
        if self.kind == "Convert" and len(self.terms) == 2 and isinstance(self.terms[1], Atom):
            return self.terms[1].text
        return None

    @cached_property
    def struct(self) -> Struct | None:
        head = self.terms[0]
        return head if isinstance(head, Struct) and len(self.terms) == 1 else None

    @cached_property
    def copy_view(self) -> Term | None:
        """The `view` of a Copy's mapping (Atom('None') when there is none)."""
        struct = self.struct
        if self.kind != "Copy" or struct is None:
            return None
        mapping = _field(struct, "mapping", "Copy")
        return _field(mapping, "view", "Copy mapping") if isinstance(mapping, Struct) else None

    @cached_property
    def copy_offsets(self) -> tuple[int, ...]:
        struct = self.struct
        if self.kind != "Copy" or struct is None:
            return ()
        mapping = _field(struct, "mapping", "Copy")
        offsets = _field(mapping, "offsets", "Copy mapping") if isinstance(mapping, Struct) else None
        return tuple(as_int(t, "offset") for t in offsets.items) if isinstance(offsets, ListTerm) else ()

    @cached_property
    def has_view(self) -> bool:
        view = self.copy_view
        return view is not None and not (isinstance(view, Atom) and view.text == "None")

    @cached_property
    def is_mover(self) -> bool:
        """Steps that only move data: any layout of their operands is legal."""
        return self.kind == "Copy" or self.conversion in MOVER_CONVERSIONS

    @cached_property
    def is_in_place(self) -> bool:
        return self.kind in IN_PLACE_KINDS

    @cached_property
    def sum_axis(self) -> int | None:
        struct = self.struct
        if self.kind != "Sum" or struct is None:
            return None
        return as_int(_field(struct, "axis", "Sum"), "Sum axis")

    @cached_property
    def gemm_numbers(self) -> tuple[int, ...]:
        """A Gemm's fields ipuplan reads, where present: `inner_block` and `output_columns` (at least 1), and the
        element size of its `multiply` precision (the K block's granule). Raises SyntaxProblem on one it cannot read."""
        struct = self.struct
        if self.kind != "Gemm" or struct is None:
            return ()
        fields = dict(struct.fields)
        numbers = tuple(as_int(fields[key], key) for key in GEMM_BLOCKS if key in fields)
        if min(numbers, default=1) < 1:
            raise SyntaxProblem(f"Gemm {' and '.join(GEMM_BLOCKS)} must be at least 1, found {min(numbers)}")
        if "multiply" in fields:
            numbers += (element_size(format_terms((fields["multiply"],))),)
        return numbers

    def gemm_field(self, key: str) -> int:
        struct = self.struct
        if self.kind != "Gemm" or struct is None:
            raise KeyError(key)
        return as_int(struct.get(key), key)

    def with_gemm_fields(self, **fields: int) -> Operation:
        struct = self.struct
        if self.kind != "Gemm" or struct is None:
            raise KeyError("not a Gemm")
        for key, value in fields.items():
            struct = struct.replace(key, int_atom(value))
        return Operation((struct,))


def _field(struct: Struct, key: str, what: str) -> Term:
    try:
        return struct.get(key)
    except KeyError:
        raise SyntaxProblem(f"{what} without {key}") from None


@lru_cache(maxsize=4096)
def parse_operation(text: str) -> Operation:
    """Parse an operation string; raises SyntaxProblem when it is not well-formed Debug text."""
    return Operation(parse_terms(text))


@lru_cache(maxsize=4096)
def operation_problem(text: str) -> str | None:
    """Why ipuplan cannot read an operation string, or None: not well-formed, or a field it reads missing or
    malformed (a Copy's mapping offsets and view, a Sum's axis). The loader asks, so no later reader meets one."""
    try:
        _read_fields(parse_operation(text))
    except SyntaxProblem as problem:
        return str(problem)
    return None


def _read_fields(operation: Operation) -> tuple:
    """Every field ipuplan reads of an operation; each accessor raises SyntaxProblem on one it cannot read."""
    return operation.copy_offsets, operation.copy_view, operation.sum_axis, operation.gemm_numbers
