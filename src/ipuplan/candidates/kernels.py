"""Freedom level `kernels`: each Gemm family re-split as one unit (pK, pM, pN).

Candidates per family are splits whose every member layout is derived by `families.derive`
(so they are consistent by construction), pruned to the Pareto front of their members'
bytes, the input's own split always first.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

import numpy as np

from ipuplan.candidates.rules import (
    Context,
    Frozen,
    LayoutGroup,
    ScratchRatio,
    each_family,
    exchange_cost,
    freeze_reason,
    moved_tensors,
    scaled_scratch,
    scratch_ratios,
)
from ipuplan.candidates.storage import partition_options
from ipuplan.candidates.types import Candidate, Decisions, FreeGroup, Freeze, FreezeReason, FrozenGroup
from ipuplan.estimate import aligned_bytes, value_bytes
from ipuplan.facts import PlanFacts
from ipuplan.families import (
    IllegalSplit,
    KernelFamily,
    Split,
    current_split,
    derive,
    inner_block_for,
    inner_block_granule,
)
from ipuplan.format import Plan
from ipuplan.layout import AxisTiling, ceil_div

MAX_SPLITS = 48


@lru_cache(maxsize=1024)
def _spreads(k: int) -> tuple[tuple[int, int], ...]:
    """Every (a, b) with a * b dividing k, in the order the Sum spread search tries them."""
    divisors = [d for d in range(1, k + 1) if k % d == 0]
    return tuple((a, b) for a in divisors for b in divisors if (k // a) % b == 0)


class AxisSizes:
    """Elements per shard of one axis for every partition count, looked up instead of recomputed."""

    def __init__(self, blocks: int, axis: AxisTiling) -> None:
        self.blocks = blocks
        self.extents = [0] + [axis.extent_of_blocks(blocks, p) for p in range(1, blocks + 1)]

    def extent(self, partitions: int) -> int:
        return self.extents[min(partitions, self.blocks)]


class _Sizer:
    """Bytes of each family member under a split, by the estimate's arithmetic, without building layouts."""

    def __init__(self, plan: Plan, family: KernelFamily, aligned: frozenset[int]) -> None:
        self.plan, self.family, self.aligned = plan, family, aligned
        values = plan.values
        self.k_dimension = self._dimension_size(family.left, family.left_axes["k"])
        self.granule = inner_block_granule(plan, family)
        self.m = self._axis(family.left, family.left_axes["m"])
        self.n = self._axis(family.right, family.right_axes["n"])
        self.sum_m = self._axis(family.sum_result, family.sum_axes["m"])
        self.sum_n = self._axis(family.sum_result, family.sum_axes["n"])
        self.partial_m = self._axis(family.partials, family.partial_axes["m"])
        self.partial_n = self._axis(family.partials, family.partial_axes["n"])
        self.base = {v: self._untiled(v) for v in family.members}
        self.size = {v: values[v].element_size for v in family.members}

    def _dimension_size(self, value_id: int, position: int) -> int:
        value = self.plan.values[value_id]
        return value.shape[value.parsed_layout.axes[position].axis.dimension(len(value.shape))]

    def _axis(self, value_id: int, position: int) -> AxisSizes:
        axis = self.plan.values[value_id].parsed_layout.axes[position]
        return AxisSizes(axis.blocks(self._dimension_size(value_id, position)), axis)

    def _untiled(self, value_id: int) -> int:
        """Elements of the dimensions no axis tiles (whole on every tile)."""
        value = self.plan.values[value_id]
        tiled = {a.axis.dimension(len(value.shape)) for a in value.parsed_layout.axes}
        return int(np.prod([d for i, d in enumerate(value.shape) if i not in tiled], dtype=np.int64))

    def inner_block(self, k: int) -> int | None:
        return inner_block_for(self.k_dimension, k, self.granule)

    def _bytes(self, value_id: int, elements: int) -> int:
        return aligned_bytes(elements * self.size[value_id], self.plan.values[value_id].memory_class, value_id in self.aligned)

    def sum_spread(self, split: Split, tiles: int, fixed: tuple[int, int] | None) -> tuple[int, int] | None:
        """(a, b) spreading pK over the Sum result's N and M with the smallest shard.

        With `fixed` (the Sum result's N and M partitions, when it cannot change), the only
        spread that reproduces them, if there is one.
        """
        if fixed is not None:
            a, b = fixed[0] // split.n, fixed[1] // split.m
            exact = a * split.n == fixed[0] and b * split.m == fixed[1] and a and b and split.k % (a * b) == 0
            return (a, b) if exact else None
        best = (None, 1, 1)
        sum_n, sum_m, others = self.sum_n, self.sum_m, split.tiles // split.k
        for a, b in _spreads(split.k):
            if split.n * a > sum_n.blocks or split.m * b > sum_m.blocks or others * a * b > tiles:
                continue
            shard = sum_n.extent(split.n * a) * sum_m.extent(split.m * b)
            if best[0] is None or shard < best[0]:
                best = (shard, a, b)
        return best[1], best[2]

    def vector(self, split: Split, inner_block: int) -> tuple[int, ...]:
        family = self.family
        m, n = self.m.extent(split.m), self.n.extent(split.n)
        left = inner_block * m * self.base[family.left]
        sum_shard = (self.sum_n.extent(split.n * split.sum_n) * self.sum_m.extent(split.m * split.sum_m)
                     * self.base[family.sum_result] * self.size[family.sum_result])
        partials = self.partial_m.extent(split.m) * self.partial_n.extent(split.n) * self.base[family.partials]
        source = () if family.left_source is None else (self._bytes(family.left_source, left),)
        return (*source, self._bytes(family.left, left), self._bytes(family.right, inner_block * n * self.base[family.right]),
                self._bytes(family.partials, partials), sum_shard, (split.k + 1) * sum_shard)


