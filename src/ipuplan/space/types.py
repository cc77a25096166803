"""What a freedom level produces: free groups with their candidates, frozen groups with a typed reason."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from ipuplan.facts.estimate import ValueBytes
from ipuplan.plan.layout import STANDARD, Layout


@dataclass(frozen=True)
class Gather:
    """A copy of a group member, in the layout its reading kernel needs, made by a `Copy` step inserted right before
    the reading step (scope `program`, REPLAN.md): live there and at the reading step only."""

    step: int
    """The reading step (its index in the input plan)."""
    position: int
    """The member the reading step reads, by its position in the group."""
    layout: Layout
    """The layout the reader needs: the member's layout in the input plan."""
    value_bytes: ValueBytes
    exchange_bytes: int
    """Bytes the inserted `Copy` sends between tiles (`facts.plan_exchange.step_bytes`, the written plan's figure)."""

    def shifted(self, offset: int) -> Gather:
        return Gather(self.step + offset, self.position, self.layout, self.value_bytes, self.exchange_bytes)


@dataclass(frozen=True)
class Candidate:
    """One way to lay out a group: everything a rewrite needs, and the bytes the model needs."""

    layouts: tuple[Layout, ...]
    """Per member of the group, in member order."""
    value_bytes: tuple[ValueBytes, ...]
    exchange_bytes: int
    """Bytes the group's mover steps send between tiles under this choice (`rules.exchange_cost`)."""
    scratch: tuple[tuple[int, int, int], ...] = ()
    """(step, standard, interleaved): scratch of steps that depend on this choice."""
    shapes: tuple[tuple[int, ...], ...] = ()
    """Per member, when the choice changes shapes (a kernel family's partials); empty otherwise."""
    operations: tuple[tuple[int, str], ...] = ()
    """(step, operation text) rewritten by this choice (a Gemm's inner_block and output_columns)."""
    label: str = ""
    gathers: tuple[Gather, ...] = ()
    """The copies this choice inserts (scope `program`); their steps are among `scratch`'s, with the steps' own
    scratch, so that `row_scratch` can add the copies' bytes there."""

    @property
    def row_scratch(self) -> tuple[tuple[int, int, int], ...]:
        """`scratch` with the bytes of the gathered copies added at their reading steps: what the model counts there
        (the inserted step itself holds less: its live set is the reading step's without the reading step's
        results)."""
        if not self.gathers:
            return self.scratch
        extra: dict[int, list[int]] = {}
        for gather in self.gathers:
            standard = gather.layout.memory_class == STANDARD
            added = extra.setdefault(gather.step, [0, 0])
            added[0 if standard else 1] += gather.value_bytes.bytes
        return tuple((step, standard + extra.get(step, (0, 0))[0], interleaved + extra.get(step, (0, 0))[1])
                     for step, standard, interleaved in self.scratch)

    def shifted(self, offset: int) -> Candidate:
        """The same choice for an equal group `offset` steps later: its scratch and operations move along."""
        if not (self.scratch or self.operations or self.gathers):
            return self
        return self._with(scratch=tuple([(step + offset, standard, interleaved)
                                         for step, standard, interleaved in self.scratch]),
                          operations=tuple([(step + offset, text) for step, text in self.operations]),
                          gathers=tuple([gather.shifted(offset) for gather in self.gathers]))

    def with_scratch(self, scratch: tuple[tuple[int, int, int], ...]) -> Candidate:
        """The same choice with the scratch of the steps that depend on it."""
        return self._with(scratch=scratch)

    def _with(self, **fields) -> Candidate:
        """A copy with `fields` replaced, its other fields shared. Made without the frozen dataclass's `__init__`
        (a guarded `__setattr__` per field) or `dataclasses.replace` (which costs more again): 235k candidates are
        copied so at 50k values, 1.96 -> 1.02 us each. The whole `__dict__` is copied: a Candidate keeps nothing in it
        but its fields (a cached property added here would be copied with them)."""
        made = object.__new__(Candidate)
        made.__dict__.update(self.__dict__)
        made.__dict__.update(fields)
        return made


@dataclass(frozen=True)
class LeftOut:
    """Legal choices of a free group that a cap on its candidates left out, by their bytes alone (no layouts).

    No solver picks one; the bound over the whole scope counts them (`model.problem.Problem.relaxation`), so a
    cap never makes "optimal" a claim about the kept list only.
    """

    bytes: np.ndarray
    """Choices x members: each member's bytes (aligned bytes x copies) under the choice."""
    standard: tuple[bool, ...]
    """Per member, whether it is in the Standard class: a family's members keep their class under every split."""
    scratch: tuple[tuple[int, np.ndarray, np.ndarray], ...] = ()
    """(step, standard, interleaved scratch bytes per choice): the scratch that depends on the choice."""
    choices: tuple = ()
    """Per choice, what its level needs to make it a candidate (a kernel family's split)."""

    @property
    def count(self) -> int:
        return len(self.bytes)

    def only(self, mask: np.ndarray) -> LeftOut | None:
        """The choices where `mask` is true; None when there are none."""
        if not mask.any():
            return None
        return LeftOut(self.bytes[mask], self.standard, tuple((step, s[mask], i[mask]) for step, s, i in self.scratch),
                       tuple(c for c, keep in zip(self.choices, mask.tolist()) if keep))

    def shifted(self, offset: int) -> LeftOut:
        """The same choices for an equal group `offset` steps later (as `Candidate.shifted`)."""
        return LeftOut(self.bytes, self.standard, tuple((step + offset, s, i) for step, s, i in self.scratch),
                       self.choices)


