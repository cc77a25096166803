"""The steps and values scope `program` inserts: per gathered parameter and reading step, a `Copy` right before the
reading step and the copy it makes (REPLAN.md, "Optional scope `program`").

The copy is a new value, appended after the existing ids in order of (reading step, parameter), named after the
operation, the parameter and the reading step, with the parameter's origin, shape, precision, storage group and
copies and the layout its reader needs (the parameter's input layout). It is live from its inserted step through
the reading step. The inserted step has the reading step's `source` and `execution_count`, no scratch, and holds the
reading step's live set less the values first live there (the reading step's results), the parameter's storage
(it is read there), and the copies already made for that step. Later steps are renumbered; every original step
keeps its live set, plus the copies made for it when it is a reading step.
"""

from __future__ import annotations

from dataclasses import dataclass

from ipuplan.facts.dataflow import BODY_ARGUMENT
from ipuplan.facts.plan_facts import PlanFacts
from ipuplan.plan.format import Plan, Step, Value
from ipuplan.plan.layout import format_layout
from ipuplan.space.levels.gather import GATHER_OPERATION
from ipuplan.space.types import CandidateSpace, Gather


@dataclass(frozen=True)
class InsertedGather:
    """One inserted `Copy` and the value it makes, by their numbers in the written plan."""

    step: int
    value: int
    parameter: int
    """The value gathered (inside a loop body, its body argument)."""
    reading_step: int
    """The reading step, by its index in the written plan (in the input plan: `reading_step - inserted before`)."""
    name: str

    def __str__(self) -> str:
        return f"step {self.step}: Copy of value {self.parameter} into value {self.value} for step {self.reading_step}"


def chosen_gathers(space: CandidateSpace, choice: tuple[int, ...]) -> list[tuple[int, int, Gather]]:
    """(reading step, parameter, gather) of every chosen candidate, by reading step then parameter."""
    found = [(gather.step, group.members[gather.position], gather)
             for group, chosen in zip(space.free, choice) for gather in group.candidates[chosen].gathers]
    return sorted(found, key=lambda entry: entry[:2])


def gathered_name(source: int, parameter: Value, reading_step: int) -> str:
    """Named after the operation, the parameter and the reading step; never a body argument's name (the dataflow
    binds a value so named to its layers)."""
    name = parameter.name.removesuffix(BODY_ARGUMENT)
    return f"operation {source} gather of {name} for step {reading_step}"


def with_gathers(plan: Plan, space: CandidateSpace, choice: tuple[int, ...],
                 born_at: tuple[tuple[int, ...], ...]) -> Plan:
    """`plan` with the chosen candidates' copies inserted (derived fields not yet recomputed); `born_at`: per step of
    `plan`, the values first live there (`Liveness.born_at`). What was inserted is read back from the written plan
    (`inserted_gathers`)."""
    at_step: dict[int, list[tuple[int, Gather]]] = {}
    for step, parameter, gather in chosen_gathers(space, choice):
        at_step.setdefault(step, []).append((parameter, gather))
    if not at_step:
        return plan
    values, steps = list(plan.values), []
    for step in plan.steps:
        made = _gathers_before(plan, step, at_step.get(step.index, ()), len(values), len(steps), born_at[step.index])
        values += [value for value, _ in made]
        steps += [copy_step for _, copy_step in made]
        live = [*step.live, *(value.id for value, _ in made)]
        steps.append(step.model_copy(update={"index": len(steps), "live": live}) if made or step.index != len(steps)
                     else step)
    return plan.model_copy(update={"timeline": plan.timeline.model_copy(update={"values": values, "steps": steps})})


def _gathers_before(plan: Plan, step: Step, gathers, first_value: int, first_step: int,
                    born: tuple[int, ...]) -> list[tuple[Value, Step]]:
    """The copies made for the reading `step` (`born`: the values first live there), each value with its inserted
    step."""
    reading_index = first_step + len(gathers)
    roots = {plan.values[parameter].root for parameter, _ in gathers}
    held = [v for v in step.live if v not in born or v in roots]
    made = []
    for k, (parameter, gather) in enumerate(gathers):
        value = _gathered_value(plan.values[parameter], gather, first_value + k, step.source, reading_index)
        held = [*held, value.id]
        made.append((value, step.model_copy(update={
            "index": first_step + k, "operation": GATHER_OPERATION, "live": held,
            "scratch": step.scratch.model_copy(update={"standard": 0, "interleaved": 0})})))
    return made


def _gathered_value(parameter: Value, gather: Gather, value_id: int, source: int, reading_index: int) -> Value:
    name = gathered_name(source, parameter, reading_index)
    return parameter.model_copy(update={
        "id": value_id, "root": value_id, "name": name, "group": name, "layout": format_layout(gather.layout),
        "memory_class": gather.layout.memory_class, "layout_error": None})


def without_gathers(plan: Plan, inserted: tuple[InsertedGather, ...]) -> Plan:
    """The written plan as the input's timeline: the inserted steps and values taken out, the others renumbered
    back (what the output contract compares with the input)."""
    if not inserted:
        return plan
    steps_out, values_out = {g.step for g in inserted}, {g.value for g in inserted}
    steps = [step for step in plan.steps if step.index not in steps_out]
    steps = [step.model_copy(update={"index": k, "live": [v for v in step.live if v not in values_out]})
             for k, step in enumerate(steps)]
    values = [value for value in plan.values if value.id not in values_out]
    return plan.model_copy(update={"timeline": plan.timeline.model_copy(update={"values": values, "steps": steps})})


def inserted_gathers(input_values: int, facts: PlanFacts) -> tuple[InsertedGather, ...]:
    """What a written plan inserted, read from the plan alone (its values past the input's `input_values`): each
    copy's writer, the value that step reads (-1 when the dataflow cannot tell) and its last live step."""
    values, flow, live = facts.plan.values, facts.flow, facts.live
    found = []
    for value in values[input_values:]:
        step = live.first[value.id]
        reads = flow.steps[step].reads if step >= 0 else ()
        found.append(InsertedGather(step, value.id, reads[0] if len(reads) == 1 else -1, live.last[value.id],
                                    value.name))
    return tuple(found)
