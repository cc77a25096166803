"""Freedom level `attention` (level 2 with `kernels`, in scopes `kernels` and `full`): attention products re-split
over heads, M, N (and K).

Candidates are splits whose every member layout `attention.derive_attention` derives (so they are
consistent by construction), pruned to the Pareto front of the members' bytes and the Sum scratch,
the input's own split first. The operands of `AttentionSoftmax` / `AttentionMerge` are not members:
they keep their layout, and the movers between them and the Gemm absorb the change.
"""

from __future__ import annotations

import numpy as np

from ipuplan.facts.attention_families import (
    AttentionFamily,
    HeadSplit,
    current_head_split,
    derive_attention,
    inner_block,
    k_options,
)
from ipuplan.facts.estimate import aligned_bytes
from ipuplan.facts.gemm_families import IllegalSplit, sum_scratch, sum_scratch_interleaved
from ipuplan.facts.plan_facts import PlanFacts
from ipuplan.space import rules
from ipuplan.space.levels.gemm import MAX_SPLITS, AxisSizes, SplitSearch, pareto_front, split_grid
from ipuplan.space.levels.storage_layouts import partition_options
from ipuplan.space.types import Candidate, Decisions, FreeGroup, Freeze, FreezeReason, FrozenGroup, LeftOut

KIND = "attention"
UNIT = "attention"
"""What a report calls one of this level's families."""
"""The kind of the free groups this level makes (their left-out splits are promoted by `promote`)."""


class _HeadSizer:
    """Bytes of each member under many splits at once, by the estimate's arithmetic, without building layouts."""

    def __init__(self, facts: PlanFacts, family: AttentionFamily) -> None:
        self.facts, self.family = facts, family
        values = facts.plan.values
        self.axes = {v: self._axes(v) for v in family.members}
        self.whole = {v: int(np.prod([d for i, d in enumerate(values[v].shape) if i not in self._tiled(v)],
                                     dtype=np.int64)) for v in family.members}
        total = values[family.sum_result] if family.reduces else None
        self.sum_shard = facts.estimate.values[family.sum_result].shard_bytes if total is not None else 0

    def _tiled(self, value_id: int) -> set[int]:
        value = self.facts.plan.values[value_id]
        return {a.axis.dimension(len(value.shape)) for a in value.parsed_layout.axes}

    def _axes(self, value_id: int) -> dict[str, AxisSizes]:
        value = self.facts.plan.values[value_id]
        found = {}
        for role, axis in zip(self.family.roles[value_id], value.parsed_layout.axes):
            found[role] = AxisSizes(axis.blocks(value.shape[axis.axis.dimension(len(value.shape))]), axis)
        return found

    def blocks(self, value_id: int, role: str) -> int:
        return self.axes[value_id][role].blocks

    def shards(self, splits: np.ndarray, blocks: np.ndarray) -> dict[int, np.ndarray]:
        """Per member, its shard bytes under each split (k, heads, m, n) with its K block."""
        values = self.facts.plan.values
        _, heads, m, n = splits.T
        partitions = {"heads": heads, "m": m, "n": n}
        found = {}
        for v in self.family.members:
            elements = np.full(len(splits), self.whole[v], dtype=np.int64)
            for role, sizer in self.axes[v].items():
                if role == "k":
                    elements = elements * blocks
                elif role != "pk":
                    elements = elements * sizer.extent(partitions[role])
            found[v] = elements * values[v].element_size
        return found

    def vectors(self, splits: np.ndarray, blocks: np.ndarray, raw: tuple[int, ...] = ()) -> np.ndarray:
        """Per split with its K block: the members' bytes and the Sum scratch, then the shards of `raw`'s members."""
        values = self.facts.plan.values
        shards = self.shards(splits, blocks)
        columns = [aligned_bytes(shards[v], values[v].memory_class, v in self.facts.amp_aligned)
                   for v in self.family.members]
        return np.column_stack((*columns, sum_scratch(splits[:, 0], self.sum_shard), *(shards[v] for v in raw)))


def head_splits(facts: PlanFacts, family: AttentionFamily, raw: tuple[int, ...] = ()) -> SplitSearch:
    """Every legal split's Pareto-best representatives (by member bytes and scratch, and the shards of the members
    in `raw`), at most MAX_SPLITS kept, the input's first; the rest of the front is left out."""
    sizer = _HeadSizer(facts, family)
    blocks = {}
    for k in k_options(facts.plan, family):
        try:
            blocks[k] = inner_block(facts.plan, family, k)
        except IllegalSplit:
            continue
    options = [list(blocks), *(partition_options(sizer.blocks(v, role)) for v, role in
                               ((family.left, "heads"), (family.left, "m"), (family.right, "n")))]
    found = split_grid(options, facts.plan.tile_count)
    original = current_head_split(facts.plan, family)
    if not len(found):
        return SplitSearch([original], [], {})
    sizes = np.array([blocks[k] for k in found[:, 0].tolist()], dtype=np.int64)
    front = np.array(pareto_front(sizer.vectors(found, sizes, raw)), dtype=np.int64)
    kept = front if len(front) <= MAX_SPLITS else front[[int(i * len(front) / MAX_SPLITS) for i in range(MAX_SPLITS)]]
    rest = np.setdiff1d(front, kept)
    chosen = [HeadSplit(heads, m, n, k) for k, heads, m, n in found[kept].tolist()]
    return SplitSearch([original, *(s for s in chosen if s != original)],
                       [HeadSplit(heads, m, n, k) for k, heads, m, n in found[rest].tolist()],
                       sizer.shards(found[rest], sizes[rest]))


