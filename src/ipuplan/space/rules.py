"""What every freedom level shares: layout groups, the freeze rules, exchange and scratch costs.

A group is free only when every step that touches it is proven to accept another layout;
`freeze_reason` says which rule holds it otherwise.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from math import prod

import numpy as np

from ipuplan.facts.attention_families import AttentionFamily
from ipuplan.facts.dataflow import layout_group_of
from ipuplan.facts.estimate import aligned_bytes, sizing_key, value_bytes
from ipuplan.facts.exchange_proxy import kept_exchange_bytes
from ipuplan.facts.gemm_families import DerivedSplit, KernelFamily, placed_sum_scratch, sum_scratch_interleaved
from ipuplan.facts.plan_facts import PlanFacts
from ipuplan.plan.layout import STANDARD, Layout, parse_layout
from ipuplan.space.types import Candidate, Decisions, FreeGroup, Freeze, FreezeReason, FrozenGroup, LeftOut

LayoutGroup = tuple[int, ...]
"""Values that must share one layout (in-place aliases, a body argument and its layers)."""

Kernels = tuple[tuple[int, str], ...]
"""(step, operation kind) of each kernel of a family, by step: how a report names the family."""


def kernels_at(facts: PlanFacts, steps) -> Kernels:
    return tuple((step, facts.plan.steps[step].parsed_operation.kind) for step in sorted(steps))


@dataclass(frozen=True)
class Context:
    """The plan's facts, and the per-value indexes the freeze rules look things up in."""

    facts: PlanFacts
    groups: tuple[LayoutGroup, ...]
    unknown_steps_of: dict[int, tuple[int, ...]]
    """Value -> steps with an unknown operation where its storage is live."""
    first_ambiguity: dict[int, int]
    """Value -> index of the first ambiguity that may touch it."""
    unshown_readers: dict[int, tuple[int, ...]]
    """Value -> the element-wise kernels that may read it although the dataflow does not show it (an operand
    that stays live past the kernel, as a loop body's bias does: `facts.elementwise_families`)."""
    live_roots: frozenset[int]
    """Storage live at some step: a value whose root is not among them takes no memory anywhere."""
    movers: frozenset[int]
    """Steps that only move data (`Operation.is_mover`): read once per plan, not once per group that touches them."""
    cache: dict = field(default_factory=dict, compare=False, repr=False)
    """What a level derives once per context for equal structures (a family's promoted candidates)."""

    @cached_property
    def group_of(self) -> dict[int, LayoutGroup]:
        """Value -> its layout group (once per context: the promoters asked for it once per family)."""
        return {m: group for group in self.groups for m in group}

    @cached_property
    def flagged(self) -> frozenset[int]:
        """Values the first rules of `freeze_reason` may hold (an unknown layout part, an ambiguity that may touch
        them, an unknown operation where they are live): a group of one layout and none of these skips those rules
        (most groups: 48k tests at 50k values, where few values are flagged)."""
        values = self.facts.plan.values
        unknown = {text for text in {value.layout for value in values} if unknown_layout_parts(text)}
        return frozenset({value.id for value in values if value.layout in unknown}
                         | self.first_ambiguity.keys()
                         | {v for v, steps in self.unknown_steps_of.items() if steps})


def context_of(facts: PlanFacts) -> Context:
    plan = facts.plan
    unknown: dict[int, list[int]] = defaultdict(list)
    for step in plan.steps:
        if not step.parsed_operation.is_known:
            for value_id in step.live:
                unknown[value_id].append(step.index)
    unknown_of = {value.id: tuple(unknown.get(value.root, ())) for value in plan.values}
    first: dict[int, int] = {}
    for index, ambiguity in enumerate(facts.flow.ambiguities):
        for value_id in ambiguity.suspects:
            first.setdefault(value_id, index)
    unshown: dict[int, set[int]] = defaultdict(set)
    for family in facts.elementwise:
        for kernel in family.kernels:
            for value_id in kernel.possible:
                unshown[value_id].add(kernel.step)
    live_roots = frozenset(v for v, step in enumerate(facts.live.first) if step >= 0)
    movers = frozenset(step.index for step in plan.steps if step.parsed_operation.is_mover)
    return Context(facts, layout_groups(facts), unknown_of, first,
                   {v: tuple(sorted(steps)) for v, steps in unshown.items()}, live_roots, movers)


