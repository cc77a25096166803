"""The output contract of REPLAN.md ("What the output must satisfy"), checked from outside the optimiser: every way a
rewritten plan breaks it relative to the plan it was made from (`ipuplan check NEW --against ORIG`).

Four rules, each its own lines, in this order: `structure` (the same keys, values and steps, with what they keep),
`insertion` (the gathers only scope `program` may insert, written exactly as REPLAN.md's "Optional scope
`program`" says), `scope` (what the scope's freedom levels allow, judged against the input: no value the scope holds
changed its layout or class; a free group changed only as its level allows: a class-level value only its class, a
Gemm family or attention product exactly as the split its output shows derives from the input, an element-wise family
as one unit with its orders, padding rules and classes kept, a gathered parameter only with a gather before every
step that may read it; a Gemm's operands and results keep their class; no operation text changes but a re-split
Gemm's inner_block and output_columns; scratch stays in its class), `check` (the plan agrees with its own estimate
and the layout rules one plan shows, `facts.check`). A plan that is no rewrite of the other at all gives one line per
problem, never a traceback: a compiler engineer reads these lines, not the optimiser's.

The levels are read from the candidate space of the input in the scope (`space.scopes.candidate_space`), so a
rule is as wide as its level's module says: where REPLAN.md's words are wider (level 3 frees "every value's" class;
level 4 "block sizes the format allows"), a rewrite the optimiser could not make is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from operator import attrgetter

from ipuplan.facts.attention_families import AttentionFamily, current_head_split, derive_attention
from ipuplan.facts.check import check, most_common
from ipuplan.facts.dataflow import BODY_ARGUMENT, is_body_argument
from ipuplan.facts.elementwise_families import ElementwiseFamily, Role, broadcast_problem, dimension_tiling
from ipuplan.facts.gemm_families import DerivedSplit, IllegalSplit, KernelFamily, current_split, derive
from ipuplan.facts.plan_facts import PlanFacts, plan_facts
from ipuplan.plan.debug_syntax import format_term
from ipuplan.plan.format import Plan, Step, Value
from ipuplan.plan.layout import Layout, format_layout
from ipuplan.plan.operation import parse_operation
from ipuplan.space.levels.attention import KIND as ATTENTION_KIND
from ipuplan.space.levels.elementwise import KIND as ELEMENTWISE_KIND
from ipuplan.space.levels.gather import KIND as GATHER_KIND
from ipuplan.space.levels.gemm import KIND as GEMM_KIND
from ipuplan.space.scopes import Scope, candidate_space, scope_named
from ipuplan.space.types import CandidateSpace, FreeGroup

PROGRAM = Scope.PROGRAM.value
"""The opt-in scope that may insert gathers (REPLAN.md, "Optional scope `program`")."""

GATHER_OPERATION = "Copy { mapping: CoordinateMapping { offsets: [], view: None }, reuse_local: true }"
"""The text of an inserted step: the form of the plan's own whole-tensor `Copy` steps. Restated from REPLAN.md,
not imported from the optimiser's `space.levels.gather`: this check must not share the writer's mistakes."""

KEPT_PLAN_FIELDS = ("version", "scope", "model", "tile_count", "gemm_output_packing", "attention_products")
"""Top-level fields no rewrite touches (budgets may be overridden, the derived fields are recomputed)."""

KEPT_VALUE_FIELDS = ("id", "origin", "root", "name", "group", "storage_group", "precision", "copies")
"""What every original value keeps (REPLAN.md, "What the output must satisfy"); restated here, not imported from the
optimiser's `replan.rewrite`, which runs this check on its own output."""

KEPT_STEP_FIELDS = ("source", "execution_count")
"""Kept by every original step; its index may move past inserted steps and its live set gain gathered values."""

_kept_value_fields, _kept_step_fields = attrgetter(*KEPT_VALUE_FIELDS), attrgetter(*KEPT_STEP_FIELDS)
"""The kept fields at once (in C): most of a rewrite's values and steps keep them all, and are not compared field by
field."""

BornAt = tuple[tuple[int, ...], ...]
"""Per step, the values first live there (`Liveness.born_at`)."""

STORAGE_KIND, CLASS_KIND = "storage", "class"
"""The kinds of the free groups the storage and classes levels make (`FreeGroup.kind`)."""
ROW_MAJOR = frozenset({"RowMajor"})
"""The order whose text holds no block size: an element-wise family all of it may take smaller blocks."""

GATHERED_VALUE_FIELDS = ("origin", "shape", "precision", "storage_group", "layout", "memory_class", "copies")
"""What a gathered value takes from its parameter in the original plan: the layout is the one its reader needs."""


@dataclass(frozen=True)
class Alignment:
    """Which steps and values of the rewritten plan are the original ones, and which were inserted."""

    inserted_values: tuple[int, ...]
    """Ids of the rewritten plan past the original values."""
    first_live: dict[int, int]
    """Per inserted value that is live, the first step that holds it."""
    inserted_steps: dict[int, tuple[int, ...]]
    """Per inserted step, in order, the inserted values first live there: the steps where one is first live, when
    they are as many as the steps the plan has beyond the original's (else none)."""
    new_index: tuple[int, ...] | None
    """Per original step, its index in the rewritten plan: the rewritten plan's steps but the inserted ones, in
    order. None when their number is not the original's (then no step is compared with another)."""

    @property
    def misplaced(self) -> dict[int, tuple[int, ...]]:
        """Per step that is not inserted, the inserted values first live there."""
        found: dict[int, tuple[int, ...]] = {}
        for value, position in self.first_live.items():
            if position not in self.inserted_steps:
                found[position] = (*found.get(position, ()), value)
        return found


