"""The candidate space: which values may change, and the layouts each may take.

Strategy generation, apart from the solver (as XLA's auto-sharding splits it). A freedom
level is one module with one function `(Context, unclaimed groups) -> Decisions`, registered
once in `LEVELS` with the scopes that run it. A scope runs its levels in registry order, each
deciding about the groups the previous ones left, the last one deciding about every group that
remains. Adding a freedom level is its module and one `Level(...)` line in `LEVELS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import Enum

import numpy as np

from ipuplan.errors import IpuplanError
from ipuplan.facts import price_store
from ipuplan.facts.plan_facts import PlanFacts
from ipuplan.plan.collector import gc_paused
from ipuplan.space.levels import attention, elementwise, gather, gemm
from ipuplan.space.levels.attention import attention_level
from ipuplan.space.levels.classes import class_level
from ipuplan.space.levels.elementwise import elementwise_level
from ipuplan.space.levels.gather import gather_level
from ipuplan.space.levels.gemm import kernel_level
from ipuplan.space.levels.storage import storage_level
from ipuplan.space.rules import Context, Kernels, LayoutGroup, context_of
from ipuplan.space.types import (
    Candidate,
    CandidateSpace,
    Decisions,
    FreeGroup,
    Freeze,
    FreezeReason,
    FrozenGroup,
)


class Scope(str, Enum):
    """Freedom scopes, narrowest first: the order they are defined in IS the scope order, each wider
    than the ones before it (`wider`)."""

    STORAGE = "storage"
    KERNELS = "kernels"
    FULL = "full"
    PROGRAM = "program"
    """Opt-in only, never a default nor suggested: it inserts steps and values into the timeline."""

    def wider(self) -> tuple[Scope, ...]:
        """The scopes wider than this one, narrowest first, within one timeline (`program` is never offered)."""
        order = tuple(s for s in Scope if s is not Scope.PROGRAM)
        return order[order.index(self) + 1:] if self in order else ()


LevelFunction = Callable[[Context, tuple[LayoutGroup, ...]], Decisions]
Promote = Callable[[Context, LayoutGroup, tuple], tuple[Candidate, ...]]
Families = Callable[[PlanFacts], list[tuple[Kernels, tuple[int, ...]]]]
"""A level's families as a report shows them: per family its kernels and its members."""
"""A level's maker of candidates from the choices a cap left out of one of its groups."""


@dataclass(frozen=True)
class Level:
    """A freedom level: its name (unique; `keep_classes` leaves out the one named `CLASSES`), its function, the
    scopes that run it, and, for a level that caps its groups' choices, the kind of those groups and its `promote`
    (so that the whole-scope bound can make the left-out choices candidates), and what it frees, in words (the
    `--scope` help is made of them), and for a level that re-lays out kernel families as units, how a report finds
    and names them (`families`, `unit`)."""

    name: str
    decide: LevelFunction
    scopes: tuple[Scope, ...]
    kind: str = ""
    promote: Promote | None = None
    frees: str = ""
    families: Families | None = None
    unit: str = ""


CLASSES = "classes"
"""The level `keep_classes` leaves out."""

LEVELS: tuple[Level, ...] = (
    Level("kernels", kernel_level, (Scope.KERNELS, Scope.FULL, Scope.PROGRAM), gemm.KIND, gemm.promote,
          "Gemm families", gemm.families, gemm.UNIT),
    Level("attention", attention_level, (Scope.KERNELS, Scope.FULL, Scope.PROGRAM), attention.KIND,
          attention.promote, "attention products", attention.families, attention.UNIT),
    Level("elementwise", elementwise_level, (Scope.FULL, Scope.PROGRAM), elementwise.KIND, elementwise.promote,
          "element-wise families", elementwise.families, elementwise.UNIT),
    Level("gather", gather_level, (Scope.PROGRAM,), gather.KIND,
          frees="parameters stored sharded and gathered by inserted Copy steps"),
    Level(CLASSES, class_level, (Scope.FULL, Scope.PROGRAM), frees="memory classes"),
    Level("storage", storage_level, tuple(Scope), frees="any layout of a storage value"),
)
"""Every freedom level once, in the order a scope runs them: a level decides before the ones below it,
and a level that decides about every group it is given (storage) comes last in its scopes. Each scope is
exactly its levels of REPLAN.md: `storage` = level 1 (with its full re-tiling), `kernels` = levels 1-2 (Gemm
families and attention products), `full` = levels 1-4, `program` = `full` and the opt-in gather level."""


