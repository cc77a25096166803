"""The plan file: immutable pydantic models, loading with located errors, exact dumping.

Strings (layouts, operations, precisions) are stored verbatim; their typed views come
from `ipuplan.plan.layout` and `ipuplan.plan.operation`. Unknown keys are kept (``extra="allow"``)
and written back, so a plan from a newer compiler survives a round trip.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import re
import select
import stat
import sys
import weakref
from collections.abc import Mapping
from functools import lru_cache, partial
from math import prod
from pathlib import Path
from typing import Annotated, Any, ClassVar, NoReturn, Self

import numpy as np
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from ipuplan.errors import PlanError, SyntaxProblem
from ipuplan.plan.collector import gc_paused
from ipuplan.plan.layout import GRANULE, Layout, element_size, parse_layout, round_up
from ipuplan.plan.operation import Operation, operation_problem, parse_operation
from ipuplan.plan.outputs import write_atomically

MAX_COUNT = 2**48
"""Larger numbers than this are not plausible ids or counts; they are rejected."""

MAX_BYTES = 2**40
"""Most bytes per tile a value or a step's scratch may take (a tile holds less than 2**20): past it a plan is
damaged, and its sums would pass what the solver's integers hold."""

MAX_PLAN_BYTES = 2**47
"""Most bytes per tile all values together may take (each step's usage then stays below MAX_COUNT)."""

MAX_ELEMENTS = 2**40
"""Most elements a tensor may have (a whole IPU holds less than 2**30 bytes)."""

MAX_TILES = 2**20
"""Most tiles a chip may have (an IPU has 1,472; a POD-64 of them, 94,208)."""

SUPPORTED_VERSIONS = (1,)
"""The format versions this loader understands; any other is refused before its fields are read."""

MAX_DEPTH = 64
"""Deepest JSON nesting accepted. A plan nests about 8 levels; far deeper input only threatens the stack."""

MAX_INPUT_BYTES = 1 << 30
"""The most bytes a plan file may have unless `IPUPLAN_MAX_INPUT_BYTES` (or `load_plan(..., max_bytes=)`) says
otherwise. The largest plan optimised (200,640 values, `benchmarks/scaling.py`) is about 220 MB: 1 GiB refuses only
what is no plan (`/dev/zero`, a runaway file), before memory runs out. A load peaks at about 8x the file's size (a
117 MB plan of 105,600 values: 950 MB), so a plan near the limit needs a large machine."""

INPUT_LIMIT_VARIABLE = "IPUPLAN_MAX_INPUT_BYTES"

PIPE_WAIT_SECONDS = 60.0
"""How long a pipe (a FIFO, `/dev/stdin`) may send nothing before its read is given up: a writer that stalls
must not hold the run forever."""

Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]
Positive = Annotated[int, Field(ge=1, le=MAX_COUNT)]
Bytes = Annotated[int, Field(ge=0, le=MAX_BYTES)]
Dimension = Annotated[int, Field(ge=1, le=MAX_ELEMENTS)]


