"""Costs: the per-step rows every solver sums, the objective's terms, and the `Problem` solvers see.

A `Problem` is indices and integers only (no plan, no layout): per free group the number of
candidates and which one is the input; per kept step the constant bytes of each class and, per
live group, its bytes per candidate; per candidate its exchange bytes; the budget `Limit`s.
Each `Objective` is lexicographic over its `Term`s (`OBJECTIVES`): `peak` minimises the raw peak,
then exchange bytes, then changed values; `fit` only meets the budgets, with the least exchange
bytes, then the fewest changed values.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from enum import Enum
from functools import cached_property
from math import prod

import numpy as np

from ipuplan.facts.plan_facts import PlanFacts
from ipuplan.plan.budgets import Limit, excess
from ipuplan.plan.layout import STANDARD, ceil_div
from ipuplan.space.types import CandidateSpace, FreeGroup


class Term(str, Enum):
    PEAK = "peak"
    """max over steps of standard + interleaved bytes per tile."""
    EXCHANGE = "exchange"
    """bytes the mover steps send between tiles."""
    CHANGED = "changed"
    """values whose layout differs from the input."""


class Objective(str, Enum):
    PEAK = "peak"
    """The smallest raw peak, then the least exchange and the fewest changes at that peak."""
    FIT = "fit"
    """Meet the budgets with the least exchange, then the fewest changes; the peak lands where it lands."""


OBJECTIVES = {
    Objective.PEAK: (Term.PEAK, Term.EXCHANGE, Term.CHANGED),
    Objective.FIT: (Term.EXCHANGE, Term.CHANGED),
}
OBJECTIVE = OBJECTIVES[Objective.PEAK]


@dataclass(frozen=True)
class StepRow:
    """One kept step: constant bytes per class and, per free group, bytes per candidate per class."""

    step: int
    standard: int
    interleaved: int
    terms: tuple[tuple[int, np.ndarray, np.ndarray], ...]
    """(group index, standard bytes per candidate, interleaved bytes per candidate)."""


@dataclass(frozen=True)
class Usage:
    """Per-row standard and interleaved bytes under one choice."""

    standard: np.ndarray
    interleaved: np.ndarray

    @property
    def peak(self) -> int:
        return int((self.standard + self.interleaved).max(initial=0))

    def excess(self, limits: tuple[Limit, ...]) -> np.ndarray:
        """Per row, bytes over the budgets summed over the limits (0 where everything fits)."""
        over = np.zeros_like(self.standard)
        for limit in limits:
            over += excess(limit, self.standard, self.interleaved)
        return over

    def violation(self, limits: tuple[Limit, ...]) -> int:
        return int(self.excess(limits).sum())

    def worst_excess(self, limits: tuple[Limit, ...]) -> tuple[int, ...]:
        """Per limit, the most any row exceeds it: what that budget lacks for the choice to fit."""
        return tuple(int(excess(limit, self.standard, self.interleaved).max(initial=0)) for limit in limits)


@dataclass(frozen=True)
class TermTable:
    """The rows' terms laid flat: each distinct term (a group's bytes per candidate) once, and where it occurs.

    At 50k values the rows hold a million terms but only some 40k distinct ones (the step rows share the
    arrays of equal live sets); sums over rows become one `bincount`, not a Python loop per term.
    """

    group: np.ndarray
    """Per distinct term, its group."""
    start: np.ndarray
    """Per distinct term, where its candidates begin in `standard` / `interleaved`."""
    standard: np.ndarray
    interleaved: np.ndarray
    """Every distinct term's bytes per candidate, end to end."""
    row: np.ndarray
    """Per occurrence (in row order), its row."""
    term: np.ndarray
    """Per occurrence, its distinct term."""
    constant_standard: np.ndarray
    constant_interleaved: np.ndarray
    """Per row, the bytes no choice changes."""

    @property
    def rows(self) -> int:
        return len(self.constant_standard)

    @property
    def terms(self) -> int:
        return len(self.group)

    @cached_property
    def counts(self) -> np.ndarray:
        """Per distinct term, its number of candidates."""
        return np.diff(np.append(self.start, len(self.standard)))

    def row_sums(self, per_term: np.ndarray) -> np.ndarray:
        """Per row, the sum of a per-occurrence figure."""
        return np.bincount(self.row, weights=per_term, minlength=self.rows).astype(np.int64)

    def usage(self, choice) -> Usage:
        picked = self.start[self.term] + np.asarray(choice, dtype=np.int64)[self.group[self.term]]
        return Usage(self.constant_standard + self.row_sums(self.standard[picked]),
                     self.constant_interleaved + self.row_sums(self.interleaved[picked]))

    def extremes(self, standard: int = 1, interleaved: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """Per distinct term, the least and the most of `standard x std + interleaved x il` over its candidates."""
        if not self.terms:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        weighted = standard * self.standard + interleaved * self.interleaved
        return np.minimum.reduceat(weighted, self.start), np.maximum.reduceat(weighted, self.start)

    def row_bounds(self, standard: int = 1, interleaved: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """Per row, the least and the most of `standard x std + interleaved x il` any choice gives."""
        low, high = self.extremes(standard, interleaved)
        constant = standard * self.constant_standard + interleaved * self.constant_interleaved
        return constant + self.row_sums(low[self.term]), constant + self.row_sums(high[self.term])


def term_table(rows: tuple[StepRow, ...]) -> TermTable:
    """The rows' terms, equal ones (by content) stored once."""
    by_identity: dict[tuple[int, int, int], int] = {}
    by_content: dict[tuple[int, bytes, bytes], int] = {}
    distinct: list[tuple[int, np.ndarray, np.ndarray]] = []
    occurrences: list[int] = []
    row_of: list[int] = []
    for r, row in enumerate(rows):
        for g, s, i in row.terms:
            key = (g, id(s), id(i))
            t = by_identity.get(key)
            if t is None:
                t = by_content.setdefault((g, s.tobytes(), i.tobytes()), len(distinct))
                if t == len(distinct):
                    distinct.append((g, s, i))
                by_identity[key] = t
            occurrences.append(t)
            row_of.append(r)
    counts = [len(s) for _, s, _ in distinct]
    empty = np.zeros(0, dtype=np.int64)
    return TermTable(
        group=np.array([g for g, _, _ in distinct], dtype=np.int64),
        start=np.cumsum([0, *counts[:-1]], dtype=np.int64) if distinct else empty,
        standard=np.concatenate([s for _, s, _ in distinct]).astype(np.int64) if distinct else empty,
        interleaved=np.concatenate([i for _, _, i in distinct]).astype(np.int64) if distinct else empty,
        row=np.array(row_of, dtype=np.int64), term=np.array(occurrences, dtype=np.int64),
        constant_standard=np.array([row.standard for row in rows], dtype=np.int64),
        constant_interleaved=np.array([row.interleaved for row in rows], dtype=np.int64))


@dataclass(frozen=True)
class Problem:
    """What a solver sees. Choice `c` of group `g` is an index into its candidates."""

    candidate_counts: tuple[int, ...]
    input_choice: tuple[int, ...]
    group_sizes: tuple[int, ...]
    """Values per group: what a change of that group's choice costs in changed values."""
    rows: tuple[StepRow, ...]
    exchange: tuple[tuple[int, ...], ...]
    """Per group, exchange bytes per candidate."""
    limits: tuple[Limit, ...]
    """The budget rule (empty: no budgets)."""
    steps_total: int

    @property
    def groups(self) -> int:
        return len(self.candidate_counts)

    def without_budgets(self) -> Problem:
        return self.with_limits(())

    def with_limits(self, limits: tuple[Limit, ...]) -> Problem:
        """The same rows under other budgets; their table, once built, is shared rather than built again."""
        changed = replace(self, limits=limits)
        if "table" in self.__dict__:
            changed.__dict__["table"] = self.table
        return changed

    @cached_property
    def table(self) -> TermTable:
        return term_table(self.rows)

    def usage(self, choice: tuple[int, ...]) -> Usage:
        return self.table.usage(choice)

    def fingerprint(self) -> str:
        """sha256 of every integer the solver sees: two runs with the same fingerprint solved the same model."""
        digest = hashlib.sha256(repr((self.candidate_counts, self.input_choice, self.group_sizes, self.exchange,
                                      self.limits, self.steps_total)).encode())
        digest.update(np.array([row.step for row in self.rows], dtype="<i8").tobytes())
        table = self.table
        for figures in (table.group, table.start, table.standard, table.interleaved, table.row, table.term,
                        table.constant_standard, table.constant_interleaved):
            digest.update(figures.astype("<i8").tobytes())
        return digest.hexdigest()

    @cached_property
    def row_peaks(self) -> tuple[np.ndarray, np.ndarray]:
        """Per row, the least and the most standard + interleaved bytes any choice gives."""
        return self.table.row_bounds()

    def lower_bound(self) -> int:
        """Every free group at its smallest candidate, step by step: no choice can do better."""
        return int(self.row_peaks[0].max(initial=0))

    def upper_bound(self) -> int:
        return int(self.row_peaks[1].max(initial=0))

    def exchange_of(self, choice: tuple[int, ...]) -> int:
        return sum(self.exchange[g][c] for g, c in enumerate(choice))

    def changed_of(self, choice: tuple[int, ...]) -> int:
        return sum(size for size, c, i in zip(self.group_sizes, choice, self.input_choice) if c != i)


def solution_fingerprint(choice: tuple[int, ...]) -> str:
    """sha256 of the chosen candidate per free group: two runs with equal fingerprints chose the same layouts."""
    return hashlib.sha256(repr(tuple(choice)).encode()).hexdigest()


def usage_of(rows: tuple[StepRow, ...], choice: tuple[int, ...]) -> Usage:
    """Per-row usage of any rows (`Problem.usage` keeps the table of its own rows)."""
    return term_table(rows).usage(choice)


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


def unneeded_changes(problem: Problem, choice: tuple[int, ...]) -> list[int]:
    """Changed groups that could go back to their input layout without raising the peak or the exchange,
    and still meet the budgets."""
    peak = problem.usage(choice).peak
    found = []
    for g, (chosen, original) in enumerate(zip(choice, problem.input_choice)):
        if chosen == original:
            continue
        reverted = tuple(original if k == g else c for k, c in enumerate(choice))
        cheaper = problem.exchange[g][original] <= problem.exchange[g][chosen]
        usage = problem.usage(reverted)
        if cheaper and usage.peak <= peak and not usage.violation(problem.limits):
            found.append(g)
    return found


def absolute_floor(facts: PlanFacts) -> int:
    """Every live value spread over all tiles with no replication and no padding, scratch left out
    (a re-split may shrink it).

    No layout of any freedom level can go below this.
    """
    plan = facts.plan
    spread = [ceil_div(prod(v.shape) * v.element_size, plan.tile_count) for v in plan.values]
    return max((sum(spread[v] for v in step.live) for step in plan.steps), default=0)