@dataclass(frozen=True)
class Gather:
    """One inserted step: the value it writes and the original step that reads it (`reading`: its new index)."""

    step: int
    value: int
    reading: int
    original_reading: int
    parameter: int | None
    """The original value it gathers; None when none fits."""
    live_steps: tuple[int, ...]
    """Where the rewritten plan holds its value."""


def against(before: Plan, after: Plan, scope: str = "full", *, after_facts: PlanFacts | None = None,
            before_facts: PlanFacts | None = None, space: CandidateSpace | None = None) -> list[str]:
    """Every way `after` breaks the output contract relative to `before`, its input, in scope `scope`.

    One line per violation, naming the rule first (`structure`, `insertion`, `scope`, `check`), then the value id
    or step index, and what is wrong; the lines come in that rule order. Empty when `after` is a legal rewrite of
    `before` in `scope` (`storage`, `kernels`, `full` or `program`: only `program` may insert gathers). Raises
    UnknownScope (exit 2) for any other scope. `after_facts`, `before_facts`: the plans' facts, and `space`: the
    candidate space of `before` in `scope`, when the caller has them already (the optimiser re-checking its own
    output); a space with more frozen (pins, `keep_classes`) holds the rewrite to it.
    """
    return [*rewrite_violations(before, after, scope, before_facts=before_facts, space=space),
            *check_violations(after, after_facts)]


def rewrite_violations(before: Plan, after: Plan, scope: str = "full", *, before_facts: PlanFacts | None = None,
                       space: CandidateSpace | None = None) -> list[str]:
    """`against`'s rules that compare `after` with `before` (`structure`, `insertion`, `scope`), in that order."""
    scope = scope_named(scope).value
    facts = before_facts or plan_facts(before)
    space = space or candidate_space(facts, scope)
    aligned = alignment(before, after)
    gathers = gathers_of(before, after, aligned) if scope == PROGRAM else ()
    born_at = facts.live.born_at
    return [
        *(f"structure: {line}" for line in structure_violations(before, after, aligned, born_at)),
        *(f"insertion: {line}" for line in insertion_violations(before, after, aligned, gathers, scope, born_at)),
        *(f"scope: {line}" for line in scope_violations(facts, after, scope, gathers, space, aligned)),
    ]


def check_violations(after: Plan, after_facts: PlanFacts | None = None) -> list[str]:
    """`against`'s last rule: `after` alone passes `check`."""
    return [f"check: {mismatch}" for mismatch in check(after, after_facts)]


def alignment(before: Plan, after: Plan) -> Alignment:
    """The rewritten plan's steps matched to the original ones: every step but the inserted, in order. A step is
    inserted where an inserted value is first live, when those steps are exactly the ones the plan has in excess."""
    count = len(before.values)
    first_live: dict[int, int] = {}
    for position, step in enumerate(after.steps):
        if max(step.live, default=-1) < count:  # in C: most steps hold no inserted value
            continue
        for value in step.live:
            if value >= count:
                first_live.setdefault(value, position)
    born: dict[int, tuple[int, ...]] = {}
    for value, position in sorted(first_live.items()):
        born[position] = (*born.get(position, ()), value)
    inserted = dict(sorted(born.items())) if len(born) == len(after.steps) - len(before.steps) else {}
    kept = tuple(position for position in range(len(after.steps)) if position not in inserted)
    return Alignment(tuple(range(count, len(after.values))), first_live, inserted,
                     kept if len(kept) == len(before.steps) else None)


def structure_violations(before: Plan, after: Plan, aligned: Alignment, born_at: BornAt) -> list[str]:
    """Rule 1: the same top-level keys, values and steps, each with what the contract keeps."""
    return [*plan_violations(before, after), *value_violations(before, after, born_at),
            *step_violations(before, after, aligned)]


def plan_violations(before: Plan, after: Plan) -> list[str]:
    """The top level: its keys in their order, and the fields that name the program rather than its layouts."""
    found = []
    keys_before, keys_after = list(before.model_extra or {}), list(after.model_extra or {})
    if keys_before != keys_after:
        found.append(f"plan: top-level keys differ (unknown keys {keys_before} in the original, {keys_after} here)")
    found += [f"plan: {field} {_change(getattr(before, field), getattr(after, field))}"
              for field in KEPT_PLAN_FIELDS if getattr(before, field) != getattr(after, field)]
    if before.peak.exchange_rows != after.peak.exchange_rows:
        found.append(f"plan: peak.exchange_rows {_change(before.peak.exchange_rows, after.peak.exchange_rows)}")
    return found


def value_violations(before: Plan, after: Plan, born_at: BornAt) -> list[str]:
    """Every original value still there, with its identity kept; its shape too, but a Gemm's partials' pK."""
    found = []
    if len(after.values) < len(before.values):
        found.append(f"values: {len(after.values)} where the original has {len(before.values)}: "
                     f"{_named('value', range(len(after.values), len(before.values)))} missing")
    partials = {v for step in before.steps if step.parsed_operation.kind == "Gemm" for v in born_at[step.index]}
    # a value the rewrite left alone is the very same object: nothing of it can have changed
    for old, new in ((a, b) for a, b in zip(before.values, after.values) if a is not b):
        if _kept_value_fields(old) != _kept_value_fields(new):
            found += [f"value {old.id}: {field} {_change(getattr(old, field), getattr(new, field))}"
                      for field in KEPT_VALUE_FIELDS if getattr(old, field) != getattr(new, field)]
        if old.shape != new.shape and not (old.id in partials and old.shape[1:] == new.shape[1:]):
            found.append(f"value {old.id}: shape {_change(old.shape, new.shape)} (only a Gemm's partials may change, "
                         "and only their leading pK)")
    return found