class FrozenList(list):
    """A list that refuses every change: the live sets, shapes, values and steps of a plan (issue 35).

    A list rather than a tuple, so that it still equals the lists ipuplan and its callers build and compare with
    (`step.live == [3, 5]`) and is written back as the same JSON. A changed plan is a copy: `model_copy(update=...)`."""

    __slots__ = ()

    def _refused(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError("a plan cannot be changed in place: build a changed copy with model_copy(update=...)")

    append = extend = insert = pop = remove = clear = sort = reverse = _refused
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refused

    def __reduce__(self) -> tuple[type, tuple[list]]:
        # pickle and deepcopy would otherwise rebuild it by appending, which it refuses
        return type(self), (list(self),)


def _frozen_list(items: list | tuple) -> FrozenList:
    return items if type(items) is FrozenList else FrozenList(items)


_set_slot = object.__setattr__  # a frozen model refuses its own __setattr__


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, strict=True, extra="allow", populate_by_name=True)

    _list_fields: ClassVar[frozenset[str]] = frozenset()
    """The fields that hold a FrozenList: validation freezes them, `model_copy` too."""

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy with `update` applied. model_copy does not validate, so the lists it is given for the list fields
        are frozen here, as validation freezes them: no caller keeps a handle that changes the copy."""
        if update and not self._list_fields.isdisjoint(update):
            update = {key: _frozen_list(item) if key in self._list_fields and isinstance(item, (list, tuple)) else item
                      for key, item in update.items()}
        if deep or self.__pydantic_private__ is not None:
            return BaseModel.model_copy(self, update=update, deep=deep)  # not super(): 200,000 calls at 50k values
        return self._shallow_copy(update or {})

    def _shallow_copy(self, update: Mapping[str, Any]) -> Self:
        """`BaseModel.model_copy(update=update)` as pydantic 2 makes it for a model without private attributes:
        fields to `__dict__`, unknown keys to the extra ones, both named in the fields set. Its `__copy__` copies
        those three containers through `copy.copy`'s generic dispatch: 0.45 s of a 50,160-value rewrite's 145k
        copies (tests/test_format.py holds the two equal)."""
        cls = type(self)
        copied = cls.__new__(cls)
        fields, extra = self.__dict__.copy(), self.__pydantic_extra__
        extra = None if extra is None else extra.copy()
        for key, item in update.items():
            if key in cls.__pydantic_fields__:
                fields[key] = item
            else:
                extra = {} if extra is None else extra
                extra[key] = item
        _set_slot(copied, "__dict__", fields)
        _set_slot(copied, "__pydantic_extra__", extra)
        _set_slot(copied, "__pydantic_fields_set__", self.__pydantic_fields_set__ | update.keys())
        _set_slot(copied, "__pydantic_private__", None)
        return copied


class ClassBytes(_Frozen):
    standard: Count
    interleaved: Count


class Peak(_Frozen):
    standard: Count
    interleaved: Count
    total: Count
    exchange_rows: Count
    maximum_standard_allocation: Count


class Value(_Frozen):
    id: Count
    origin: Count
    root: Count
    name: str
    group: str
    shape: Annotated[list[Dimension], AfterValidator(FrozenList)]
    precision: str
    layout: str
    layout_error: str | None
    memory_class: str = Field(alias="class")
    storage_group: Count
    shard_bytes: Bytes
    aligned_bytes: Bytes
    copies: Positive
    bytes: Bytes

    _list_fields: ClassVar[frozenset[str]] = frozenset({"shape"})

    @property
    def parsed_layout(self) -> Layout:
        return parse_layout(self.layout)

    @property
    def element_size(self) -> int:
        return element_size(self.precision)

    @property
    def is_alias(self) -> bool:
        return self.root != self.id


class Step(_Frozen):
    index: Count
    source: Count
    operation: str
    execution_count: Positive
    live: Annotated[list[Count], AfterValidator(FrozenList)]
    scratch: ClassBytes
    usage: ClassBytes

    _list_fields: ClassVar[frozenset[str]] = frozenset({"live"})

    @property
    def parsed_operation(self) -> Operation:
        return parse_operation(self.operation)


class Timeline(_Frozen):
    values: Annotated[list[Value], Field(min_length=1), AfterValidator(FrozenList)]
    steps: Annotated[list[Step], Field(min_length=1), AfterValidator(FrozenList)]

    _list_fields: ClassVar[frozenset[str]] = frozenset({"values", "steps"})


class Plan(_Frozen):
    version: Count
    scope: str
    model: str
    tile_count: Annotated[int, Field(ge=1, le=MAX_TILES)]
    budget_bytes: Bytes
    interleaved_budget_bytes: Bytes
    standard_contiguous_overflow_bytes: Count
    fits_budget: bool
    support_reserve_bytes: Bytes
    effective_peak_bytes: Count
    peak: Peak
    total_peak_step: Count
    standard_peak_step: Count
    interleaved_peak_step: Count
    gemm_output_packing: str
    attention_products: str
    timeline: Timeline

    @property
    def values(self) -> list[Value]:
        return self.timeline.values

    @property
    def steps(self) -> list[Step]:
        return self.timeline.steps

    def snapshot(self) -> Plan:
        """This plan as a run may read it while its caller goes on: itself when its lists are frozen (loading,
        validation and `model_copy` freeze them), else a copy whose lists are (`model_construct` does not).

        PlanError when a live set names a value the plan does not have: `model_copy` does not validate, and a run
        would index past the values (IndexError), or with a negative id read another value without a word. A
        timeline checked as it loaded is not walked again (`_checked_timelines`)."""
        if _was_checked(self.timeline):
            return self
        plan = self if self._lists_frozen() else self._refrozen()
        problem = plan._unknown_live_id()
        if problem is not None:
            raise problem
        return plan

    def _lists_frozen(self) -> bool:
        timeline = self.timeline
        return (type(timeline.values) is FrozenList and type(timeline.steps) is FrozenList
                and all(type(value.shape) is FrozenList for value in timeline.values)
                and all(type(step.live) is FrozenList for step in timeline.steps))

    def _refrozen(self) -> Plan:
        """A copy whose lists are frozen (`model_copy` freezes the lists it is given)."""
        values = [value.model_copy(update={"shape": value.shape}) for value in self.timeline.values]
        steps = [step.model_copy(update={"live": step.live}) for step in self.timeline.steps]
        return self.model_copy(update={"timeline": self.timeline.model_copy(update={"values": values, "steps": steps})})

    def _unknown_live_id(self) -> PlanError | None:
        """The error naming the first live id that is no value's (negative, past the last, or a string), or None."""
        count = len(self.timeline.values)
        for position, step in enumerate(self.timeline.steps):
            try:  # two passes in C per step (45 ms at 50k values), where a walk per id would take 100
                fine = not step.live or (min(step.live) >= 0 and max(step.live) < count)
            except TypeError:  # a string among the ids
                fine = False
            if not fine:
                slot = next(slot for slot, value_id in enumerate(step.live)
                            if not isinstance(value_id, int) or not 0 <= value_id < count)
                return PlanError(f"value id {step.live[slot]!r} does not exist (plan has {count} values)",
                                 location=f"timeline.steps[{position}].live[{slot}]")
        return None


