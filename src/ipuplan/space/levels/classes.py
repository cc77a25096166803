"""Freedom level `classes` (part of scope `full`): the memory class of a value whose tiling must stay.

Operands of element-wise kernels (LayerNorm scales, biases, residuals) keep their tiling, but the
kernel reads them from either class, so their class is a decision (REPLAN.md, freedom level 3).
Gemm operands and results keep their class: the kernel variant expects them where they are, so a
group that a Gemm family's steps touch, or that is born or dies at a Gemm, is left to other levels;
so is anything frozen for a reason other than the kernels that read or write it.
"""

from __future__ import annotations

from dataclasses import replace

from ipuplan.plan.layout import MEMORY_CLASSES
from ipuplan.space import rules
from ipuplan.space.types import Candidate, Decisions, FreeGroup, Freeze

MOVABLE_CLASS = frozenset({Freeze.READ_BY_KERNEL, Freeze.WRITTEN_BY_KERNEL, Freeze.UNSHOWN_READ, Freeze.NO_READER})
"""Groups frozen only because a kernel touches them (or may read them, or an unnamed one reads them) may change
class; a value never live takes no memory in either class."""


def gemm_touched(context: rules.Context) -> frozenset[int]:
    """Values born or dying at a Gemm step, and values live at a recognised family's own steps that it reads or
    writes."""
    facts = context.facts
    plan, live, flow = facts.plan, facts.live, facts.flow
    touched: set[int] = set()
    for step in plan.steps:
        if step.parsed_operation.kind == "Gemm":
            touched.update(live.born_at[step.index], live.dies_at[step.index])
    for family in facts.families:
        for step in family.steps:
            touched.update(flow.steps[step].reads, flow.steps[step].writes)
    return frozenset(touched)


def class_candidates(context: rules.Context, members: rules.LayoutGroup,
                     moved: tuple[rules.Move, ...]) -> tuple[Candidate, ...]:
    """The input layout, then the same tiling in the other class (bytes unchanged: nothing here is AMP-aligned)."""
    facts = context.facts
    values = facts.plan.values
    layout = values[members[0]].parsed_layout
    layouts = (layout,) * len(members)
    sizes = tuple(facts.estimate.values[m] for m in members)
    exchange = rules.exchange_cost(facts, members, moved, layouts)
    other = next(c for c in MEMORY_CLASSES if c != layout.memory_class)
    flipped = (replace(layout, memory_class=other),) * len(members)
    return Candidate(layouts, sizes, exchange), Candidate(flipped, sizes, exchange, label=f"class {other}")


def class_level(context: rules.Context, groups: tuple[rules.LayoutGroup, ...]) -> Decisions:
    """A free group of two candidates (its class, the other) for each group only kernels hold.

    Groups alike (`rules.group_key`) share their candidates: they hold no step numbers.
    """
    touched = gemm_touched(context)
    facts = context.facts
    free, cache = [], {}
    for members in groups:
        reason = rules.freeze_reason(context, members)
        if reason is None or reason.kind not in MOVABLE_CLASS or touched.intersection(members):
            continue
        if any(m in facts.amp_aligned for m in members):
            continue
        moved = rules.moved_tensors(facts, members)
        key = rules.group_key(facts, members, moved)
        if key not in cache:
            cache[key] = class_candidates(context, members, moved)
        free.append(FreeGroup(members, cache[key], input_index=0, kind="class"))
    return Decisions(free=tuple(free))