def step_violations(before: Plan, after: Plan, aligned: Alignment) -> list[str]:
    """Every original step still there, in order, keeping its source, count, operation kind and live set."""
    found = [f"step {position}: index is {step.index}, expected its position {position}"
             for position, step in enumerate(after.steps) if step.index != position]
    if aligned.new_index is None:
        born = sorted(set(aligned.first_live.values()))
        besides = f", an inserted value first live at {_named('step', born)}" if born else ""
        found.append(f"steps: {len(after.steps)} where the original has {len(before.steps)}{besides}: no step can "
                     "be matched to its original (only the steps of gathers may be inserted)")
        return found
    count = len(before.values)
    for old, position in zip(before.steps, aligned.new_index):
        new = after.steps[position]
        if old is new:
            continue
        where = f"step {position}" + (f" (step {old.index} of the original)" if position != old.index else "")
        if _kept_step_fields(old) != _kept_step_fields(new):
            found += [f"{where}: {field} {_change(getattr(old, field), getattr(new, field))}"
                      for field in KEPT_STEP_FIELDS if getattr(old, field) != getattr(new, field)]
        kinds = old.operation != new.operation and (old.parsed_operation.kind, new.parsed_operation.kind)
        if kinds and kinds[0] != kinds[1]:  # one text is one kind: only a changed text is parsed
            found.append(f"{where}: operation kind {_change(*kinds)}")
        kept_live = new.live if max(new.live, default=-1) < count else [value for value in new.live if value < count]
        if kept_live != old.live:
            found.append(f"{where}: live set changed ({_live_difference(kept_live, old.live)})")
    return found


def gathers_of(before: Plan, after: Plan, aligned: Alignment) -> tuple[Gather, ...]:
    """Each inserted step as a gather: its value, the original step after it (which reads the value), the
    parameter it gathers, and where the value is live. None at all when the steps do not align (rule 1 says why)."""
    if aligned.new_index is None:
        return ()
    original_at = {position: original for original, position in enumerate(aligned.new_index)}
    live_steps = _live_steps(after, {values[0] for values in aligned.inserted_steps.values()})
    arguments: dict[int, list[int]] = {}
    for value in before.values:
        if is_body_argument(value):
            arguments.setdefault(value.storage_group, []).append(value.id)
    gathers = []
    for position, values in aligned.inserted_steps.items():
        reading = next((p for p in range(position + 1, len(after.steps)) if p in original_at), None)
        if reading is None:
            continue  # insertion_violations names it: nothing reads what it gathers
        original = original_at[reading]
        parameter = parameter_of(before, after.values[values[0]], before.steps[original], reading, arguments)
        gathers.append(Gather(position, values[0], reading, original, parameter, live_steps[values[0]]))
    return tuple(gathers)


def _live_steps(plan: Plan, values: set[int]) -> dict[int, tuple[int, ...]]:
    """Per value of `values`, the positions of the steps that hold it."""
    found: dict[int, list[int]] = {value: [] for value in values}
    for position, step in enumerate(plan.steps):
        for value in values.intersection(step.live):
            found[value].append(position)
    return {value: tuple(positions) for value, positions in found.items()}


def parameter_of(before: Plan, value: Value, reading: Step, reading_index: int,
                 arguments: dict[int, list[int]]) -> int | None:
    """The original value `value` gathers for `reading`: inside a loop body the body argument of its storage group
    (`arguments`: the body arguments per storage group; one stands for every layer), else the value of that group
    the reading step holds (the one whose name gives `value`'s, when several do). None when there is none."""
    candidates = arguments.get(value.storage_group, []) if reading.execution_count > 1 else []
    if not candidates:
        candidates = [v for v in reading.live if before.values[v].storage_group == value.storage_group]
    named = (p for p in candidates if gathered_name(before.values[p], reading.source, reading_index) == value.name)
    return next(named, candidates[0] if candidates else None)


def gathered_name(parameter: Value, source: int, reading_index: int) -> str:
    """The name of the value that gathers `parameter` for the step now at `reading_index` (of `source`)."""
    return f"operation {source} gather of {parameter.name.removesuffix(BODY_ARGUMENT)} for step {reading_index}"


def insertion_violations(before: Plan, after: Plan, aligned: Alignment, gathers: tuple[Gather, ...], scope: str,
                         born_at: BornAt) -> list[str]:
    """Rule 2: outside scope `program` nothing is inserted; in it, every inserted step and value is a gather
    written as REPLAN.md says."""
    if scope != PROGRAM:
        return _extras(aligned, scope)
    found = [f"value {position}: id is {value.id}, an inserted value is appended in id order"
             for position, value in enumerate(after.values[len(before.values):], len(before.values))
             if value.id != position]
    never_live = [value for value in aligned.inserted_values if value not in aligned.first_live]
    if never_live:
        found.append(f"{_named('value', never_live)}: inserted but never live (a gathered value is live from its "
                     "gather through its reading step)")
    found += [f"step {position}: {len(values)} inserted values first live here ({_ids(values)}): a gather writes one"
              for position, values in aligned.inserted_steps.items() if len(values) > 1]
    if aligned.new_index is not None:
        found += [f"step {position}: {_named('value', values)} first live here, an original step (a gathered value "
                  "is first live at its own inserted Copy)" for position, values in aligned.misplaced.items()]
        read = {gather.step for gather in gathers}
        found += [f"step {position}: inserted after the last original step: no step reads what it gathers"
                  for position in aligned.inserted_steps if position not in read]
    for same in _by_reading_step(gathers).values():
        held = held_before_reading(before, same, born_at)
        for earlier, gather in enumerate(same):
            found += gather_step_violations(before, after, gather, [*held, *(g.value for g in same[:earlier + 1])])
            found += gathered_value_violations(before, after, gather)
        found += reading_step_violations(before, after, same)
    return found


