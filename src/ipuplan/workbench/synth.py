"""Synthesised plans, derived from a real one, for benchmarks and scaling.

Every plan made here goes through `with_derived_fields`, so `ipuplan check` passes on it:
- `repeat_layers`: the repeated block runs N times (N layers of parameters, `Repeat N boundary`,
  execution counts N), as the compiler would write a deeper model;
- `unroll`: the whole program K times in a row, each copy with its own values, the next copy's
  parameters streamed in while the previous copy runs (so neighbouring copies compete for memory);
- `with_budget_factor`: the same plan under tighter (or looser) budgets.

Before a plan is built, its counts (values, steps, live entries) are worked out from the input, and a plan past
MAX_VALUES or past the memory limit (`replan.size.require_synth_fits`: the machine's by default) is refused in one
line (`RunTooLarge`, exit 2): synth never starts what it cannot finish.
"""

from __future__ import annotations

import re
from bisect import insort

from ipuplan.errors import PlanError
from ipuplan.facts.dataflow import INTERMEDIATE_PREFIX, dataflow
from ipuplan.facts.estimate import Budgets
from ipuplan.facts.liveness import liveness
from ipuplan.plan.format import Plan, Value
from ipuplan.replan.rewrite import with_budgets, with_derived_fields
from ipuplan.replan.size import RunTooLarge, require_synth_fits

_REPEAT = re.compile(r"^Repeat (\d+) boundary$")

MAX_VALUES = 1_000_000
"""The most values a plan made here may have: about 5x the largest plan the scaling benchmark optimises (its
200,640 values take synth 26 s and 1 GB, both linear in the size), so one such plan fits a 24 GB machine."""


def _within_size(values: int, request: str) -> None:
    if values > MAX_VALUES:
        raise RunTooLarge(f"{request} would make a plan of {values:,} values; synth makes at most {MAX_VALUES:,}")


_OPERATION = re.compile(rf"^{INTERMEDIATE_PREFIX}(\d+)(.*)$")


def _replace_timeline(plan: Plan, values: list[Value], steps: list) -> Plan:
    return plan.model_copy(update={"timeline": plan.timeline.model_copy(update={"values": values, "steps": steps})})


def repeat_layers(plan: Plan, layers: int, memory_limit: int | None = None) -> Plan:
    """The plan with its repeated block run `layers` times, one set of parameters per layer; RunTooLarge when it
    would pass MAX_VALUES or `memory_limit` (default: the machine's, `replan.size.memory_limit`)."""
    repeats = [(s.index, int(m.group(1))) for s in plan.steps if (m := _REPEAT.match(s.operation))]
    if len(repeats) != 1:
        raise PlanError(f"expected one `Repeat N boundary` step to repeat layers, found {len(repeats)}")
    repeat_step, current = repeats[0]
    if layers < current:
        raise PlanError(f"the plan already has {current} layers; ask for at least that many")
    flow = dataflow(plan)
    inputs = set(flow.inputs)
    values = list(plan.values)
    live = [list(step.live) for step in plan.steps]
    next_origin = max(v.origin for v in values) + 1
    layered = [members for members in flow.bindings.values()
               if members and set(members) <= inputs and len(members) == current]
    _within_size(len(values) + len(layered) * (layers - current), f"{layers} layers")
    _layers_within_memory(plan, [members[-1] for members in layered], layers - current, layers, memory_limit)
    for members in layered:
        last = values[members[-1]]
        for layer in range(current, layers):
            new_id = len(values)
            name = last.name.replace(f"layer{current - 1}", f"layer{layer}", 1)
            if name == last.name:
                name = f"{last.name} #{layer}"
            values.append(last.model_copy(update={"id": new_id, "root": new_id, "origin": next_origin, "name": name}))
            next_origin += 1
            for step_live in live:
                if last.id in step_live:
                    insort(step_live, new_id)
    steps = []
    for step, step_live in zip(plan.steps, live):
        update: dict = {"live": step_live}
        if step.index == repeat_step:
            update["operation"] = f"Repeat {layers} boundary"
        elif step.execution_count == current and current > 1:
            update["execution_count"] = layers
        steps.append(step.model_copy(update=update))
    return with_derived_fields(_replace_timeline(plan, values, steps))


