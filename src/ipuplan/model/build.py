"""The builder of a `Problem` from a plan's facts and its candidate space: per kept step, the bytes no choice
changes and each live free group's bytes per candidate (scratch included), dominated steps dropped."""

from __future__ import annotations

import numpy as np

from ipuplan.facts.plan_facts import PlanFacts
from ipuplan.model.problem import Problem, StepRow
from ipuplan.plan.layout import STANDARD
from ipuplan.space.types import CandidateSpace, FreeGroup


def problem_of(facts: PlanFacts, space: CandidateSpace) -> Problem:
    """The space's choices as indices and integers, under the budgets of `facts`."""
    return Problem(
        candidate_counts=tuple(len(g.candidates) for g in space.free),
        input_choice=tuple(g.input_index for g in space.free),
        group_sizes=tuple(len(g.members) for g in space.free),
        rows=tuple(step_rows(facts, space)),
        exchange=tuple(tuple(c.exchange_bytes for c in g.candidates) for g in space.free),
        limits=facts.budgets.limits,
        steps_total=len(facts.plan.steps),
    )


def step_rows(facts: PlanFacts, space: CandidateSpace) -> list[StepRow]:
    """Per-step constant and variable bytes; steps dominated by another step are dropped."""
    plan = facts.plan
    group_of = {m: (g, position) for g, group in enumerate(space.free) for position, m in enumerate(group.members)}
    computed = facts.estimate.values
    fixed_bytes = {v.id: (computed[v.id].bytes, v.memory_class == STANDARD) for v in plan.values}
    scratch_groups: dict[int, list[int]] = {}
    for g, group in enumerate(space.free):
        for step in {entry[0] for candidate in group.candidates for entry in candidate.scratch}:
            scratch_groups.setdefault(step, []).append(g)
    cache: dict[tuple[int, tuple[int, ...]], tuple[np.ndarray, np.ndarray]] = {}
    rows = []
    for step in plan.steps:
        standard, interleaved = step.scratch.standard, step.scratch.interleaved
        live_members: dict[int, list[int]] = {}
        for value_id in step.live:
            if value_id in group_of:
                g, position = group_of[value_id]
                live_members.setdefault(g, []).append(position)
            else:
                size, is_standard = fixed_bytes[value_id]
                standard += size if is_standard else 0
                interleaved += 0 if is_standard else size
        terms = {}
        for g, positions in live_members.items():
            key = (g, tuple(positions))
            if key not in cache:
                cache[key] = _group_bytes(space.free[g], positions)
            terms[g] = cache[key]
        if step.index in scratch_groups:
            standard -= step.scratch.standard
            interleaved -= step.scratch.interleaved
            for g in scratch_groups[step.index]:
                extra_std, extra_il = _scratch_bytes(space.free[g], step.index)
                base_std, base_il = terms.get(g, (0, 0))
                terms[g] = (base_std + extra_std, base_il + extra_il)
        rows.append(StepRow(step.index, standard, interleaved, tuple((g, s, i) for g, (s, i) in sorted(terms.items()))))
    return _undominated(rows)


def _group_bytes(group: FreeGroup, positions: list[int]) -> tuple[np.ndarray, np.ndarray]:
    standard = np.zeros(len(group.candidates), dtype=np.int64)
    interleaved = np.zeros(len(group.candidates), dtype=np.int64)
    for c, candidate in enumerate(group.candidates):
        for p in positions:
            if candidate.layouts[p].memory_class == STANDARD:
                standard[c] += candidate.value_bytes[p].bytes
            else:
                interleaved[c] += candidate.value_bytes[p].bytes
    return standard, interleaved


def _scratch_bytes(group: FreeGroup, step: int) -> tuple[np.ndarray, np.ndarray]:
    """Scratch of `step` under each candidate (a candidate that does not name the step leaves none)."""
    standard = np.zeros(len(group.candidates), dtype=np.int64)
    interleaved = np.zeros(len(group.candidates), dtype=np.int64)
    for c, candidate in enumerate(group.candidates):
        for index, std, il in candidate.scratch:
            if index == step:
                standard[c], interleaved[c] = std, il
    return standard, interleaved


def _undominated(rows: list[StepRow]) -> list[StepRow]:
    """Drop a step whose every term is matched by an identical term of a step with more constant bytes."""
    best: dict[tuple, list[StepRow]] = {}
    for row in rows:
        key = tuple((g, s.tobytes(), i.tobytes()) for g, s, i in row.terms)
        front = best.setdefault(key, [])
        if any(o.standard >= row.standard and o.interleaved >= row.interleaved for o in front):
            continue
        front[:] = [o for o in front if not (row.standard >= o.standard and row.interleaved >= o.interleaved)]
        front.append(row)
    return sorted((row for front in best.values() for row in front), key=lambda r: r.step)