def _extras(aligned: Alignment, scope: str) -> list[str]:
    """Rule 2 outside scope `program`: any inserted value or step is one too many."""
    found = []
    if aligned.inserted_values:
        found.append(f"{_named('value', aligned.inserted_values)}: inserted, where scope {scope} inserts none "
                     "(only scope program may)")
    if aligned.inserted_steps:
        found.append(f"{_named('step', list(aligned.inserted_steps))}: inserted (an inserted value is first live "
                     f"there), where scope {scope} inserts none (only scope program may)")
    return found


def _by_reading_step(gathers: tuple[Gather, ...]) -> dict[int, list[Gather]]:
    """The gathers per reading step, in step order (several for one step follow each other)."""
    found: dict[int, list[Gather]] = {}
    for gather in gathers:
        found.setdefault(gather.reading, []).append(gather)
    return found


def held_before_reading(before: Plan, gathers: list[Gather], born_at: BornAt) -> list[int]:
    """What the original plan holds before the reading step of `gathers` runs: its live set less the values first
    live there (its results), but the gathered parameters' storage (the gathers read it, even where it arrives)."""
    reading = gathers[0].original_reading
    read = {before.values[gather.parameter].root for gather in gathers if gather.parameter is not None}
    written = set(born_at[reading]).difference(read)
    return [value for value in before.steps[reading].live if value not in written]


def gather_step_violations(before: Plan, after: Plan, gather: Gather, expected_live: list[int]) -> list[str]:
    """An inserted step: the plan's whole-tensor Copy, its reading step's source and count, no scratch, and live
    `expected_live`: what the reading step holds before it runs, the earlier gathers' values for it and its own."""
    step, reading = after.steps[gather.step], before.steps[gather.original_reading]
    where = f"step {gather.step} (gather of value {gather.value})"
    found = []
    if step.operation != GATHER_OPERATION:
        found.append(f"{where}: operation is {step.operation!r}, a gather is {GATHER_OPERATION!r}")
    found += [f"{where}: {field} is {getattr(step, field)}, expected {getattr(reading, field)} (its reading step "
              f"{gather.reading}'s)" for field in KEPT_STEP_FIELDS if getattr(step, field) != getattr(reading, field)]
    if step.scratch.standard or step.scratch.interleaved:
        found.append(f"{where}: scratch is {step.scratch.standard} standard, {step.scratch.interleaved} interleaved; "
                     "a gather has none")
    if step.live != expected_live:
        found.append(f"{where}: live set is not step {gather.reading}'s original one without what that step writes, "
                     f"with the values gathered for it so far ({_live_difference(step.live, expected_live)})")
    return found


def gathered_value_violations(before: Plan, after: Plan, gather: Gather) -> list[str]:
    """A gathered value: its own root, its name and group after the parameter and reading step, the rest of it the
    parameter's in the original plan, and live from its gather through its reading step only."""
    value = after.values[gather.value]
    where = f"value {value.id}"
    steps = list(range(gather.step, gather.reading + 1))
    found = []
    if list(gather.live_steps) != steps:
        found.append(f"{where}: live at {_named('step', gather.live_steps) if gather.live_steps else 'no step'}, "
                     f"expected {_named('step', steps)} (its gather through its reading step)")
    if gather.parameter is None:
        found.append(f"{where}: gathers nothing: the original plan holds no value of storage group "
                     f"{value.storage_group} at step {gather.original_reading}, which reads it")
        return found
    parameter = before.values[gather.parameter]
    name = gathered_name(parameter, before.steps[gather.original_reading].source, gather.reading)
    if value.root != value.id:
        found.append(f"{where}: root is {value.root}, a gathered value is its own root")
    found += [f"{where}: {field} is {getattr(value, field)!r}, expected {name!r}"
              for field in ("name", "group") if getattr(value, field) != name]
    found += [f"{where}: {_label(field)} {_against(getattr(value, field), getattr(parameter, field))}, as the "
              f"original value {parameter.id} it gathers" for field in GATHERED_VALUE_FIELDS
              if getattr(value, field) != getattr(parameter, field)]
    return found


def reading_step_violations(before: Plan, after: Plan, gathers: list[Gather]) -> list[str]:
    """A reading step holds what it held, then every value gathered for it, in their order."""
    first = gathers[0]
    expected = before.steps[first.original_reading].live + [gather.value for gather in gathers]
    live = after.steps[first.reading].live
    if live == expected:
        return []
    return [(f"step {first.reading}: live set is not its original one with the values gathered for it appended "
             f"({_live_difference(live, expected)})")]