def scopes_in_words() -> str:
    """Each scope and what it frees beyond the scope before it, from `LEVELS`.

    >>> for said in scopes_in_words().split(" or "): print(said)
    storage (any layout of a storage value), kernels (storage + Gemm families, attention products), full (kernels + element-wise families, memory classes)
    program (full + parameters stored sharded and gathered by inserted Copy steps)
    """  # noqa: E501  (a doctest's expected output, compared byte for byte: it cannot be wrapped)
    said, before = [], None
    for scope in Scope:
        new = [level.frees for level in levels_of(scope) if before is None or before not in level.scopes]
        said.append(f"{scope.value} ({'' if before is None else before.value + ' + '}{', '.join(new)})")
        before = scope
    return ", ".join(said[:-1]) + " or " + said[-1]


def levels_of(scope: Scope, keep_classes: bool = False) -> tuple[Level, ...]:
    """The levels `scope` runs, in registry order; without the classes level when `keep_classes`."""
    return tuple(level for level in LEVELS if scope in level.scopes and not (keep_classes and level.name == CLASSES))


def pinned_level(pinned: frozenset[int]) -> LevelFunction:
    """A level that freezes, by request, every group holding a pinned value, and every family around it."""

    def level(context: Context, groups: tuple[LayoutGroup, ...]) -> Decisions:
        if not pinned:
            return Decisions()
        families = [f for f in context.facts.families if pinned.intersection(f.members)]
        held = pinned | {role for family in families for role in family.members}
        chosen = tuple(g for g in groups if held.intersection(g))
        return Decisions(frozen=tuple(FrozenGroup(g, FreezeReason(Freeze.BY_REQUEST)) for g in chosen))

    return level


class UnknownScope(IpuplanError, ValueError):
    """A scope ipuplan does not offer."""


def scope_named(name: str | Scope) -> Scope:
    try:
        return Scope(name)
    except ValueError:
        raise UnknownScope(f"unknown scope {name!r}; choose one of: {', '.join(s.value for s in Scope)}") from None


def candidate_space(
    facts: PlanFacts, scope: str | Scope = Scope.FULL, pinned: frozenset[int] = frozenset(),
    keep_classes: bool = False,
) -> CandidateSpace:
    """Free groups with their candidates, and frozen groups with their reasons.

    `pinned` values keep their layout by request: their groups (and a Gemm family they belong to) are frozen.
    `keep_classes` leaves out the level that changes only a value's memory class.
    """
    scope = scope_named(scope)
    with gc_paused():  # a large plan's space is hundreds of thousands of small objects, and no garbage
        space = _space(facts, scope, pinned, keep_classes)
    price_store.flush()  # the proxy's prices found (`exchange_proxy.kept_exchange_bytes`), kept for the next run
    return space


def _space(facts: PlanFacts, scope: Scope, pinned: frozenset[int], keep_classes: bool) -> CandidateSpace:
    """`candidate_space` of a scope already named: each level deciding about the groups the ones before it left."""
    context = context_of(facts)
    pins = pinned_level(pinned)
    remaining = context.groups
    free: list[FreeGroup] = []
    frozen: list[FrozenGroup] = []
    for decide in (pins, *(level.decide for level in levels_of(scope, keep_classes))):
        decided = decide(context, remaining)
        free += decided.free
        frozen += decided.frozen
        claimed = decided.claimed
        remaining = tuple(group for group in remaining if claimed.isdisjoint(group))
    return CandidateSpace(scope.value, tuple(free), tuple(frozen), context)


def promoter(kind: str) -> Promote:
    """The `promote` of the level whose capped groups are of `kind`."""
    return next(level.promote for level in LEVELS if level.kind == kind and level.promote is not None)


def with_promoted(facts: PlanFacts, space: CandidateSpace, chosen: dict[int, np.ndarray]) -> CandidateSpace:
    """The space with some left-out choices made candidates: per free group index, a mask over its left-out choices.
    They are appended to the group's candidates (every other candidate keeps its index); the rest stay left out."""
    kept = space.context
    context = kept if isinstance(kept, Context) and kept.facts is facts else context_of(facts)
    free = list(space.free)
    for g, mask in chosen.items():
        group = free[g]
        if group.left_out is None or not mask.any():
            continue
        splits = tuple(c for c, keep in zip(group.left_out.choices, mask.tolist()) if keep)
        made = promoter(group.kind)(context, group.members, splits)
        free[g] = replace(group, candidates=(*group.candidates, *made), left_out=group.left_out.only(~mask))
    price_store.flush()
    return replace(space, free=tuple(free))


__all__ = [
    "CLASSES",
    "LEVELS",
    "Candidate",
    "CandidateSpace",
    "Decisions",
    "FreeGroup",
    "Freeze",
    "FreezeReason",
    "FrozenGroup",
    "Level",
    "Scope",
    "UnknownScope",
    "candidate_space",
    "levels_of",
    "scope_named",
    "with_promoted",
]
