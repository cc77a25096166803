"""Freedom level `kernels`: each Gemm family re-split as one unit (pK, pM, pN).

Candidates per family are splits whose every member layout is derived by `families.derive`
(so they are consistent by construction), pruned to the Pareto front of their members'
bytes, the input's own split always first.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ipuplan.facts.estimate import aligned_bytes
from ipuplan.facts.gemm_families import (
    IllegalSplit,
    KernelFamily,
    Split,
    current_split,
    derive,
    inner_block_for,
    inner_block_granule,
    sum_scratch,
    sum_scratch_interleaved,
)
from ipuplan.facts.plan_facts import PlanFacts
from ipuplan.plan.format import Plan
from ipuplan.plan.layout import AxisTiling, ceil_div
from ipuplan.space.levels.storage_layouts import partition_options
from ipuplan.space.rules import (
    Context,
    Frozen,
    Kernels,
    LayoutGroup,
    ScratchRatio,
    each_family,
    family_key,
    family_members,
    family_ratios,
    freeze_reason,
    held_family,
    kernels_at,
    left_out_of,
    moved_tensors,
    shard_ordered_roles,
    split_candidate,
)
from ipuplan.space.types import Candidate, Decisions, FreeGroup, Freeze, FreezeReason, FrozenGroup, LeftOut

MAX_SPLITS = 48
PARETO_BLOCK = 512
"""Vectors `pareto_front` checks at once: fewer numpy calls, but pairs within a block cost quadratic memory."""


KIND = "kernel"
UNIT = "Gemm"
"""What a report calls one of this level's families."""
"""The kind of the free groups this level makes (their left-out splits are promoted by `promote`)."""