def layout_groups(facts: PlanFacts) -> tuple[LayoutGroup, ...]:
    """In-place aliases with their root, body arguments with their group: one layout each (`layout_group_of`), in
    order of their first value."""
    group_of = layout_group_of(facts.plan, facts.flow.bindings)
    groups: dict[int, list[int]] = defaultdict(list)
    for value in facts.plan.values:
        groups[group_of[value.id]].append(value.id)
    return tuple(tuple(members) for members in groups.values())


def freeze_reason(context: Context, members: LayoutGroup,
                  kernel_steps: frozenset[int] = frozenset()) -> FreezeReason | None:
    """Why a layout group must keep its layout, or None.

    Movers may read and write it; so may `kernel_steps`, the steps of a Gemm family that
    re-lays out the group together with its kernels.
    """
    facts = context.facts
    plan, flow = facts.plan, facts.flow
    values = plan.values
    if not context.flagged.isdisjoint(members) or (len(members) > 1 and len({values[m].layout for m in members}) > 1):
        early = _early_reason(context, members)
        if early is not None:
            return early
    # one member's readers are sorted and distinct already (`Dataflow.readers`)
    readers = flow.readers.get(members[0], ()) if len(members) == 1 else _steps_of(flow.readers, members)
    if not readers:
        unread = _unread(context, members, kernel_steps)
        if unread is not None:
            return unread
    # the writers only when no reader holds the group: a kernel reading it is the commoner reason
    held = (_held_by(context, readers, kernel_steps, Freeze.READ_BY_KERNEL)
            or _held_by(context, _steps_of(flow.writers, members), kernel_steps, Freeze.WRITTEN_BY_KERNEL))
    if held is not None:
        return held
    if not kernel_steps and not facts.amp_aligned.isdisjoint(members):
        return FreezeReason(Freeze.AMP_ALIGNED)
    return None


def _early_reason(context: Context, members: LayoutGroup) -> FreezeReason | None:
    """The first rules of `freeze_reason`, the ones no step of a family lifts: an unknown layout part, members laid
    out apart, an ambiguity that may touch a member, an unknown operation where one is live."""
    plan, flow = context.facts.plan, context.facts.flow
    values = plan.values
    layouts = {values[m].layout for m in members}
    unknown_parts = sorted({part for layout in layouts for part in unknown_layout_parts(layout)})
    if unknown_parts:
        return FreezeReason(Freeze.UNKNOWN_LAYOUT, detail=", ".join(unknown_parts))
    if len(layouts) > 1:
        other = next(m for m in members if values[m].layout != values[members[0]].layout)
        return FreezeReason(Freeze.MEMBERS_DIFFER, detail=f"values {members[0]} and {other}")
    ambiguities = [context.first_ambiguity[m] for m in members if m in context.first_ambiguity]
    if ambiguities:
        ambiguity = flow.ambiguities[min(ambiguities)]
        return FreezeReason(Freeze.AMBIGUITY, ambiguity.step, detail=str(ambiguity))
    unknown = sorted({s for m in members for s in context.unknown_steps_of[m]})
    if unknown:
        return FreezeReason(Freeze.UNKNOWN_OPERATION, unknown[0], plan.steps[unknown[0]].parsed_operation.kind)
    return None


def _held_by(context: Context, steps: Sequence[int], kernel_steps: frozenset[int], kind: Freeze) -> FreezeReason | None:
    """A `kind` reason naming the first of `steps` that is neither a mover nor one of `kernel_steps`, or None."""
    movers = context.movers
    for step in steps:
        if step not in movers and step not in kernel_steps:
            return FreezeReason(kind, step, context.facts.plan.steps[step].parsed_operation.kind)
    return None


def _steps_of(steps: dict[int, tuple[int, ...]], members: LayoutGroup) -> list[int]:
    """The steps `steps` (value -> steps) gives any member, sorted, each once."""
    return sorted({s for m in members for s in steps.get(m, ())})