@dataclass
class Findings:
    """What rule 3 found: lines per value and per step (each in the rewritten plan's numbering), and the Gemm steps
    (the original's numbering) whose operation a free family's split rewrites, which that family has checked."""

    values: dict[int, str] = field(default_factory=dict)
    steps: dict[int, str] = field(default_factory=dict)
    owned: set[int] = field(default_factory=set)

    def about(self, values, step: int | None) -> bool:
        """Whether a line names one of `values`, or `step`."""
        return any(v in self.values for v in values) or (step is not None and step in self.steps)

    def value(self, value: int, line: str) -> None:
        self.values.setdefault(value, line)  # the first rule a value breaks says enough

    def step(self, step: int, line: str) -> None:
        self.steps.setdefault(step, line)


def scope_violations(facts: PlanFacts, after: Plan, scope: str, gathers: tuple[Gather, ...], space: CandidateSpace,
                     aligned: Alignment) -> list[str]:
    """Rule 3: what the scope holds keeps its layout and class (in scope `program` a gathered parameter, with the
    values bound to it, may change: its gathers give its readers the layout they need); a Gemm's operands and
    results keep their class; a free group changes only as its level allows; an operation changes only where a
    kernel family's split rewrites it, and a step's scratch only with what it writes, in its class. One line per
    value, then per step, in order: the first rule it breaks."""
    found = Findings()
    for member, line in gathered_violations(facts.plan, gathers, space):
        found.value(member, line)
    for member, line in frozen_violations(facts, after, scope, gathers, space):
        found.value(member, line)
    for member, line in gemm_class_violations(facts, after):
        found.value(member, line)
    new_index, index = aligned.new_index, FamilyIndex(facts)
    for group in space.free:
        free_group_violations(index, after, group, gathers, new_index, found)
    if new_index is not None:  # else rule 1 says no step can be compared with its original
        operation_violations(facts.plan, after, scope, new_index, found)
        scratch_violations(facts, after, new_index, found)
    return [*(line for _, line in sorted(found.values.items())), *(line for _, line in sorted(found.steps.items()))]


def gathered_violations(before: Plan, gathers: tuple[Gather, ...], space: CandidateSpace) -> list[tuple[int, str]]:
    """(parameter, line) for every gather of a parameter the scope's gather level does not free (REPLAN.md: a
    parameter only kernels read, no Gemm touching it, its storage held before each reader)."""
    if not gathers:
        return []
    frozen = {m: group.reason for group in space.frozen for m in group.members}
    kinds = {m: group.kind for group in space.free for m in group.members}
    found = []
    for gather in (g for g in gathers if g.parameter is not None and kinds.get(g.parameter) != GATHER_KIND):
        p = gather.parameter
        why = f"frozen, {frozen[p]}" if p in frozen else f"a {kinds.get(p, 'undecided')} group"
        found.append((p, (f"value {p} ({before.values[p].name}): gathered at step {gather.step}, where scope program "
                         f"gathers only a parameter only kernels read, no Gemm touching it ({why})")))
    return found


def frozen_violations(facts: PlanFacts, after: Plan, scope: str, gathers: tuple[Gather, ...],
                      space: CandidateSpace) -> list[tuple[int, str]]:
    """(value, line) for every member of a frozen group whose layout or class changed."""
    gathered = {gather.parameter for gather in gathers}
    before, found = facts.plan, []
    for group in space.frozen:
        if gathered.intersection(group.members):
            continue
        for member in _changed(before, after, group.members, shapes=False):
            old, new = before.values[member], after.values[member]
            classes = "" if old.memory_class == new.memory_class else \
                f" (class {_change(old.memory_class, new.memory_class)})"
            found.append((member, (f"value {member} ({old.name}): layout changed where scope {scope} does not allow "
                                  f"it{classes}: frozen, {group.reason}")))
    return found


def gemm_class_violations(facts: PlanFacts, after: Plan) -> list[tuple[int, str]]:
    """(value, line) for every operand or result of a Gemm whose class changed (REPLAN.md level 3: the kernel variant
    expects them where they are), whatever the scope."""
    before, found = facts.plan, []
    for step in before.steps:
        if step.parsed_operation.kind != "Gemm":
            continue
        flow = facts.flow.steps[step.index]
        for value in _changed(before, after, (*flow.reads, *flow.writes), shapes=False):
            old, new = before.values[value].memory_class, after.values[value].memory_class
            if old != new:
                found.append((value, (f"value {value} ({before.values[value].name}): class {_change(old, new)}: an "
                                     f"operand or result of the Gemm at step {step.index} keeps its class")))
    return found


def _changed(before: Plan, after: Plan, members, shapes: bool = True) -> list[int]:
    """The members whose layout or class (and, with `shapes`, shape) differ; a value the rewrite left alone is the
    very same object."""
    olds, news = before.values, after.values  # properties: read once, not per member
    count, found = len(news), []
    for m in members:
        old = olds[m]
        new = news[m] if m < count else old
        if old is not new and (old.layout != new.layout or old.memory_class != new.memory_class
                               or (shapes and old.shape != new.shape)):
            found.append(m)
    return found