def _location(loc: tuple[Any, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _first_validation_problem(error: ValidationError) -> PlanError:
    problem = error.errors()[0]
    message = problem["msg"]
    if problem["type"] == "missing":
        message = "missing field"
    elif "input" in problem and not isinstance(problem["input"], (dict, list)):
        message = f"{message} (found {problem['input']!r})"
    return PlanError(message, location=_location(problem["loc"]))


def _check_value_strings(value: Value, where: str) -> None:
    problem = _value_strings_problem(value.precision, value.layout, len(value.shape), value.memory_class)
    if problem is not None:
        field, message = problem
        raise PlanError(message, location=f"{where}.{field}")


@lru_cache(maxsize=65536)
def _value_strings_problem(precision: str, layout: str, rank: int, memory_class: str) -> tuple[str, str] | None:
    """(field, message) of the first thing wrong with a value's strings, or None.

    Cached: the values of a large plan share a few hundred of these combinations.
    """
    for field, text, parse in (("precision", precision, element_size), ("layout", layout, parse_layout)):
        try:
            parse(text)
        except SyntaxProblem as problem:
            return field, f"malformed {field}: {problem}"
    axes = parse_layout(layout).axes
    dimensions = [axis.axis.dimension(rank) for axis in axes]
    for axis, dimension in zip(axes, dimensions):
        if dimension is not None and not 0 <= dimension < rank:
            name = f"{axis.axis.kind}({axis.axis.index})"
            return "layout", f"layout axis {name} does not exist in a rank-{rank} shape"
    if len(set(dimensions)) != len(dimensions) or (None in dimensions and len(dimensions) > 1):
        return "layout", "layout tiles a dimension twice (or Linear beside other axes)"
    layout_class = parse_layout(layout).memory_class
    if memory_class != layout_class:
        return "class", f"class {memory_class!r} differs from the layout's memory_class {layout_class!r}"
    return None


def _check_live(values: list[Value], aliases: frozenset[int], step: Step, where: str) -> None:
    live, count = step.live, len(values)
    if max(live, default=-1) >= count or not aliases.isdisjoint(live):  # in C; the slot is found only when refusing
        slot = next(slot for slot, value_id in enumerate(live) if value_id >= count or value_id in aliases)
        raise _not_live_problem(values, live[slot], f"{where}.live[{slot}]")
    if len(set(live)) < len(live):  # a set is cheap; finding the slot is slow but only runs when refusing
        slot = next(slot for slot, value_id in enumerate(live) if live.index(value_id) < slot)
        raise PlanError(f"value {live[slot]} is listed twice in the live set", location=f"{where}.live[{slot}]")


def _not_live_problem(values: list[Value], value_id: int, location: str) -> PlanError:
    """Why `value_id` cannot be in a live set: it does not exist, or it is an alias."""
    if value_id >= len(values):
        return PlanError(f"value id {value_id} does not exist (plan has {len(values)} values)", location=location)
    return PlanError(f"value {value_id} is an alias of {values[value_id].root} and cannot be live", location=location)


def _check_references(plan: Plan) -> None:
    """PlanError for the first value or step that names what does not exist or breaks a bound.

    Each is first judged in one expression of C and cached calls; only one found wrong is checked again field by
    field (`_checked_value`, `_check_step`), which names the field to blame: the per-field walk took twice as long
    on a 50k-value plan."""
    values, count, total = plan.values, len(plan.values), 0
    for position, value in enumerate(values):
        if (value.id == position and value.root < count and _value_strings_problem(
                value.precision, value.layout, len(value.shape), value.memory_class) is None):
            size, problem = _value_size(value.layout, tuple(value.shape), value.precision, value.copies)
            if problem is None:
                total += size
                continue
        total += _checked_value(value, position, count)
    if total > MAX_PLAN_BYTES:
        raise PlanError(f"the values take {total:,} bytes per tile together, more than {MAX_PLAN_BYTES:,}",
                        location="timeline.values")
    aliases = frozenset(value.id for value in values if value.is_alias)
    livable = frozenset(range(count)).difference(aliases)  # ids are whole numbers from 0 (`Count`)
    for position, step in enumerate(plan.steps):
        live, scratch = step.live, step.scratch
        if (step.index != position or operation_problem(step.operation) is not None or scratch.standard > MAX_BYTES
                or scratch.interleaved > MAX_BYTES or not livable.issuperset(live) or len(set(live)) < len(live)):
            _check_step(values, aliases, step, position)


def _checked_value(value: Value, position: int, count: int) -> int:
    where = f"timeline.values[{position}]"
    if value.id != position:
        raise PlanError(f"id {value.id} out of order (expected {position})", location=f"{where}.id")
    if value.root >= count:
        raise PlanError(f"root {value.root} does not exist (plan has {count} values)", location=f"{where}.root")
    _check_value_strings(value, where)
    return _checked_value_size(value, where)


def _check_step(values: list[Value], aliases: frozenset[int], step: Step, position: int) -> None:
    where = f"timeline.steps[{position}]"
    if step.index != position:
        raise PlanError(f"index {step.index} out of order (expected {position})", location=f"{where}.index")
    problem = operation_problem(step.operation)
    if problem is not None:
        raise PlanError(f"malformed operation: {problem}", location=f"{where}.operation")
    _check_scratch(step, where)
    _check_live(values, aliases, step, where)


_checked_timelines: dict[int, weakref.ref] = {}
"""The timelines `_check_references` passed, by identity, while they live. A timeline cannot change (a frozen model
of frozen lists of frozen models: validation froze them), so a plan holding one needs no check of its live ids again
(`Plan.snapshot`: 0.05-0.09 s at 50k values); a copy with another timeline is checked."""


def _mark_checked(timeline: Timeline) -> None:
    _checked_timelines[id(timeline)] = weakref.ref(timeline, partial(_forget, id(timeline)))


def _forget(key: int, reference: weakref.ref) -> None:
    if _checked_timelines.get(key) is reference:
        del _checked_timelines[key]


def _was_checked(timeline: Timeline) -> bool:
    reference = _checked_timelines.get(id(timeline))
    return reference is not None and reference() is timeline


def _check_scratch(step: Step, where: str) -> None:
    for memory_class in ("standard", "interleaved"):
        scratch = getattr(step.scratch, memory_class)
        if scratch > MAX_BYTES:
            raise PlanError(f"{scratch:,} bytes of scratch per tile, more than {MAX_BYTES:,}",
                            location=f"{where}.scratch.{memory_class}")


def _checked_value_size(value: Value, where: str) -> int:
    """The most bytes per tile `value` can take; PlanError naming the field to blame when that passes MAX_BYTES."""
    size, problem = _value_size(value.layout, tuple(value.shape), value.precision, value.copies)
    if problem is not None:
        field, message = problem
        raise PlanError(message, location=f"{where}.{field}")
    return size


_GRANULE_BOUND = max(GRANULE.values())
"""The largest memory-class granule an AMP-aligned shard is rounded up to: the most a shard may take."""


@lru_cache(maxsize=65536)
def _value_size(layout: str, shape: tuple[int, ...], precision: str, copies: int) -> tuple[int, tuple[str, str] | None]:
    """(the most bytes per tile of a value: its largest shard, AMP-aligned or not, times its copies; the field to
    blame and why when that passes MAX_BYTES, or None). Cached: the values of a large plan share a few hundred
    of these combinations."""
    elements = prod(shape)
    if elements > MAX_ELEMENTS:
        return elements, ("shape", f"the shape has {elements:,} elements, more than {MAX_ELEMENTS:,}")
    shard = parse_layout(layout).largest_shard_elements(shape) * element_size(precision)
    size = round_up(shard, _GRANULE_BOUND) * copies
    if size <= MAX_BYTES:
        return size, None
    limit = f"bytes per tile, more than {MAX_BYTES:,}"
    if copies > 1 and size // copies <= MAX_BYTES:
        return size, ("copies", f"{copies:,} copies of a {shard:,}-byte shard take {size:,} {limit}")
    return size, ("layout", f"its largest shard of shape {list(shape)} takes {shard:,} {limit}")


def _line_column(text: str, offset: int) -> str:
    line = text.count("\n", 0, offset) + 1
    column = offset - text.rfind("\n", 0, offset)
    return f"line {line} column {column}"


def _text_position(text: str, offset: int) -> str:
    """Line and column for an editor, byte offset for tools that seek in the file."""
    byte = len(text[:offset].encode("utf-8", "surrogatepass"))
    return f"{_line_column(text, offset)} (byte {byte})"


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        location = _line_column(data[: error.start].decode("utf-8"), error.start)
        raise PlanError(
            f"not UTF-8: invalid byte 0x{data[error.start]:02x} at byte offset {error.start}", location=location
        ) from None


_NOT_QUOTE_OR_BRACKET = bytes(byte for byte in range(256) if byte not in b'"[]{}')
_DEPTH_STEP = np.array([1 if byte in b"[{" else -1 if byte in b"]}" else 0 for byte in range(256)], dtype=np.int64)
_STRING_OR_BRACKET = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)
_DEPTH_CHANGE = {"[": 1, "{": 1, "]": -1, "}": -1}


def _nests_too_deeply(data: bytes) -> bool:
    """Whether JSON that parsed (as UTF-8) nests deeper than MAX_DEPTH.

    This runs on every load, so it stays in C: keep only quotes and brackets, drop what lies
    between quotes; the depth is then the running sum of the brackets left (they pair up: the JSON parsed).
    """
    if b"\\" in data:  # replace() costs a pass even when nothing matches, and plans rarely escape anything
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    brackets = b"".join(data.translate(None, _NOT_QUOTE_OR_BRACKET).replace(b'""', b"").split(b'"')[::2])
    depths = np.cumsum(_DEPTH_STEP[np.frombuffer(brackets, dtype=np.uint8)])
    return bool(depths.size) and int(depths.max()) > MAX_DEPTH


def _too_deep(text: str) -> PlanError:
    """The error naming where nesting first passed MAX_DEPTH (a slow walk, taken only for refused input)."""
    depth = 0
    for token in _STRING_OR_BRACKET.finditer(text):
        depth += _DEPTH_CHANGE.get(text[token.start()], 0)
        if depth > MAX_DEPTH:
            location = _text_position(text, token.start())
            return PlanError(f"JSON nested too deeply (more than {MAX_DEPTH} levels)", location=location)
    # json.loads ran out of stack within MAX_DEPTH levels: the caller had already used nearly all of it
    return PlanError("JSON nests deeper than the remaining call stack allows")


def _parse(data: str | bytes) -> dict[str, Any]:
    text = _decode(data) if isinstance(data, bytes) else data
    try:
        # plans read as bytes have always been allowed a UTF-8 BOM; a space in its place keeps every offset
        raw = json.loads(" " + text[1:] if text.startswith("\ufeff") else text)
    except json.JSONDecodeError as error:
        raise PlanError(f"invalid JSON: {error.msg}", location=_text_position(text, error.pos)) from None
    except RecursionError:
        raise _too_deep(text) from None
    except ValueError:  # int() refuses more digits than sys.get_int_max_str_digits()
        huge = re.search(rf"\d{{{sys.get_int_max_str_digits() + 1},}}", text)
        location = _text_position(text, huge.start()) if huge else ""
        raise PlanError("invalid JSON: number has too many digits", location=location) from None
    if _nests_too_deeply(text.encode("utf-8", "surrogatepass")):
        raise _too_deep(text)
    if not isinstance(raw, dict):
        raise PlanError("a plan must be a JSON object")
    return raw


def _check_version(raw: dict[str, Any]) -> None:
    """A newer format may mean other things by the same fields, so its version is refused before they are read.

    A version that is not an integer at all is left to the model's type error.
    """
    version = raw.get("version")
    if type(version) is int and version not in SUPPORTED_VERSIONS:
        supported = ", ".join(map(str, SUPPORTED_VERSIONS))
        raise PlanError(f"unsupported format version {version} (ipuplan reads version {supported})", location="version")


def _read_directly(data: str | bytes) -> Plan | None:
    """The plan validated straight from the JSON text, or None for any input this fast path might
    read differently from `_read_via_python`, which then finds the exact problem.

    Without a dict of the whole file first, a load takes about 40% less time and (with
    `_return_free_heap`) a quarter less memory. The JSON reader is stricter than `json.loads`
    (no NaN, no lone surrogates, no BOM) and refuses rather than differs; depth and version,
    checked before the fields in the slow path, are checked here after.
    """
    try:
        plan = Plan.model_validate_json(data)
    except ValueError:
        return None
    encoded = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if plan.version not in SUPPORTED_VERSIONS or _nests_too_deeply(encoded):
        return None
    return plan


def _return_free_heap() -> None:
    """Give the C heap's free pages back to the system (glibc; elsewhere there is nothing to call).

    The direct read builds and drops a parse tree about the size of the file; glibc keeps such
    memory, left between live blocks, for later: a large plan's process is about a quarter smaller with it.
    """
    if sys.platform.startswith("linux"):
        trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
        if trim is not None:
            trim(0)


def _read_via_python(text: str | bytes) -> Plan:
    raw = _parse(text)
    _check_version(raw)
    _check_encodable(raw)
    return Plan.model_validate(raw)


def _check_encodable(raw: dict[str, Any]) -> None:
    """Refuse a string the plan could not be written back with: json.loads reads a lone surrogate escape
    (`"\\ud800"`), which no UTF-8 file can hold. Only the slow path reads one (the direct read refuses it)."""
    try:
        json.dumps(raw, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        location, text = _first_surrogate(raw) or ("", "a string")
        raise PlanError(f"{text!r} holds a lone surrogate, which UTF-8 cannot encode", location=location) from None


def _first_surrogate(node: Any, location: str = "") -> tuple[str, str] | None:
    """(where, the string) of the first key or string holding a lone surrogate below `node` (nesting is bounded)."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, item in items:
        here = f"{location}[{key}]" if isinstance(key, int) else f"{location}.{key}" if location else key
        for text in (key, item):
            if isinstance(text, str) and _surrogate(text):
                return here, text
        found = _first_surrogate(item, here)
        if found is not None:
            return found
    return None


def _surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def plan_from_json(text: str | bytes, source: str = "<plan>") -> Plan:
    """Parse and validate plan JSON; every problem is a PlanError naming source and location."""
    try:
        with gc_paused():
            plan = _read_directly(text) or _read_via_python(text)
            _check_references(plan)
            _mark_checked(plan.timeline)
    except ValidationError as error:
        raise _first_validation_problem(error).at(source=source) from None
    except PlanError as error:
        raise error.at(source=source) from None
    _return_free_heap()
    return plan


def load_plan(path: str | Path, *, max_bytes: int | None = None) -> Plan:
    """Read a plan file (a regular file, or a pipe such as `/dev/stdin`) of at most `max_bytes` (default
    `input_limit()`); PlanError naming the file for anything else (`read_input`)."""
    return plan_from_json(read_input(path, max_bytes), source=str(path))


def parse_byte_size(text: str) -> int:
    """Bytes from `1000`, `512M`, `8G`, `1.5GiB`: K, M, G and T are binary (1024), as `ulimit` and `docker
    --memory` read them; ValueError for anything else."""
    match = _BYTE_SIZE.fullmatch(str(text).strip())
    if match is None:
        raise ValueError(f"{text!r} is not a size (bytes, or a number with K, M, G or T: 8G, 512M)")
    number, unit = match.groups()
    scale = 1024 ** "BKMGT".index((unit or "B")[0].upper())
    return int(number) * scale if number.isdigit() else int(float(number) * scale)  # exact for whole numbers


_BYTE_SIZE = re.compile(r"(\d+(?:\.\d*)?)\s*([KMGT](?:i?B)?|B)?", re.IGNORECASE)


def size_in_words(count: float) -> str:
    """`1 GiB`, `1.5 MiB`, `512 bytes`: a size as a person reads it (three figures)."""
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if count >= 1 << shift:
            return f"{count / (1 << shift):.3g} {unit}"
    return f"{int(count):,} bytes"


def input_limit(max_bytes: int | None = None) -> int:
    """The most bytes a plan file may have: `max_bytes`, else `IPUPLAN_MAX_INPUT_BYTES`, else MAX_INPUT_BYTES."""
    if max_bytes is not None:
        return max_bytes
    text = os.environ.get(INPUT_LIMIT_VARIABLE, "").strip()
    try:
        return parse_byte_size(text) if text else MAX_INPUT_BYTES
    except ValueError as error:
        raise PlanError(str(error), source=INPUT_LIMIT_VARIABLE) from None


def read_input(path: str | Path, max_bytes: int | None = None) -> bytes:
    """The bytes of the plan file `path`, never more than the input limit and never waiting forever.

    Opened without blocking (a FIFO's open then waits for no writer), then by what it is: a regular file is
    refused past the limit by its size, before a byte is read, and read to at most limit + 1 bytes (a file that
    grows, or says it is empty as /proc's do); a pipe (FIFO, `/dev/stdin`) is read to the same limit, refused
    when nobody writes into it or it sends nothing for PIPE_WAIT_SECONDS; anything else (`/dev/zero`, a
    terminal, a disk) is refused unread. Every refusal is a PlanError naming the file (exit 2)."""
    limit = input_limit(max_bytes)
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as error:
        raise PlanError(f"cannot read: {error.strerror}", source=str(path)) from None
    try:
        return _bounded_read(descriptor, limit)
    except OSError as error:
        raise PlanError(f"cannot read: {error.strerror}", source=str(path)) from None
    except PlanError as error:
        raise error.at(source=str(path)) from None
    finally:
        os.close(descriptor)


def _bounded_read(descriptor: int, limit: int) -> bytes:
    status = os.fstat(descriptor)
    if stat.S_ISDIR(status.st_mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))  # the message it always had
    if stat.S_ISFIFO(status.st_mode):
        return _pipe_bytes(descriptor, limit)
    if not stat.S_ISREG(status.st_mode):
        kind = "a character device" if stat.S_ISCHR(status.st_mode) else "a block device" if stat.S_ISBLK(
            status.st_mode) else "not a regular file"
        raise PlanError(f"not a plan file: {kind} (ipuplan reads regular files and pipes)")
    if status.st_size > limit:
        raise _too_large(limit)
    os.set_blocking(descriptor, True)  # O_NONBLOCK was for the open; a network file system may honour it on reads
    return _file_bytes(descriptor, status.st_size, limit)


def _too_large(limit: int) -> PlanError:
    return PlanError(f"larger than the {size_in_words(limit)} input limit (set {INPUT_LIMIT_VARIABLE} to read more)")


_CHUNK = 1 << 20


def _file_bytes(descriptor: int, size: int, limit: int) -> bytes:
    """At most limit + 1 bytes: the size the file reported in one read (one copy in memory, as `read_bytes`),
    then whatever it grew by, a chunk at a time."""
    chunks, total, want = [], 0, size + 1
    while total <= limit:
        chunk = os.read(descriptor, min(want, limit + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total, want = total + len(chunk), _CHUNK
    if total > limit:
        raise _too_large(limit)
    return b"".join(chunks)


def _pipe_bytes(descriptor: int, limit: int) -> bytes:
    """A pipe's bytes to its end (at most limit + 1), waiting at most PIPE_WAIT_SECONDS for each chunk."""
    chunks, total, waiting = [], 0, select.poll()
    waiting.register(descriptor, select.POLLIN)
    while total <= limit:
        try:
            chunk = os.read(descriptor, min(_CHUNK, limit + 1 - total))
        except BlockingIOError:  # a writer, nothing sent yet
            if not waiting.poll(PIPE_WAIT_SECONDS * 1000):
                raise PlanError(f"the pipe sent nothing for {PIPE_WAIT_SECONDS:g} s (its writer stalled)") from None
            continue
        if not chunk:  # the end; read at once from a FIFO means no process had it open for writing
            if not chunks:
                raise PlanError("nothing to read: the pipe has no writer, or its writer sent nothing")
            break
        chunks.append(chunk)
        total += len(chunk)
    if total > limit:
        raise _too_large(limit)
    return b"".join(chunks)


def dump_plan(plan: Plan) -> str:
    """The plan as the compiler writes it: compact JSON, same key order, no trailing newline. Written by pydantic's
    own serialiser (a third of `json.dumps`' time: 0.23 s against 0.67 s at 50k values), which writes every JSON it
    reads as `json.dumps` does but for some floats (`1e-7`, not `1e-07`): a plan that keeps a float in an unknown
    field is written by `json.dumps`."""
    with gc_paused():
        return _float_json(plan) if _keeps_float(plan) else plan.model_dump_json(by_alias=True)


def plan_bytes(plan: Plan) -> bytes:
    """`dump_plan`'s text in UTF-8, what the writers write: pydantic's serialiser makes bytes, which its text is
    decoded from (a write of 50k values, 0.45 s, took 0.1 s less)."""
    with gc_paused():
        if _keeps_float(plan):
            return _float_json(plan).encode()
        return plan.__pydantic_serializer__.to_json(plan, by_alias=True)


def _float_json(plan: Plan) -> str:
    return json.dumps(plan.model_dump(mode="json", by_alias=True), separators=(",", ":"), ensure_ascii=False)


def _keeps_float(plan: Plan) -> bool:
    """Whether a float is anywhere in the plan: only unknown fields can hold one (every known field is an integer,
    a string, a bool or a list of integers)."""
    models = (plan, plan.peak, plan.timeline, *plan.values, *plan.steps,
              *(part for step in plan.steps for part in (step.scratch, step.usage)))
    return any(model.__pydantic_extra__ and _holds_float(model.__pydantic_extra__) for model in models)


def _holds_float(node: Any) -> bool:
    """Whether `node` (parsed JSON: nesting is bounded) is or holds a float."""
    if isinstance(node, float):
        return True
    items = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
    return any(_holds_float(item) for item in items)


def write_plan(plan: Plan, path: str | Path) -> None:
    """Write atomically: a crash never leaves a half-written plan behind."""
    write_atomically(path, plan_bytes(plan))
