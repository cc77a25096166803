"""Freedom level `gather` (scope `program` only, opt-in): a program parameter that kernels read whole is stored
sharded, like a storage value, and gathered into the layout its kernel reads by a `Copy` inserted right before each
step that may read it (REPLAN.md, "Optional scope `program`").

A group qualifies when only kernels hold it (it would otherwise be left to the classes level), no step writes it (a
parameter), it is not AMP-aligned and no Gemm touches it, every kernel that reads or may read it is known, its
storage is live before each such step (where the inserted `Copy` reads it), and each such step has no scratch of
its own (the model counts a gathered copy as the reading step's extra bytes). Its
candidates: the input layout and its other class, as the classes level offers, then every storage layout
(`storage.retiled_options`) with a gathered copy at each reading step. The copy is live at its inserted step and at
the reading step only; the inserted step holds the reading step's live set less that step's results, so its row
never exceeds the reading step's and needs no row of its own.
"""

from __future__ import annotations

from functools import lru_cache

from ipuplan.facts.estimate import value_bytes
from ipuplan.facts.plan_exchange import step_bytes
from ipuplan.plan.layout import Layout
from ipuplan.plan.operation import parse_operation
from ipuplan.space import rules
from ipuplan.space.levels.classes import class_candidates, gemm_touched
from ipuplan.space.levels.storage import retiled_options
from ipuplan.space.types import Candidate, Decisions, FreeGroup, Freeze, Gather

KIND = "gather"
GATHER_OPERATION = "Copy { mapping: CoordinateMapping { offsets: [], view: None }, reuse_local: true }"
"""The inserted step's operation: the form of the plan's own whole-tensor `Copy` steps."""
GATHERED_FROM = frozenset({Freeze.READ_BY_KERNEL, Freeze.UNSHOWN_READ})
"""Groups held only by kernels that read them (seen or possible) may be gathered."""


def reading_steps(context: rules.Context, members: rules.LayoutGroup) -> tuple[int, ...]:
    """The kernels that read the group or may read it (a loop body's operand that stays live past its kernel)."""
    flow = context.facts.flow
    steps = {s for m in members for s in (*flow.readers.get(m, ()), *context.unshown_readers.get(m, ()))}
    return tuple(sorted(s for s in steps if s not in context.movers))


def read_member(context: rules.Context, members: rules.LayoutGroup, step: int) -> int | None:
    """The position of the member `step` reads: inside a loop body its body argument, else the one member live
    there; None when that is not one value."""
    plan, bindings = context.facts.plan, context.facts.flow.bindings
    if plan.steps[step].execution_count > 1:
        arguments = [p for p, m in enumerate(members) if m in bindings]
        if len(arguments) == 1:
            return arguments[0]
    live = set(plan.steps[step].live)
    held = [p for p, m in enumerate(members) if plan.values[m].root in live]
    return held[0] if len(held) == 1 else None


def gatherable(context: rules.Context, members: rules.LayoutGroup, touched: frozenset[int]) -> bool:
    """Whether the group is a parameter only kernels hold, each of its readers known and without scratch."""
    facts = context.facts
    reason = rules.freeze_reason(context, members)
    if reason is None or reason.kind not in GATHERED_FROM or touched.intersection(members):
        return False
    if any(m in facts.amp_aligned or facts.flow.writers.get(m) for m in members):
        return False
    steps = reading_steps(context, members)
    return bool(steps) and all(_scratch_free(facts.plan.steps[s]) and _held_before(context, members, s)
                               for s in steps)


def _held_before(context: rules.Context, members: rules.LayoutGroup, step: int) -> bool:
    """Whether the member `step` reads is known and its storage already held before it (the inserted `Copy` reads
    it there: a program input arriving at its reader has nothing to gather from)."""
    position = read_member(context, members, step)
    if position is None:
        return False
    root = context.facts.plan.values[members[position]].root
    return 0 <= context.facts.live.first[root] < step


def _scratch_free(step) -> bool:
    return step.scratch.standard == 0 and step.scratch.interleaved == 0


@lru_cache(maxsize=4096)
def gather_exchange(shape: tuple[int, ...], element_size: int, stored: Layout, needed: Layout) -> int | None:
    """Bytes the inserted `Copy` sends from the stored layout to the needed one (None: it cannot be priced)."""
    sent = step_bytes(parse_operation(GATHER_OPERATION), shape, shape, element_size, stored, needed)
    return None if isinstance(sent, str) else sent


def gathered_candidates(context: rules.Context, members: rules.LayoutGroup) -> tuple[Candidate, ...]:
    """The input layout and its other class (no copy), then each storage layout with a copy at every reading step."""
    facts = context.facts
    values = facts.plan.values
    base = values[members[0]]
    layout, shape = base.parsed_layout, tuple(base.shape)
    steps = reading_steps(context, members)
    scratch = tuple((s, 0, 0) for s in steps)  # the reading steps' own scratch, none
    moved = rules.moved_tensors(facts, members)
    kept = tuple(c.with_scratch(scratch) for c in class_candidates(context, members, moved))
    found = []
    for option in retiled_options(layout, shape, base.element_size, facts.plan.tile_count):
        sent = gather_exchange(shape, base.element_size, option, layout)
        if sent is None:
            continue
        gathers = tuple(Gather(s, read_member(context, members, s), layout,
                               value_bytes(values[members[0]], False, layout), sent) for s in steps)
        sizes, layouts = tuple(value_bytes(values[m], False, option) for m in members), (option,) * len(members)
        found.append(Candidate(layouts, sizes, rules.exchange_cost(facts, members, moved, layouts) + sent * len(steps),
                               scratch,
                               label=f"gathered at step{'s' if len(steps) > 1 else ''} {', '.join(map(str, steps))}",
                               gathers=gathers))
    return (*kept, *found)


def gather_level(context: rules.Context, groups: tuple[rules.LayoutGroup, ...]) -> Decisions:
    """A free group, gathered or kept whole, for each parameter only kernels hold."""
    touched = gemm_touched(context)
    free = [FreeGroup(members, gathered_candidates(context, members), input_index=0, kind=KIND)
            for members in groups if gatherable(context, members, touched)]
    return Decisions(free=tuple(free))
