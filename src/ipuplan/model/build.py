"""The builder of a `Problem` from a plan's facts and its candidate space: per kept step, the bytes no choice
changes and each live free group's bytes per candidate (scratch included), and per choice a cap left out of its
candidates (`space.types.LeftOut`), dominated steps dropped."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ipuplan.facts.plan_facts import PlanFacts
from ipuplan.model.problem import Problem, StepRow, Terms
from ipuplan.plan.layout import STANDARD
from ipuplan.space.scopes import with_promoted
from ipuplan.space.types import CandidateSpace, FreeGroup, LeftOut


def problem_of(facts: PlanFacts, space: CandidateSpace) -> Problem:
    """The space's choices as indices and integers, under the budgets of `facts`."""
    rows, left_out = step_rows(facts, space)
    return Problem(
        candidate_counts=tuple(len(g.candidates) for g in space.free),
        input_choice=tuple(g.input_index for g in space.free),
        group_sizes=tuple(len(g.members) for g in space.free),
        rows=tuple(rows),
        exchange=tuple(tuple(c.exchange_bytes for c in g.candidates) for g in space.free),
        limits=facts.budgets.limits,
        steps_total=len(facts.plan.steps),
        left_out=tuple(left_out) if any(left_out) else (),
    )


@dataclass(frozen=True)
class Widening:
    """A candidate space and its problem, and how to make some left-out choices candidates
    (`solvers.solve_space`, which must not load the facts or the space itself)."""

    facts: PlanFacts
    space: CandidateSpace
    problem: Problem

    def widened(self, chosen: dict[int, np.ndarray]) -> Widening:
        """The left-out choices `chosen` (per free group index, a mask) made candidates (`scopes.with_promoted`)."""
        space = with_promoted(self.facts, self.space, chosen)
        return Widening(self.facts, space, problem_of(self.facts, space))


def step_rows(facts: PlanFacts, space: CandidateSpace) -> tuple[list[StepRow], list[Terms]]:
    """Per-step constant and variable bytes, and per step the left-out choices' bytes; steps dominated by another
    step are dropped."""
    plan = facts.plan
    group_of = {m: (g, position) for g, group in enumerate(space.free) for position, m in enumerate(group.members)}
    computed = facts.estimate.values
    fixed_bytes = {v.id: (computed[v.id].bytes, v.memory_class == STANDARD) for v in plan.values}
    scratch_groups: dict[int, list[int]] = {}
    for g, group in enumerate(space.free):
        left_out = () if group.left_out is None else group.left_out.scratch
        for step in {entry[0] for candidate in group.candidates for entry in candidate.scratch} | {
                entry[0] for entry in left_out}:
            scratch_groups.setdefault(step, []).append(g)
    cache: dict[tuple[int, tuple[int, ...]], tuple[np.ndarray, np.ndarray]] = {}
    rows, left_out_rows = [], []
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
        left_out_rows.append(_left_out_terms(space, live_members, scratch_groups.get(step.index, ()), step.index))
    return _undominated(rows, left_out_rows)


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


def _left_out_terms(space: CandidateSpace, live_members: dict[int, list[int]], scratch_groups, step: int) -> Terms:
    """(group, standard, interleaved bytes per left-out choice) of every group with left-out choices at `step`."""
    found = []
    for g in sorted(set(live_members) | set(scratch_groups)):
        left_out = space.free[g].left_out
        if left_out is not None:
            found.append((g, *_left_out_bytes(left_out, live_members.get(g, []), step)))
    return tuple(found)


def _left_out_bytes(left_out: LeftOut, positions: list[int], step: int) -> tuple[np.ndarray, np.ndarray]:
    """The bytes of the members at `positions` and the scratch of `step`, per class, under each left-out choice."""
    standard = np.zeros(left_out.count, dtype=np.int64)
    interleaved = np.zeros(left_out.count, dtype=np.int64)
    for p in positions:
        if left_out.standard[p]:
            standard += left_out.bytes[:, p]
        else:
            interleaved += left_out.bytes[:, p]
    for index, std, il in left_out.scratch:
        if index == step:
            standard, interleaved = standard + std, interleaved + il
    return standard, interleaved


def _undominated(rows: list[StepRow], left_out: list[Terms]) -> tuple[list[StepRow], list[Terms]]:
    """Drop a step whose every term (the left-out choices' too) is matched by an identical term of a step with
    more constant bytes."""
    best: dict[tuple, list[int]] = {}
    for r, row in enumerate(rows):
        key = tuple((g, s.tobytes(), i.tobytes()) for terms in (row.terms, left_out[r]) for g, s, i in terms)
        front = best.setdefault(key, [])
        if any(rows[o].standard >= row.standard and rows[o].interleaved >= row.interleaved for o in front):
            continue
        front[:] = [o for o in front if not (row.standard >= rows[o].standard and row.interleaved >= rows[o].interleaved)]
        front.append(r)
    kept = sorted(r for front in best.values() for r in front)
    return [rows[r] for r in kept], [left_out[r] for r in kept]