class FamilyIndex:
    """The input's families by their members, each index built on first use: a scan of every family per free group is
    quadratic in a large plan."""

    def __init__(self, facts: PlanFacts) -> None:
        self.facts = facts
        self.consistent: set[tuple] = set()
        """`_family_content` of the families found laid out as their split derives."""

    @cached_property
    def by_left(self) -> dict[str, dict[int, KernelFamily | AttentionFamily]]:
        """Per kernel level's kind, its families by their left operand (the first family of the facts' order)."""
        found: dict[str, dict[int, KernelFamily | AttentionFamily]] = {GEMM_KIND: {}, ATTENTION_KIND: {}}
        for kind, families in ((GEMM_KIND, self.facts.families), (ATTENTION_KIND, self.facts.attention)):
            for family in families:
                found[kind].setdefault(family.left, family)
        return found

    @cached_property
    def elementwise(self) -> dict[int, ElementwiseFamily]:
        """Element-wise families by each member."""
        return {m: family for family in reversed(self.facts.elementwise) for m in family.members}

    @cached_property
    def possible_readers(self) -> dict[int, set[int]]:
        """Per value, the element-wise kernels that may read it although the dataflow does not show it."""
        found: dict[int, set[int]] = {}
        for family in self.facts.elementwise:
            for kernel in family.kernels:
                for value in kernel.possible:
                    found.setdefault(value, set()).add(kernel.step)
        return found

    def family_of(self, group: FreeGroup) -> KernelFamily | AttentionFamily | None:
        """The Gemm family or attention product a free group of a kernel level re-splits: the first (in the facts'
        order) whose left operand is a member."""
        by_left = self.by_left[group.kind]
        found = [by_left[m] for m in group.members if m in by_left]
        families = self.facts.families if group.kind == GEMM_KIND else self.facts.attention
        order = {id(family): position for position, family in enumerate(families)} if len(found) > 1 else {}
        return min(found, key=lambda family: order.get(id(family), 0), default=None)


def free_group_violations(index: FamilyIndex, after: Plan, group: FreeGroup, gathers: tuple[Gather, ...],
                          new_index: tuple[int, ...] | None, found: Findings) -> None:
    """Every member of a free group changed beyond what its level allows (REPLAN.md's freedom levels): a storage value
    takes any layout the format allows, a class-level value only another class, the rest as below."""
    facts = index.facts
    if group.kind in (GEMM_KIND, ATTENTION_KIND):
        family_violations(index, after, group, new_index, found)
        return
    changed = _changed(facts.plan, after, group.members)
    if not changed or group.kind == STORAGE_KIND:
        return
    if group.kind == ELEMENTWISE_KIND:
        lines = elementwise_violations(index, after, group, changed)
    elif group.kind == GATHER_KIND:
        lines = gather_violations(index, after, group, gathers, changed)
    elif group.kind == CLASS_KIND:
        lines = class_only_violations(facts.plan, after, changed, "the classes level changes only its memory class")
    else:
        lines = []  # a level this check does not know (a test's stub level): nothing to say of it
    for member, line in lines:
        found.value(member, line)


def class_only_violations(before: Plan, after: Plan, changed: list[int], why: str) -> list[tuple[int, str]]:
    """(value, line) for every changed member whose layout differs otherwise than in its memory class."""
    found = []
    for m in changed:
        old, new = before.values[m].parsed_layout, after.values[m].parsed_layout
        if replace(new, memory_class=old.memory_class) != old:
            found.append((m, f"value {m} ({before.values[m].name}): tiling or order changed where {why}"))
    return found


def family_violations(index: FamilyIndex, after: Plan, group: FreeGroup, new_index: tuple[int, ...] | None,
                      found: Findings) -> None:
    """A Gemm family or attention product re-split: every member laid out, and the Gemm's operation written, as the
    split the rewrite's partials show derives them from the input (REPLAN.md level 2: only the split's numbers, the
    K block and the columns per shard change; class, order kind, padding and the other fields are the input's)."""
    family = index.family_of(group)
    if family is None:
        return
    before = index.facts.plan
    gemm = family.gemm_step
    found.owned.add(gemm)
    position = None if new_index is None else new_index[gemm]
    operation = None if position is None else after.steps[position].operation
    if not _changed(before, after, family.members) and operation in (None, before.steps[gemm].operation):
        return
    key = _family_content(before, after, family, operation)
    if key in index.consistent:
        return
    name = "Gemm family" if isinstance(family, KernelFamily) else "attention product"
    try:
        split, derived = _derived(before, after, family)
    except (IllegalSplit, IndexError, KeyError, ValueError) as problem:
        result = family.partials if isinstance(family, KernelFamily) else family.result
        found.value(result, f"value {result} ({before.values[result].name}): the {name} at step {gemm} is laid out "
                            f"in no split of it ({problem})")
        return
    for member, layout in derived.layouts.items():
        if after.values[member].layout != format_layout(layout):
            found.value(member, f"value {member} ({before.values[member].name}): not laid out as split {split} of the "
                                f"{name} at step {gemm} lays it out from the input (its class, order, padding and "
                                "untouched numbers kept)")
    if tuple(after.values[derived.result].shape) != derived.result_shape:
        found.value(derived.result, f"value {derived.result}: shape {after.values[derived.result].shape} where split "
                                    f"{split} of the {name} at step {gemm} gives {list(derived.result_shape)}")
    if position is not None and operation != derived.operation[1]:
        found.step(position, f"step {position}: operation {_operation_change(before.steps[gemm].operation, operation)}"
                             f": split {split} of the {name} rewrites only its inner_block and output_columns "
                             f"(expected {derived.operation[1]!r})")
    if not found.about(family.members, position):
        index.consistent.add(key)