@dataclass(frozen=True)
class FreeGroup:
    members: tuple[int, ...]
    candidates: tuple[Candidate, ...]
    input_index: int
    """The candidate that reproduces the input's layouts."""
    kind: str = "storage"
    left_out: LeftOut | None = None
    """Legal choices a cap left out of `candidates`, for the bound over the whole scope; None when none were."""

    @property
    def input(self) -> Candidate:
        return self.candidates[self.input_index]


class Freeze(str, Enum):
    """Why a group keeps its layout; each a rule of REPLAN.md's freedom levels."""

    MEMBERS_DIFFER = "members (aliases or bound layers) have different layouts"
    AMBIGUITY = "involved in an ambiguity (see ipuplan graph)"
    UNKNOWN_OPERATION = "live at an operation ipuplan does not know"
    UNKNOWN_LAYOUT = "a layout ipuplan does not know (kept verbatim)"
    NEVER_LIVE = "never live: no step holds it, so its layout takes no memory"
    NO_READER = "no reader identified (a kernel may read it without it dying there)"
    UNSHOWN_READ = "may be read by"
    """An element-wise kernel whose operand it can be, although it does not die there (a loop body's bias)."""
    READ_BY_KERNEL = "read by"
    WRITTEN_BY_KERNEL = "written by"
    AMP_ALIGNED = "AMP-aligned Gemm operand"
    SCRATCH = "scratch is not a whole multiple of its result's shard"
    NO_SMALLER_LAYOUT = "no other legal layout is smaller"
    FAMILY_OVERLAP = "shares values with another family"
    NO_OTHER_SPLIT = "no other legal split"
    BY_REQUEST = "pinned by request (--freeze or a pin file)"


@dataclass(frozen=True)
class FreezeReason:
    kind: Freeze
    step: int | None = None
    """The step the rule points at (the ambiguous step, the kernel that reads the value, ...)."""
    operation: str = ""
    """The kind of that step's operation, where the rule names one."""
    detail: str = ""
    family_step: int | None = None
    """The Gemm step of the family this reason froze, when it froze a whole family."""
    value: int | None = None
    """The family member the reason is about."""

    @property
    def group_label(self) -> str:
        """The reason without step numbers and value ids, to group like with like."""
        text = (f"{self.kind.value} {self.operation}" if self.operation and self.kind in _NAMES_OPERATION
                else self.kind.value)
        return f"Gemm family: {text}" if self.family_step is not None else text

    def in_family(self, gemm_step: int, value: int | None = None) -> FreezeReason:
        return FreezeReason(self.kind, self.step, self.operation, self.detail, gemm_step, value)

    def __str__(self) -> str:
        text = self._own_text()
        if self.family_step is None:
            return text
        about = f"value {self.value} " if self.value is not None else ""
        return f"Gemm family at step {self.family_step}: {about}{text}"

    def _own_text(self) -> str:
        if self.kind in _NAMES_OPERATION:
            text = f"{self.kind.value} {self.operation} at step {self.step}"
            return f"{text} ({self.detail})" if self.detail else text
        if self.kind is Freeze.UNKNOWN_OPERATION:
            return f"live at step {self.step}, an operation ipuplan does not know ({self.operation})"
        if self.kind is Freeze.UNKNOWN_LAYOUT:
            return f"a layout ipuplan does not know ({self.detail}), kept verbatim"
        if self.kind is Freeze.AMBIGUITY:
            return f"involved in an ambiguity: {self.detail}"
        if self.kind is Freeze.SCRATCH:
            return f"scratch of step {self.step} is not a whole multiple of its result's shard"
        return f"{self.kind.value} ({self.detail})" if self.detail else self.kind.value


_NAMES_OPERATION = frozenset({Freeze.READ_BY_KERNEL, Freeze.WRITTEN_BY_KERNEL, Freeze.UNSHOWN_READ})


@dataclass(frozen=True)
class FrozenGroup:
    members: tuple[int, ...]
    reason: FreezeReason


@dataclass(frozen=True)
class Decisions:
    """What one freedom level decided about the groups it claimed."""

    free: tuple[FreeGroup, ...] = ()
    frozen: tuple[FrozenGroup, ...] = ()

    @property
    def claimed(self) -> frozenset[int]:
        return frozenset(m for group in (*self.free, *self.frozen) for m in group.members)


@dataclass(frozen=True)
class CandidateSpace:
    scope: str
    free: tuple[FreeGroup, ...]
    frozen: tuple[FrozenGroup, ...]
    context: object = field(default=None, compare=False, repr=False)
    """The `rules.Context` the levels decided in (None: not kept), so that a widening of the space promotes in the same
    one rather than build it again (0.6 s at 50k values)."""

    @property
    def candidate_count(self) -> int:
        return sum(len(g.candidates) for g in self.free)

    def reasons(self) -> dict[int, FreezeReason | None]:
        """Value -> why it is frozen, or None when it is free, for every value the space decided about."""
        found: dict[int, FreezeReason | None] = {m: None for g in self.free for m in g.members}
        found.update({m: g.reason for g in self.frozen for m in g.members})
        return found