def _candidate(facts: PlanFacts, family: AttentionFamily, split: HeadSplit, members: rules.LayoutGroup,
               role_of: dict[int, int], moved, ratios) -> Candidate | None:
    try:
        derived = derive_attention(facts.plan, family, split)
    except IllegalSplit:
        return None
    label = f"heads {split.heads} pM={split.m} pN={split.n} pK={split.k}"
    return rules.split_candidate(facts, members, role_of, derived, moved, ratios, label)


def _signature(facts: PlanFacts, family: AttentionFamily) -> tuple:
    """Everything the splits of a family depend on: repeated layers and unrolled copies share them."""
    values = facts.plan.values
    members = tuple((values[v].layout, tuple(values[v].shape), values[v].precision, v in facts.amp_aligned)
                    for v in family.members)
    sum_shard = facts.estimate.values[family.sum_result].shard_bytes if family.reduces else 0
    return members, facts.plan.steps[family.gemm_step].operation, facts.plan.tile_count, sum_shard


def _group_signature(facts: PlanFacts, family: AttentionFamily, members: rules.LayoutGroup, role_of: dict[int, int],
                     moved, ratios) -> tuple:
    """Everything a family's candidates depend on besides its splits, with steps relative to its Gemm."""
    values = facts.plan.values
    total = values[family.sum_result] if family.reduces else None
    return (
        rules.family_key(facts, members, family.members, role_of, ratios, family.gemm_step, moved),
        tuple(family.roles[v] for v in family.members),
        None if total is None else (total.layout, tuple(total.shape), total.precision),
        None if total is None
        else (family.sum_step - family.gemm_step, sum_scratch_interleaved(facts.plan, family.sum_step)),
    )


def attention_group(context: rules.Context, family: AttentionFamily, group_of: dict[int, rules.LayoutGroup],
                    cache: dict) -> FreeGroup | FrozenGroup:
    """The product as one free group (every member and its aliases), or frozen with the reason.

    `cache` maps a family's signature to its splits, and with its group's signature to its candidates
    (steps relative to the Gemm), so repeated layers and unrolled copies derive them once.
    """
    facts = context.facts
    members, role_of = rules.family_members(family, group_of)
    held = rules.held_family(context, family, members, group_of, family.members)
    if held is not None:
        return held
    try:
        ratios = rules.family_ratios(facts, members, family.sum_step)
    except rules.Frozen as frozen:
        return FrozenGroup(members, frozen.reason.in_family(family.gemm_step))
    moved = rules.moved_tensors(facts, members)
    raw = rules.shard_ordered_roles(facts, members, role_of, ratios)
    signature = (_signature(facts, family), raw)
    if signature not in cache:
        cache[signature] = head_splits(facts, family, raw)
    key = (signature, _group_signature(facts, family, members, role_of, moved, ratios))
    if key not in cache:
        cache[key] = _choices(facts, family, cache[signature], members, role_of, moved, ratios)
    found, left_out = cache[key]
    candidates = tuple(c.shifted(family.gemm_step) for c in found)
    if len(candidates) <= 1:
        return FrozenGroup(members, FreezeReason(Freeze.NO_OTHER_SPLIT, family_step=family.gemm_step))
    return FreeGroup(members, candidates, input_index=0, kind=KIND,
                     left_out=None if left_out is None else left_out.shifted(family.gemm_step))


def promote(context: rules.Context, members: rules.LayoutGroup, splits) -> tuple[Candidate, ...]:
    """The candidates of the product whose free group is `members` under `splits` (some of its left-out choices)."""
    facts = context.facts
    family = next(f for f in facts.attention if f.left in members)
    members, role_of = rules.family_members(family, context.group_of)
    try:
        ratios = rules.family_ratios(facts, members, family.sum_step)
    except rules.Frozen:
        return ()
    moved = rules.moved_tensors(facts, members)
    found = (_candidate(facts, family, split, members, role_of, moved, ratios) for split in splits)
    return tuple(c for c in found if c is not None)


def _choices(facts: PlanFacts, family: AttentionFamily, search: SplitSearch, members: rules.LayoutGroup,
             role_of: dict[int, int], moved, ratios) -> tuple[tuple[Candidate, ...], LeftOut | None]:
    """The product's candidates and the splits their cap left out, with steps relative to its Gemm."""
    found = (_candidate(facts, family, split, members, role_of, moved, ratios) for split in search.kept)
    candidates = tuple(c.shifted(-family.gemm_step) for c in found if c is not None)
    scratch = None
    if family.reduces and search.left_out:
        k = np.array([split.k for split in search.left_out], dtype=np.int64)
        scratch = (family.sum_step, sum_scratch(k, facts.estimate.values[family.sum_result].shard_bytes))
    left_out = rules.left_out_of(facts, members, role_of, search.left_out, search.shards, ratios, scratch)
    return candidates, None if left_out is None else left_out.shifted(-family.gemm_step)


def attention_level(context: rules.Context, groups: tuple[rules.LayoutGroup, ...]) -> Decisions:
    """Every attention product whose groups are all unclaimed: free or frozen as one unit."""
    return rules.each_family(context, groups, context.facts.attention, attention_group)


def families(facts: PlanFacts) -> list[tuple[rules.Kernels, tuple[int, ...]]]:
    """Each attention product as a report shows it: its kernels and its members."""
    return [(rules.kernels_at(facts, family.steps), family.members) for family in facts.attention]