def split_options(plan: Plan, family: KernelFamily, aligned: frozenset[int], sum_fixed: bool = False) -> list[Split]:
    """Every legal split's Pareto-best representatives (by member bytes), at most MAX_SPLITS, the input's first."""
    sizer = _Sizer(plan, family, aligned)
    fixed = None
    if sum_fixed:
        axes = plan.values[family.sum_result].parsed_layout.axes
        fixed = (axes[family.sum_axes["n"]].partitions, axes[family.sum_axes["m"]].partitions)
    tiles = plan.tile_count
    found: list[Split] = []
    vectors: list[tuple[int, ...]] = []
    for k in range(1, ceil_div(sizer.k_dimension, sizer.granule) + 1):
        inner_block = sizer.inner_block(k)
        if inner_block is None:
            continue
        for m in partition_options(sizer.m.blocks):
            if k * m > tiles:
                break
            for n in partition_options(sizer.n.blocks):
                if k * m * n > tiles:
                    break
                spread = sizer.sum_spread(Split(k, m, n), tiles, fixed)
                if spread is None:
                    continue
                split = Split(k, m, n, *spread)
                found.append(split)
                vectors.append(sizer.vector(split, inner_block))
    if not found:
        return [current_split(plan, family)]
    front = pareto_front(np.array(vectors, dtype=np.int64))
    chosen = [found[i] for i in front]
    if len(chosen) > MAX_SPLITS:
        totals = np.array([sum(vectors[i]) for i in front])
        order = np.argsort(totals)
        chosen = [chosen[order[int(i * len(order) / MAX_SPLITS)]] for i in range(MAX_SPLITS)]
    original = current_split(plan, family)
    return [original, *(s for s in chosen if s != original)]


def pareto_front(vectors: np.ndarray) -> list[int]:
    """Indices of the vectors no other vector is at most in every component (first of equals kept)."""
    order = np.lexsort(vectors.T[::-1])
    kept: list[int] = []
    kept_vectors = np.empty_like(vectors)
    for index in order:
        vector = vectors[index]
        if np.any(np.all(kept_vectors[: len(kept)] <= vector, axis=1)):
            continue
        kept_vectors[len(kept)] = vector
        kept.append(int(index))
    return kept