def _unread(context: Context, members: LayoutGroup, kernel_steps: frozenset[int]) -> FreezeReason | None:
    """What holds a group no step is seen reading: an element-wise kernel that may read it without it dying there
    (the first outside `kernel_steps`, the others in the detail), nothing at all (never live), or no reader ipuplan
    can name. None when every kernel that may read it is one of `kernel_steps`: then its writers decide."""
    unshown = sorted({s for m in members for s in context.unshown_readers.get(m, ())})
    outside = [s for s in unshown if s not in kernel_steps]
    if outside:
        also = (f"; also at step{'s' if len(outside) > 2 else ''} {', '.join(map(str, outside[1:]))}"
                if outside[1:] else "")
        kind = context.facts.plan.steps[outside[0]].parsed_operation.kind
        return FreezeReason(Freeze.UNSHOWN_READ, outside[0], kind,
                            detail=f"an operand the dataflow does not show: it stays live past the step{also}")
    if unshown:
        return None
    if not any(context.facts.plan.values[m].root in context.live_roots for m in members):
        return FreezeReason(Freeze.NEVER_LIVE)
    return FreezeReason(Freeze.NO_READER)


@lru_cache(maxsize=65536)
def unknown_layout_parts(layout: str) -> tuple[str, ...]:
    """`Layout.unknown_parts` of a layout string, looked up: unrolled copies repeat a handful of layouts."""
    return parse_layout(layout).unknown_parts


@lru_cache(maxsize=65536)
def tiling_signature(rank: int, layout: Layout) -> tuple:
    """How a tensor is cut and placed, independent of replicas and memory class."""
    return tuple(
        sorted(
            (axis.axis.dimension(rank) if axis.axis.kind != "Linear" else -1, axis.partitions, axis.block_size,
             axis.tile_stride)
            for axis in layout.axes
            if axis.partitions > 1
        )
    )


@dataclass(frozen=True)
class Move:
    """A mover step between a group member and a value outside the group."""

    position: int
    """The member's position in its group."""
    outgoing: bool
    """True when the member is the source (it is read), False when it is the result."""
    other: Layout
    other_shape: tuple[int, ...]
    logical_bytes: int


def moved_tensors(facts: PlanFacts, members: LayoutGroup) -> tuple[Move, ...]:
    """Every mover step between a member and a non-member, with the other side's layout."""
    values, flow = facts.plan.values, facts.flow
    readers, writers, steps, bindings = flow.readers, flow.writers, flow.steps, flow.bindings
    moved = []
    for position, member in enumerate(members):
        logical = prod(values[member].shape) * values[member].element_size
        for step in (*readers.get(member, ()), *writers.get(member, ())):
            step_flow = steps[step]
            outgoing = member in step_flow.reads or member in bindings
            for other in step_flow.writes if outgoing else step_flow.reads:
                if other not in members:
                    value = values[other]
                    moved.append(_move(position, outgoing, value.layout, tuple(value.shape), logical))
    return tuple(moved)


@lru_cache(maxsize=65536, typed=True)
def _move(position: int, outgoing: bool, layout: str, shape: tuple[int, ...], logical_bytes: int) -> Move:
    """The `Move` of these contents, made once: unrolled copies repeat a hundred or so among 45k at 50k values."""
    return Move(position, outgoing, parse_layout(layout), shape, logical_bytes)


def exchange_cost(facts: PlanFacts, members: LayoutGroup, moved: tuple[Move, ...], layouts: tuple[Layout, ...]) -> int:
    """Bytes the group's mover steps send between tiles if its members take `layouts`.

    From the tile mappings (`ipuplan.facts.exchange_proxy`) when both sides have one shape; between
    shapes (slices, views, padding) the whole tensor unless both sides are tiled identically.
    The other side is taken at its input layout, which keeps the cost linear in the choice.
    """
    total = 0
    for move in moved:
        value = facts.plan.values[members[move.position]]
        own = layouts[move.position]
        if tuple(value.shape) == move.other_shape:
            source, target = (own, move.other) if move.outgoing else (move.other, own)
            total += kept_exchange_bytes(move.other_shape, value.element_size, source, target)
        elif tiling_signature(len(value.shape), own) != tiling_signature(len(move.other_shape), move.other):
            total += move.logical_bytes
    return total


