"""The candidate space: which values may change, and the layouts each may take.

Strategy generation, apart from the solver (as XLA's auto-sharding splits it). A freedom
level is one module with one function `(Context, unclaimed groups) -> Decisions`; a `Scope`
runs its levels in order, each deciding about the groups the previous ones left, and the
last one deciding about every group that remains. Adding a freedom level is its module and
one line in `LEVELS`.
"""

from __future__ import annotations

from enum import Enum

from ipuplan.errors import IpuplanError
from ipuplan.facts.plan_facts import PlanFacts
from ipuplan.space.levels.attention import attention_level
from ipuplan.space.levels.classes import class_level
from ipuplan.space.levels.gemm import kernel_level
from ipuplan.space.levels.retile import retile_level
from ipuplan.space.levels.storage import storage_level
from ipuplan.space.rules import context_of
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
    """Freedom levels, narrowest first; each includes the ones before it."""

    STORAGE = "storage"
    KERNELS = "kernels"
    FULL = "full"


LEVELS = {
    Scope.STORAGE: (storage_level,),
    Scope.KERNELS: (kernel_level, storage_level),
    Scope.FULL: (kernel_level, attention_level, class_level, retile_level),
}


def pinned_level(pinned: frozenset[int]):
    """A level that freezes, by request, every group holding a pinned value, and every family around it."""

    def level(context, groups):
        if not pinned:
            return Decisions()
        families = [f for f in context.facts.families if pinned.intersection(f.members)]
        held = pinned | {role for family in families for role in family.members}
        chosen = tuple(g for g in groups if held.intersection(g))
        return Decisions(frozen=tuple(FrozenGroup(g, FreezeReason(Freeze.BY_REQUEST)) for g in chosen))

    return level


class UnknownScope(IpuplanError, ValueError):
    """A freedom level ipuplan does not offer."""


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
    context = context_of(facts)
    pins = pinned_level(pinned)
    remaining = context.groups
    free: list[FreeGroup] = []
    frozen: list[FrozenGroup] = []
    levels = [level for level in LEVELS[scope] if not (keep_classes and level is class_level)]
    for level in (pins, *levels):
        decided = level(context, remaining)
        free += decided.free
        frozen += decided.frozen
        claimed = decided.claimed
        remaining = tuple(group for group in remaining if claimed.isdisjoint(group))
    return CandidateSpace(scope.value, tuple(free), tuple(frozen))


__all__ = [
    "LEVELS",
    "Candidate",
    "CandidateSpace",
    "Decisions",
    "FreeGroup",
    "Freeze",
    "FreezeReason",
    "FrozenGroup",
    "Scope",
    "UnknownScope",
    "candidate_space",
    "scope_named",
]