def _family_content(before: Plan, after: Plan, family: KernelFamily | AttentionFamily, operation: str | None) -> tuple:
    """Everything `family_violations` reads of a family, by content rather than ids: its kind and axes, and per member
    (in role order) its layout and shape in both plans, with the Gemm's operation in both. The copies of an unrolled
    program, alike, are derived once."""
    members = family.members
    axes = ((family.left_axes, family.right_axes, family.partial_axes, family.sum_axes)
            if isinstance(family, KernelFamily) else family.roles)
    axes = tuple(tuple(sorted(a.items())) for a in axes) if isinstance(axes, tuple) else tuple(
        axes[m] for m in members)
    held = tuple((before.values[m].layout, tuple(before.values[m].shape), after.values[m].layout,
                  tuple(after.values[m].shape)) for m in members)
    return (type(family), axes, held, tuple(map(members.index, members)), before.steps[family.gemm_step].operation,
            operation)


def _derived(before: Plan, after: Plan, family: KernelFamily | AttentionFamily) -> tuple[object, DerivedSplit]:
    """The split the rewritten plan's partials (or scores) show, and what that split derives from the input."""
    if isinstance(family, KernelFamily):
        split = current_split(after, family)
        return split, derive(before, family, split)
    head_split = current_head_split(after, family)
    return head_split, derive_attention(before, family, head_split)


def _operation_change(old: str, new: str) -> str:
    """How an operation's text changed: the fields of one struct that differ, else the whole text."""
    a, b = parse_operation(old).struct, parse_operation(new).struct
    if a is None or b is None or a.name != b.name or [k for k, _ in a.fields] != [k for k, _ in b.fields]:
        return _change(old, new)
    fields = [(key, format_term(x), format_term(y)) for (key, x), (_, y) in zip(a.fields, b.fields) if x != y]
    return "; ".join(f"{key} changed from {x} to {y}" for key, x, y in fields) or _change(old, new)


def operation_violations(before: Plan, after: Plan, scope: str, new_index: tuple[int, ...], found: Findings) -> None:
    """Every original step keeps its operation's text, but a Gemm a free family re-splits (which that family checks):
    no freedom level rewrites any other operation."""
    for old, position in zip(before.steps, new_index):
        new = after.steps[position]
        if old is new or old.operation == new.operation or old.index in found.owned:
            continue
        why = ("only a Gemm family or attention product re-split by scope kernels or wider rewrites an operation, "
               "and only its inner_block and output_columns")
        found.step(position, f"step {position}: operation {_operation_change(old.operation, new.operation)} where "
                             f"scope {scope} allows no change ({why})")


def scratch_violations(facts: PlanFacts, after: Plan, new_index: tuple[int, ...], found: Findings) -> None:
    """Every original step's scratch stays in its class (REPLAN.md level 3), and changes only where a value it
    reads or writes changed its layout or shape (the scratch follows the shards it holds)."""
    before = facts.plan
    for old, position in zip(before.steps, new_index):
        new = after.steps[position]
        a, b = old.scratch, new.scratch
        if old is new or a is b or (a.standard, a.interleaved) == (b.standard, b.interleaved):
            continue
        classes = _scratch_classes(a), _scratch_classes(b)
        flow = facts.flow.steps[old.index]
        if classes[1] - classes[0]:
            found.step(position, f"step {position}: scratch {_scratch_text(b)} where the input has "
                                 f"{_scratch_text(a)}: a step's scratch stays in its class (none where it has none)")
        elif not _changed(before, after, (*flow.reads, *flow.writes)):
            found.step(position, f"step {position}: scratch {_scratch_text(b)} where the input has {_scratch_text(a)}, "
                                 "while nothing it reads or writes changed its layout (scratch follows the shards it "
                                 "holds)")


def _scratch_classes(scratch) -> set[str]:
    return {name for name in ("standard", "interleaved") if getattr(scratch, name)}


def _scratch_text(scratch) -> str:
    return f"{scratch.standard} standard, {scratch.interleaved} interleaved"


def elementwise_violations(index: FamilyIndex, after: Plan, group: FreeGroup,
                           changed: list[int]) -> list[tuple[int, str]]:
    """(value, line) for the members of an element-wise family re-tiled otherwise than REPLAN.md's level 4 allows,
    judged by the input's family (its roles: the rewritten plan's own recognition rests on the layouts it checks):
    orders, padding rules and classes kept, blocks kept but in an all-RowMajor family (a block dividing its own), every
    full-shape member tiled alike, each broadcast parameter cut and placed beside them, rows whole under a row
    reducer."""
    members, facts = set(group.members), index.facts
    family = next((index.elementwise[m] for m in group.members if m in index.elementwise), None)
    if family is None or not members.issuperset(family.members):
        return []
    before, kernel = facts.plan, family.kernels[0]
    why = f"the element-wise family of {kernel.operation} at step {kernel.step}"
    free_blocks = all(before.values[m].parsed_layout.order_kind in ROW_MAJOR for m in family.members)
    found = []
    for m in changed:
        problem = kept_parts_problem(before.values[m].parsed_layout, after.values[m].parsed_layout, free_blocks)
        if problem is not None:
            found.append((m, f"value {m} ({before.values[m].name}): {problem}, which {why} keeps"))
    return found + unit_violations(facts, after, family, why)