def group_key(facts: PlanFacts, members: LayoutGroup, moved: tuple[Move, ...]) -> tuple:
    """Everything a group's candidates depend on but its scratch: repeated layers and unrolled copies share them."""
    values = facts.plan.values
    return tuple(sizing_key(values[m], m in facts.amp_aligned) for m in members), moved


def family_key(facts: PlanFacts, members: LayoutGroup, roles: tuple[int | None, ...], role_of: dict[int, int],
               ratios: tuple[ScratchRatio, ...], gemm_step: int, moved: tuple[Move, ...]) -> tuple:
    """What a family's candidates depend on through its members (each one's sizing and its place in `roles`), the
    scratch that scales with them (steps relative to the Gemm) and their movers: equal families share candidates."""
    values = facts.plan.values
    return (tuple((*sizing_key(values[m], m in facts.amp_aligned), roles.index(role_of[m])) for m in members),
            tuple((step - gemm_step, position, standard, interleaved)
                  for step, position, standard, interleaved in ratios),
            moved)


ScratchRatio = tuple[int, int, int, int]
"""(step, member position, standard ratio, interleaved ratio)."""


class Frozen(Exception):
    """Raised where a rule freezes a group in the middle of building its candidates."""

    def __init__(self, reason: FreezeReason) -> None:
        super().__init__(str(reason))
        self.reason = reason