def _layers_within_memory(plan: Plan, lasts: list[int], added: int, layers: int, limit: int | None) -> None:
    """Each new layer's parameter is live wherever its last layer's is."""
    holding = dict.fromkeys(lasts, 0)
    for step in plan.steps:
        for value_id in step.live:
            if value_id in holding:
                holding[value_id] += 1
    live = sum(len(step.live) for step in plan.steps) + added * sum(holding.values())
    require_synth_fits(f"{layers} layers", len(plan.values) + added * len(lasts), len(plan.steps), live, limit)


def _unrolled_within_memory(plan: Plan, copies: int, streamed: int, limit: int | None) -> None:
    """Each copy has the plan's values, steps and live entries, and all but the first the `streamed` entries of its
    parameters arriving early."""
    live = copies * sum(len(step.live) for step in plan.steps) + (copies - 1) * streamed
    require_synth_fits(f"{copies} unrolled copies", copies * len(plan.values), copies * len(plan.steps), live, limit)


def _renamed(text: str, copy: int, source_shift: int) -> str:
    if copy == 0:
        return text
    match = _OPERATION.match(text)
    if match:
        return f"{INTERMEDIATE_PREFIX}{int(match.group(1)) + source_shift}{match.group(2)}"
    return f"u{copy}.{text}"


def unroll(plan: Plan, copies: int, memory_limit: int | None = None) -> Plan:
    """The program `copies` times in a row; copy c's parameters arrive during copy c-1's tail. RunTooLarge when it
    would pass MAX_VALUES or `memory_limit` (default: the machine's, `replan.size.memory_limit`)."""
    if copies < 1:
        raise PlanError("copies must be at least 1")
    _within_size(copies * len(plan.values), f"{copies} unrolled copies")
    count, length = len(plan.values), len(plan.steps)
    source_shift = max((s.source for s in plan.steps), default=0) + 1
    group_shift = max(v.storage_group for v in plan.values) + 1
    origin_shift = max(v.origin for v in plan.values) + 1
    inputs = set(dataflow(plan).inputs)
    first = liveness(plan).first
    arrival = max((s.index + 1 for s in plan.steps if _REPEAT.match(s.operation)), default=0)
    _unrolled_within_memory(plan, copies, sum(max(0, length - arrival + first[v]) for v in inputs), memory_limit)
    values = []
    for copy in range(copies):
        shift = copy * count
        for value in plan.values:
            values.append(
                value.model_copy(
                    update={
                        "id": value.id + shift,
                        "root": value.root + shift,
                        "origin": value.origin + copy * origin_shift,
                        "storage_group": value.storage_group + copy * group_shift,
                        "name": _renamed(value.name, copy, copy * source_shift),
                        "group": _renamed(value.group, copy, copy * source_shift),
                    }
                )
            )
    live: list[list[int]] = [[] for _ in range(copies * length)]
    for copy in range(copies):
        for step in plan.steps:
            for value_id in step.live:
                live[copy * length + step.index].append(value_id + copy * count)
        # Parameters stream in while the previous copy runs its tail (after its repeated block,
        # so that no two copies' body arguments are readable at once).
        if copy > 0:
            for value_id in inputs:
                for index in range((copy - 1) * length + arrival, copy * length + first[value_id]):
                    live[index].append(value_id + copy * count)
    steps = [
        step.model_copy(update={"index": copy * length + step.index, "source": step.source + copy * source_shift,
                                "live": sorted(live[copy * length + step.index])})
        for copy in range(copies)
        for step in plan.steps
    ]
    return with_derived_fields(_replace_timeline(plan, values, steps))


def with_budget_factor(plan: Plan, factor: float) -> Plan:
    """The plan under budgets scaled by `factor` (support reserve kept), derived fields recomputed."""
    scaled = Budgets(
        int(plan.budget_bytes * factor), int(plan.interleaved_budget_bytes * factor), plan.support_reserve_bytes
    )
    return with_derived_fields(with_budgets(plan, scaled))


def with_scope(plan: Plan, scope: str) -> Plan:
    return plan.model_copy(update={"scope": scope})