def _family_candidate(facts: PlanFacts, family: KernelFamily, split: Split, members: LayoutGroup,
                      role_of: dict[int, int], moved, ratios: tuple[ScratchRatio, ...]) -> Candidate | None:
    """The family's layouts, bytes, scratch and Gemm text under `split`; None when the split cannot be laid out."""
    plan = facts.plan
    try:
        derived = derive(plan, family, split)
    except IllegalSplit:
        return None
    values = plan.values
    layouts = tuple(derived.layouts[role_of[m]] for m in members)
    shapes = tuple(tuple(derived.partial_shape) if role_of[m] == family.partials else tuple(values[m].shape) for m in members)
    sizes = tuple(
        value_bytes(values[m].model_copy(update={"shape": list(shape)}), m in facts.amp_aligned, layout)
        for m, shape, layout in zip(members, shapes, layouts)
    )
    given = plan.steps[family.sum_step].scratch
    sum_scratch = (0, derived.sum_scratch) if given.standard == 0 and given.interleaved > 0 else (derived.sum_scratch, 0)
    scratch = ((family.sum_step, *sum_scratch),) + scaled_scratch(ratios, tuple(size.shard_bytes for size in sizes))
    label = f"split pK={split.k} pM={split.m} pN={split.n}, Sum spread {split.sum_n}x{split.sum_m}"
    return Candidate(layouts, sizes, exchange_cost(facts, members, moved, layouts), scratch, shapes,
                     ((family.gemm_step, derived.operation),), label)


def _signature(facts: PlanFacts, family: KernelFamily, members, role_of, fixed, ratios) -> tuple:
    """Everything a family's candidates depend on, with steps relative to its Gemm: equal families share them."""
    plan = facts.plan
    values = plan.values
    roles = (family.left_source, family.left, family.right, family.partials, family.sum_result)
    return (
        tuple((values[m].layout, tuple(values[m].shape), values[m].precision, m in facts.amp_aligned,
               roles.index(role_of[m])) for m in members),
        plan.steps[family.gemm_step].operation,
        plan.tile_count,
        tuple(roles.index(r) for r in fixed),
        tuple((step - family.gemm_step, position, std, il) for step, position, std, il in ratios),
        family.sum_step - family.gemm_step,
    )


def shift_steps(candidate: Candidate, offset: int) -> Candidate:
    return replace(
        candidate,
        scratch=tuple((step + offset, std, il) for step, std, il in candidate.scratch),
        operations=tuple((step + offset, text) for step, text in candidate.operations),
    )


def family_group(context: Context, family: KernelFamily, group_of: dict[int, LayoutGroup], cache: dict) -> FreeGroup | FrozenGroup:
    """The family as one free group (every member and its aliases), or frozen with the reason.

    `cache` maps a family's signature to its candidates, so repeated structures are derived once.
    """
    facts = context.facts
    own_steps = frozenset(s for s in (family.local_kernel_step, family.gemm_step, family.sum_step) if s is not None)
    role_of = {m: role for role in family.members for m in group_of[role]}
    members = tuple(sorted(role_of))
    for role in (family.left, family.right, family.partials):
        reason = freeze_reason(context, group_of[role], own_steps)
        if reason is not None:
            return FrozenGroup(members, reason.in_family(family.gemm_step, role))
    held = {role: freeze_reason(context, group_of[role], own_steps)
            for role in (family.left_source, family.sum_result) if role is not None}
    fixed = [role for role, reason in held.items() if reason is not None]
    moved = moved_tensors(facts, members)
    try:
        ratios = tuple(r for r in scratch_ratios(facts, members) if r[0] != family.sum_step)
    except Frozen as frozen:
        return FrozenGroup(members, frozen.reason.in_family(family.gemm_step))
    signature = _signature(facts, family, members, role_of, fixed, ratios)
    if signature not in cache:
        found = []
        for split in split_options(facts.plan, family, facts.amp_aligned, family.sum_result in fixed):
            candidate = _family_candidate(facts, family, split, members, role_of, moved, ratios)
            if candidate is not None and all(
                candidate.layouts[members.index(r)] == facts.plan.values[r].parsed_layout for r in fixed
            ):
                found.append(shift_steps(candidate, -family.gemm_step))
        cache[signature] = found
    candidates = [
        replace(shift_steps(c, family.gemm_step), exchange_bytes=exchange_cost(facts, members, moved, c.layouts))
        for c in cache[signature]
    ]
    if len(candidates) <= 1:
        if fixed:  # the only split left is the input's because a member that must keep its layout says so
            return FrozenGroup(members, held[fixed[0]].in_family(family.gemm_step, fixed[0]))
        return FrozenGroup(members, FreezeReason(Freeze.NO_OTHER_SPLIT, family_step=family.gemm_step))
    return FreeGroup(members, tuple(candidates), input_index=0, kind="kernel")


def kernel_level(context: Context, groups: tuple[LayoutGroup, ...]) -> Decisions:
    """Every recognised Gemm family whose groups are all unclaimed: free or frozen as one unit."""
    return each_family(context, groups, context.facts.families, family_group)