def scratch_ratios(facts: PlanFacts, members: LayoutGroup) -> tuple[ScratchRatio, ...]:
    """Steps whose scratch is a whole multiple of a member's shard keep that multiple (else Frozen)."""
    plan, flow = facts.plan, facts.flow
    ratios = []
    for position, member in enumerate(members):
        for step in flow.writers.get(member, ()):
            scratch = plan.steps[step].scratch
            if scratch.standard == scratch.interleaved == 0:
                continue
            shard = facts.estimate.values[member].shard_bytes
            if (len(flow.steps[step].writes) != 1 or shard == 0 or scratch.standard % shard
                    or scratch.interleaved % shard):
                raise Frozen(FreezeReason(Freeze.SCRATCH, step))
            ratios.append((step, position, scratch.standard // shard, scratch.interleaved // shard))
    return tuple(ratios)


def scaled_scratch(ratios: tuple[ScratchRatio, ...], shard_bytes: tuple[int, ...]) -> tuple[tuple[int, int, int], ...]:
    """(step, standard, interleaved) scratch for members with these shard sizes."""
    return tuple([(step, shard_bytes[position] * standard, shard_bytes[position] * interleaved)
                  for step, position, standard, interleaved in ratios])  # a list: no generator per call (121k)


def family_ratios(facts: PlanFacts, members: LayoutGroup, sum_step: int | None) -> tuple[ScratchRatio, ...]:
    """`scratch_ratios` of a family's members but the Sum's: the family's split sets that one (`family_scratch`)."""
    return tuple(ratio for ratio in scratch_ratios(facts, members) if ratio[0] != sum_step)


def split_candidate(facts: PlanFacts, members: LayoutGroup, role_of: dict[int, int], derived: DerivedSplit,
                    moved: tuple[Move, ...], ratios: tuple[ScratchRatio, ...], label: str) -> Candidate:
    """A family's candidate under one split: its members' layouts, shapes and bytes, the Sum's scratch in the class
    the input put it in, then the scratch that scales with a member's shard, and the Gemm's new operation."""
    values = facts.plan.values
    layouts = tuple(derived.layouts[role_of[m]] for m in members)
    shapes = tuple(derived.result_shape if role_of[m] == derived.result else tuple(values[m].shape) for m in members)
    sizes = tuple(value_bytes(values[m].model_copy(update={"shape": list(shape)}), m in facts.amp_aligned, layout)
                  for m, shape, layout in zip(members, shapes, layouts))
    scratch = scaled_scratch(ratios, tuple(size.shard_bytes for size in sizes))
    if derived.sum_scratch is not None:
        scratch = (placed_sum_scratch(facts.plan, *derived.sum_scratch), *scratch)
    return Candidate(layouts, sizes, exchange_cost(facts, members, moved, layouts), scratch, shapes,
                     (derived.operation,), label)


def shard_ordered_roles(facts: PlanFacts, members: LayoutGroup, role_of: dict[int, int],
                        ratios: tuple[ScratchRatio, ...]) -> tuple[int, ...]:
    """A family's AMP-aligned roles whose bytes alone do not order their splits at every step: a scratch that is a
    multiple of the role's shard (not of its aligned bytes), or a member of its group aligned otherwise than the
    role. The Pareto front of a family's splits compares their shards too, so that it drops only dominated ones."""
    aligned = facts.amp_aligned
    found = {role_of[members[position]] for _, position, _, _ in ratios} & aligned
    found |= {role for m, role in role_of.items() if (m in aligned) != (role in aligned)}
    return tuple(sorted(found))


def left_out_of(facts: PlanFacts, members: LayoutGroup, role_of: dict[int, int], splits: tuple,
                shards: dict[int, np.ndarray], ratios: tuple[ScratchRatio, ...],
                sum_scratch: tuple[int, np.ndarray] | None) -> LeftOut | None:
    """The bytes of a family's `splits` left out of its candidates, from each role's shard bytes under them
    (`shards`), as `split_candidate` counts a candidate's: each member aligned by its own rule times its copies,
    the Sum's scratch (`sum_scratch`: step, bytes) in the class the input put it in, the scratch that is a
    multiple of a member's shard. None when nothing was left out."""
    if not shards or not len(next(iter(shards.values()))):
        return None
    plan = facts.plan
    values = plan.values
    columns = [aligned_bytes(shards[role_of[m]], values[m].memory_class, m in facts.amp_aligned) * values[m].copies
               for m in members]
    scratch: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    if sum_scratch is not None:
        step, amount = sum_scratch
        zero = np.zeros_like(amount)
        scratch[step] = (zero, amount) if sum_scratch_interleaved(plan, step) else (amount, zero)
    for step, position, standard, interleaved in ratios:
        shard = shards[role_of[members[position]]]
        scratch[step] = (shard * standard, shard * interleaved)
    return LeftOut(np.column_stack(columns).astype(np.int64),
                   tuple(values[m].memory_class == STANDARD for m in members),
                   tuple((step, s, i) for step, (s, i) in scratch.items()), tuple(splits))


Family = KernelFamily | AttentionFamily
"""A Gemm family or an attention product: values that one split lays out together."""


def family_members(family: Family, group_of: dict[int, LayoutGroup]) -> tuple[LayoutGroup, dict[int, int]]:
    """Every value of a family's groups, sorted, and which member of the family each one's group holds."""
    role_of = {m: role for role in family.members for m in group_of[role]}
    return tuple(sorted(role_of)), role_of


def held_family(context: Context, family: Family, members: LayoutGroup, group_of: dict[int, LayoutGroup],
                roles: tuple[int, ...]) -> FrozenGroup | None:
    """The family frozen by the first of `roles` whose group a rule holds (the family's own steps allowed), or None."""
    for role in roles:
        reason = freeze_reason(context, group_of[role], family.steps)
        if reason is not None:
            return FrozenGroup(members, reason.in_family(family.gemm_step, role))
    return None


def each_family(context: Context, groups: tuple[LayoutGroup, ...], families: tuple[Family, ...],
                decide: Callable[[Context, Family, dict[int, LayoutGroup], dict],
                                 FreeGroup | FrozenGroup]) -> Decisions:
    """Every family whose groups are all unclaimed, decided as one unit by `decide(context, family,
    group_of, cache)`; a family sharing values with an earlier one is frozen (`cache` lets equal
    families share their candidates)."""
    group_of = {m: group for group in groups for m in group}
    free, frozen, claimed = [], [], set()
    cache: dict = {}
    for family in families:
        if any(role not in group_of for role in family.members):
            continue
        members = {m for role in family.members for m in group_of[role]}
        if members & claimed:
            reason = FreezeReason(Freeze.FAMILY_OVERLAP, family_step=family.gemm_step)
            frozen.append(FrozenGroup(tuple(sorted(members - claimed)), reason))
            continue
        claimed |= members
        group = decide(context, family, group_of, cache)
        (free if isinstance(group, FreeGroup) else frozen).append(group)
    return Decisions(tuple(free), tuple(frozen))