@lru_cache(maxsize=1024)
def _spreads(k: int) -> np.ndarray:
    """Every (a, b) with a * b dividing k, in the order the Sum spread search tries them, (1, 1) first."""
    divisors = [d for d in range(1, k + 1) if k % d == 0]
    return np.array([(a, b) for a in divisors for b in divisors if (k // a) % b == 0], dtype=np.int64)


class AxisSizes:
    """Elements per shard of one axis for every partition count, looked up instead of recomputed."""

    def __init__(self, blocks: int, axis: AxisTiling) -> None:
        self.blocks = blocks
        self.extents = np.array([0] + [axis.extent_of_blocks(blocks, p) for p in range(1, blocks + 1)], dtype=np.int64)

    def extent(self, partitions: np.ndarray) -> np.ndarray:
        """Per partition count (any shape), elements per shard; more partitions than blocks leave some empty."""
        return self.extents[np.minimum(partitions, self.blocks)]


def split_grid(options: list[list[int]], tiles: int) -> np.ndarray:
    """One row per choice of an option of each column (each list ascending) whose product is at most `tiles`,
    in lexicographic order: the nested loops that break at the first option past the chip, at once."""
    rows = np.ones((1, 0), dtype=np.int64)
    products = np.ones(1, dtype=np.int64)
    for column in options:
        choices = np.asarray(column, dtype=np.int64)
        counts = np.searchsorted(choices, tiles // products, side="right")
        parent = np.repeat(np.arange(len(products)), counts)
        child = np.arange(len(parent)) - np.repeat(np.cumsum(counts) - counts, counts)
        rows = np.column_stack([rows[parent], choices[child]])
        products = products[parent] * choices[child]
    return rows


class _Sizer:
    """Bytes of each family member under many splits at once, by the estimate's arithmetic, without building layouts."""

    def __init__(self, plan: Plan, family: KernelFamily, aligned: frozenset[int]) -> None:
        self.plan, self.family, self.aligned = plan, family, aligned
        values = plan.values
        self.k_dimension = self._dimension_size(family.left, family.left_axes["k"])
        self.granule = inner_block_granule(plan, family.gemm_step)
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
        """The K block of pK = `k` (None when there is none, or when it would pad a K that rejects padding, as
        `derive` refuses)."""
        block = inner_block_for(self.k_dimension, k, self.granule)
        left = self.plan.values[self.family.left].parsed_layout.axes[self.family.left_axes["k"]]
        return None if block is None or (self.k_dimension % block and left.padding == "Reject") else block

    def _aligned(self, value_id: int, shard: np.ndarray) -> np.ndarray:
        return aligned_bytes(shard, self.plan.values[value_id].memory_class, value_id in self.aligned)

    def sum_spreads(self, splits: np.ndarray, tiles: int) -> np.ndarray:
        """Per split (k, m, n), the (a, b) spreading pK over the Sum result's N and M with the smallest shard
        (the first such in `_spreads` order; (1, 1) when none fits)."""
        k, m, n = splits.T
        spread = np.ones((len(splits), 2), dtype=np.int64)
        values, starts, counts = np.unique(k, return_index=True, return_counts=True)
        for value, start, count in zip(values.tolist(), starts.tolist(), counts.tolist()):
            rows = slice(start, start + count)  # the grid is sorted by k
            pairs = _spreads(value)
            n_parts, m_parts = n[rows, None] * pairs[:, 0], m[rows, None] * pairs[:, 1]
            fits = ((n_parts <= self.sum_n.blocks) & (m_parts <= self.sum_m.blocks)
                    & ((m * n)[rows, None] * (pairs[:, 0] * pairs[:, 1]) <= tiles))
            shard = np.where(fits, self.sum_n.extent(n_parts) * self.sum_m.extent(m_parts), np.iinfo(np.int64).max)
            spread[rows] = pairs[shard.argmin(axis=1)]
        return spread

    def shards(self, splits: np.ndarray, inner_blocks: np.ndarray) -> dict[int, np.ndarray]:
        """Per member, its shard bytes under each split (k, m, n, sum_n, sum_m) with its K block."""
        family, base, size = self.family, self.base, self.size
        _, m, n, sum_n, sum_m = splits.T
        left = inner_blocks * self.m.extent(m) * base[family.left]
        found = {
            family.left: left * size[family.left],
            family.right: inner_blocks * self.n.extent(n) * base[family.right] * size[family.right],
            family.partials: self.partial_m.extent(m) * self.partial_n.extent(n) * base[family.partials]
            * size[family.partials],
            family.sum_result: self.sum_n.extent(n * sum_n) * self.sum_m.extent(m * sum_m) * base[family.sum_result]
            * size[family.sum_result],
        }
        if family.left_source is not None:
            found[family.left_source] = left * size[family.left_source]
        return found

    def vectors(self, splits: np.ndarray, inner_blocks: np.ndarray, raw: tuple[int, ...] = ()) -> np.ndarray:
        """Per split with its K block: the members' bytes, the Sum result's shard and the Sum scratch, then the
        shards of the members in `raw` (those the bytes alone would not order: scratch that is a multiple of
        their shard, aliases aligned otherwise)."""
        family = self.family
        shards = self.shards(splits, inner_blocks)
        total = shards[family.sum_result]
        members = [self._aligned(v, shards[v]) for v in family.members if v != family.sum_result]
        return np.column_stack((*members, total, sum_scratch(splits[:, 0], total), *(shards[v] for v in raw)))


def _with_spreads(sizer: _Sizer, splits: np.ndarray, tiles: int, fixed: tuple[int, int] | None) -> np.ndarray:
    """The splits (k, m, n) with their Sum spread (sum_n, sum_m) appended.

    With `fixed` (the Sum result's N and M partitions, when it cannot change), only the splits
    some spread reproduces them for, with that spread.
    """
    if fixed is None:
        return np.column_stack((splits, sizer.sum_spreads(splits, tiles)))
    k, m, n = splits.T
    a, b = fixed[0] // n, fixed[1] // m
    exact = (a * n == fixed[0]) & (b * m == fixed[1]) & (a > 0) & (b > 0) & (k % np.maximum(a * b, 1) == 0)
    return np.column_stack((splits, a, b))[exact]


@dataclass(frozen=True)
class SplitSearch:
    """A family's splits: the candidates' (the input's first), and the Pareto-best ones the cap left out."""

    kept: list[Split]
    left_out: list[Split]
    shards: dict[int, np.ndarray]
    """Per family member, its shard bytes under each left-out split."""


def split_options(plan: Plan, family: KernelFamily, aligned: frozenset[int], sum_fixed: bool = False,
                  raw: tuple[int, ...] = (), source_fixed: bool = False) -> SplitSearch:
    """Every legal split's Pareto-best representatives (by member bytes, and the shards of the members in `raw`),
    at most MAX_SPLITS kept, the input's first; the rest of the front is left out. A split off the front is
    dominated: some split of the front has, member by member, no more bytes, so no more at any step.

    `sum_fixed` / `source_fixed`: the Sum result / the F16 source keeps its layout, so only the splits that lay
    it out as the input does are legal (for the source: the input's pK, pM and pN)."""
    sizer = _Sizer(plan, family, aligned)
    fixed = None
    if sum_fixed:
        axes = plan.values[family.sum_result].parsed_layout.axes
        fixed = (axes[family.sum_axes["n"]].partitions, axes[family.sum_axes["m"]].partitions)
    tiles = plan.tile_count
    inner_blocks = {k: sizer.inner_block(k) for k in range(1, ceil_div(sizer.k_dimension, sizer.granule) + 1)}
    inner_blocks = {k: block for k, block in inner_blocks.items() if block is not None}
    grid = split_grid([list(inner_blocks), partition_options(sizer.m.blocks), partition_options(sizer.n.blocks)], tiles)
    found = _with_spreads(sizer, grid, tiles, fixed)
    original = current_split(plan, family)
    if source_fixed:
        found = found[(found[:, :3] == (original.k, original.m, original.n)).all(axis=1)]
    if not len(found):
        return SplitSearch([original], [], {})
    blocks = np.array([inner_blocks[k] for k in found[:, 0].tolist()], dtype=np.int64)
    vectors = sizer.vectors(found, blocks, raw)
    front = np.array(pareto_front(vectors), dtype=np.int64)
    kept = front
    if len(front) > MAX_SPLITS:
        order = np.argsort(vectors[front].sum(axis=1))
        kept = front[[order[int(i * len(order) / MAX_SPLITS)] for i in range(MAX_SPLITS)]]
    chosen = [Split(*found[i].tolist()) for i in kept]
    rest = np.setdiff1d(front, kept)
    return SplitSearch([original, *(s for s in chosen if s != original)], [Split(*found[i].tolist()) for i in rest],
                       sizer.shards(found[rest], blocks[rest]))


def pareto_front(vectors: np.ndarray) -> list[int]:
    """Indices of the vectors no other vector is at most in every component (first of equals kept).

    In lexicographic order only an earlier vector can be at most a later one (of equals, the first
    comes first), and whatever a dropped vector is at most, a kept one is at most too. So each block
    of vectors, in that order, is checked at once against the front kept so far, and what survives
    against its earlier survivors: the same front as a check of one vector at a time.
    """
    order = np.lexsort(vectors.T[::-1])
    kept = np.empty(0, dtype=np.int64)
    for start in range(0, len(order), PARETO_BLOCK):
        block = order[start:start + PARETO_BLOCK]
        block = block[~_at_most(vectors[kept], vectors[block]).any(axis=0)]
        rows = vectors[block]
        kept = np.concatenate((kept, block[~np.triu(_at_most(rows, rows), k=1).any(axis=0)]))
    return kept.tolist()


def _at_most(these: np.ndarray, those: np.ndarray) -> np.ndarray:
    """[i, j]: whether these[i] is at most those[j] in every component."""
    found = np.ones((len(these), len(those)), dtype=bool)
    for column in range(these.shape[1]):
        found &= these[:, column, None] <= those[None, :, column]
    return found


def _family_candidate(facts: PlanFacts, family: KernelFamily, split: Split, members: LayoutGroup,
                      role_of: dict[int, int], moved, ratios: tuple[ScratchRatio, ...]) -> Candidate | None:
    """The family's layouts, bytes, scratch and Gemm text under `split`; None when the split cannot be laid out."""
    plan = facts.plan
    try:
        derived = derive(plan, family, split)
    except IllegalSplit:
        return None
    label = f"split pK={split.k} pM={split.m} pN={split.n}, Sum spread {split.sum_n}x{split.sum_m}"
    return split_candidate(facts, members, role_of, derived, moved, ratios, label)


def _signature(facts: PlanFacts, family: KernelFamily, members, role_of, fixed, ratios, moved) -> tuple:
    """Everything a family's candidates depend on, with steps relative to its Gemm: equal families share them."""
    plan = facts.plan
    roles = (family.left_source, family.left, family.right, family.partials, family.sum_result)
    return (
        family_key(facts, members, roles, role_of, ratios, family.gemm_step, moved),
        plan.steps[family.gemm_step].operation,
        plan.tile_count,
        tuple(roles.index(r) for r in fixed),
        family.sum_step - family.gemm_step,
        sum_scratch_interleaved(plan, family.sum_step),
    )


@dataclass(frozen=True)
class _Parts:
    """What a family's candidates are made from besides its splits."""

    members: LayoutGroup
    role_of: dict[int, int]
    held: dict[int, FreezeReason | None]
    """The F16 source and the Sum result: why each must keep its layout, or None."""
    moved: tuple
    ratios: tuple[ScratchRatio, ...]

    @property
    def fixed(self) -> list[int]:
        return [role for role, reason in self.held.items() if reason is not None]


def _parts(context: Context, family: KernelFamily, group_of: dict[int, LayoutGroup]) -> _Parts | FrozenGroup:
    """The family's members and what holds them, or the family frozen with the reason."""
    facts = context.facts
    members, role_of = family_members(family, group_of)
    frozen_family = held_family(context, family, members, group_of, (family.left, family.right, family.partials))
    if frozen_family is not None:
        return frozen_family
    # the F16 source and the Sum result may be held and the family still re-split around their layouts
    held = {role: freeze_reason(context, group_of[role], family.steps)
            for role in (family.left_source, family.sum_result) if role is not None}
    try:
        ratios = family_ratios(facts, members, family.sum_step)
    except Frozen as frozen:
        return FrozenGroup(members, frozen.reason.in_family(family.gemm_step))
    return _Parts(members, role_of, held, moved_tensors(facts, members), ratios)


def family_group(context: Context, family: KernelFamily, group_of: dict[int, LayoutGroup],
                 cache: dict) -> FreeGroup | FrozenGroup:
    """The family as one free group (every member and its aliases), or frozen with the reason.

    `cache` maps a family's signature to its candidates, so repeated structures are derived once.
    """
    facts = context.facts
    parts = _parts(context, family, group_of)
    if isinstance(parts, FrozenGroup):
        return parts
    members, fixed = parts.members, parts.fixed
    signature = _signature(facts, family, members, parts.role_of, fixed, parts.ratios, parts.moved)
    if signature not in cache:
        cache[signature] = _family_choices(facts, family, parts)
    found, left_out = cache[signature]
    candidates = [c.shifted(family.gemm_step) for c in found]
    if len(candidates) <= 1:
        if fixed:  # the only split left is the input's because a member that must keep its layout says so
            return FrozenGroup(members, parts.held[fixed[0]].in_family(family.gemm_step, fixed[0]))
        return FrozenGroup(members, FreezeReason(Freeze.NO_OTHER_SPLIT, family_step=family.gemm_step))
    return FreeGroup(members, tuple(candidates), input_index=0, kind=KIND,
                     left_out=None if left_out is None else left_out.shifted(family.gemm_step))


def _split_candidates(facts: PlanFacts, family: KernelFamily, parts: _Parts, splits) -> list[Candidate]:
    """The family's candidates under `splits`, less those that cannot be laid out or move a member that must stay."""
    values, found = facts.plan.values, []
    for split in splits:
        candidate = _family_candidate(facts, family, split, parts.members, parts.role_of, parts.moved, parts.ratios)
        if candidate is not None and all(candidate.layouts[parts.members.index(r)] == values[r].parsed_layout
                                         for r in parts.fixed):
            found.append(candidate)
    return found


def _family_choices(facts: PlanFacts, family: KernelFamily, parts: _Parts) -> tuple[list[Candidate], LeftOut | None]:
    """The family's candidates and the splits their cap left out, with steps relative to the Gemm."""
    raw = shard_ordered_roles(facts, parts.members, parts.role_of, parts.ratios)
    search = split_options(facts.plan, family, facts.amp_aligned, family.sum_result in parts.fixed, raw,
                           family.left_source in parts.fixed)
    found = [c.shifted(-family.gemm_step) for c in _split_candidates(facts, family, parts, search.kept)]
    k = np.array([s.k for s in search.left_out], dtype=np.int64)
    scratch = (family.sum_step, sum_scratch(k, search.shards[family.sum_result])) if search.shards else None
    left_out = left_out_of(facts, parts.members, parts.role_of, tuple(search.left_out), search.shards, parts.ratios,
                           scratch)
    return found, None if left_out is None else left_out.shifted(-family.gemm_step)


def promote(context: Context, members: LayoutGroup, splits) -> tuple[Candidate, ...]:
    """The candidates of the family whose free group is `members` under `splits` (some of its left-out choices); equal
    families under equal splits (the copies of an unrolled program) derived once, then shifted to their Gemm."""
    facts = context.facts
    family = _family_of(context, members)
    parts = _parts(context, family, context.group_of)
    if isinstance(parts, FrozenGroup):
        return ()
    key = ("gemm promote", _signature(facts, family, parts.members, parts.role_of, parts.fixed, parts.ratios,
                                      parts.moved), tuple(splits))
    if key not in context.cache:
        context.cache[key] = [c.shifted(-family.gemm_step) for c in _split_candidates(facts, family, parts, splits)]
    return tuple(c.shifted(family.gemm_step) for c in context.cache[key])


def _family_of(context: Context, members: LayoutGroup) -> KernelFamily:
    """The first family (in the facts' order) whose left operand is among `members` (a scan of every family per
    promoted group was 4.4 s at 200k values)."""
    if "gemm family by left" not in context.cache:
        by_left: dict[int, int] = {}
        for k, family in enumerate(context.facts.families):
            by_left.setdefault(family.left, k)
        context.cache["gemm family by left"] = by_left
    by_left = context.cache["gemm family by left"]
    return context.facts.families[min(by_left[m] for m in members if m in by_left)]


def kernel_level(context: Context, groups: tuple[LayoutGroup, ...]) -> Decisions:
    """Every recognised Gemm family whose groups are all unclaimed: free or frozen as one unit."""
    return each_family(context, groups, context.facts.families, family_group)


def families(facts: PlanFacts) -> list[tuple[Kernels, tuple[int, ...]]]:
    """Each Gemm family as a report shows it: its kernels and its members."""
    return [(kernels_at(facts, family.steps), family.members) for family in facts.families]