def kept_parts_problem(old: Layout, new: Layout, free_blocks: bool) -> str | None:
    """What an element-wise re-tiling changed that it keeps: the class, the order, the axes and their padding rules,
    and (unless `free_blocks`: a block dividing the input's) the block sizes."""
    if new.memory_class != old.memory_class:
        return f"class {_change(old.memory_class, new.memory_class)}"
    if new.order != old.order:
        return f"order {_change(format_term(old.order), format_term(new.order))}"
    if [a.axis for a in new.axes] != [a.axis for a in old.axes]:
        return "its tiled axes changed"
    for a, b in zip(old.axes, new.axes):
        if (a.padding, a.padding_groups, a.shard_padding_multiple) != (b.padding, b.padding_groups,
                                                                       b.shard_padding_multiple):
            return f"the padding rule of axis {a.axis.text} changed"
        if b.block_size != a.block_size and not (free_blocks and a.block_size % b.block_size == 0):
            return f"the block of axis {a.axis.text} {_change(a.block_size, b.block_size)}"
        multiple = b.block_size if a.padding_multiple == a.block_size else a.padding_multiple
        if b.padding_multiple != multiple:
            return f"the padding multiple of axis {a.axis.text} is {b.padding_multiple}, expected {multiple}"
    return None


def unit_violations(facts: PlanFacts, after: Plan, family: ElementwiseFamily, why: str) -> list[tuple[int, str]]:
    """(value, line) for a family's members, in the rewritten plan, not tiled as one unit: full-shape members tiled
    otherwise than most of them, parameters not beside them, rows split where the input kept them whole."""
    before, values = facts.plan, after.values
    full = sorted(m for m, role in family.roles.items() if role is not Role.PARAMETER)
    if not full:
        return []
    tilings = [dimension_tiling(tuple(values[m].shape), values[m].parsed_layout) for m in full]
    reference = values[most_common(full, tilings)]
    own = tilings[full.index(reference.id)]
    found = [(m, (f"value {m} ({before.values[m].name}): not tiled as value {reference.id}, where every full-shape "
                 f"member of {why} is tiled alike")) for m, tiling in zip(full, tilings) if tiling != own]
    for m in family.parameters:
        problem = broadcast_problem(tuple(values[m].shape), values[m].parsed_layout, tuple(reference.shape),
                                    reference.parsed_layout)
        if problem is not None:
            found.append((m, (f"value {m} ({before.values[m].name}): a broadcast parameter of {why} not beside value "
                             f"{reference.id}: {problem}")))
    if family.rows_whole:
        found += [(m, (f"value {m} ({before.values[m].name}): its rows split otherwise than the input's, where {why} "
                      "reduces over rows")) for m in full if _row_cuts(values[m]) != _row_cuts(before.values[m])]
    return found


def _row_cuts(value: Value) -> tuple[int, ...]:
    """The partitions of a value's axes over its last dimension or the flattened tensor: how its rows are cut."""
    rank = len(value.shape)
    return tuple(axis.partitions for axis in value.parsed_layout.axes
                 if axis.axis.dimension(rank) in (None, rank - 1))


def gather_violations(index: FamilyIndex, after: Plan, group: FreeGroup, gathers: tuple[Gather, ...],
                      changed: list[int]) -> list[tuple[int, str]]:
    """(value, line) for a parameter of the gather level (scope `program`) changed otherwise than REPLAN.md allows:
    kept whole, it may change only its class; stored otherwise, every step that reads it (or may: a loop body's
    parameter that stays live past its kernel) reads a copy gathered before it."""
    members, facts = set(group.members), index.facts
    gathered = {gather.original_reading for gather in gathers if gather.parameter in members}
    if not gathered:
        return class_only_violations(facts.plan, after, changed, "scope program stores a parameter otherwise only "
                                                                 "with a gather before every step that reads it")
    missing = sorted(reading_steps(index, members) - gathered)
    if not missing:
        return []
    m = changed[0]
    return [(m, (f"value {m} ({facts.plan.values[m].name}): stored in another layout, but {_named('step', missing)} "
                "of the original, which may read it, read no copy gathered before (scope program gathers a stored "
                "parameter before every step that reads it)"))]


def reading_steps(index: FamilyIndex, members: set[int]) -> set[int]:
    """The kernels of the input that read `members` or may read them (an element-wise kernel's operand the dataflow
    does not show): movers are not kernels."""
    facts = index.facts
    steps = {s for m in members for s in (*facts.flow.readers.get(m, ()), *index.possible_readers.get(m, ()))}
    return {s for s in steps if not facts.plan.steps[s].parsed_operation.is_mover}


def _change(old: object, new: object) -> str:
    """How a field changed, the figures shown when short."""
    if len(repr(old)) + len(repr(new)) > 120:
        return "changed"
    return f"changed from {old!r} to {new!r}"


def _against(found: object, expected: object) -> str:
    """A field that is not what it should be, the figures shown when short."""
    if len(repr(found)) + len(repr(expected)) > 120:
        return "differs from what it should be"
    return f"is {found!r}, expected {expected!r}"


def _label(field: str) -> str:
    return "class" if field == "memory_class" else field


def _ids(ids) -> str:
    """Ids as a short list: the first ten, then how many in all."""
    ids = list(ids)
    shown = ", ".join(map(str, ids[:10]))
    return shown if len(ids) <= 10 else f"{shown}, ... ({len(ids)} in all)"


def _named(word: str, ids) -> str:
    """`value 3` or `values 3, 4`."""
    return f"{word}{'s' if len(ids) > 1 else ''} {_ids(ids)}"


def _live_difference(found: list[int], expected: list[int]) -> str:
    """What a live set lacks and holds beyond the expected one, or that only its order differs."""
    found_set, expected_set = set(found), set(expected)
    missing = [v for v in expected if v not in found_set]
    extra = [v for v in found if v not in expected_set]
    said = [f"without {_ids(missing)}"] if missing else []
    said += [f"with {_ids(extra)} too"] if extra else []
    return "; ".join(said) or "in another order"
