"""The `Problem` solvers see: the per-step rows every solver sums, and their table.

A `Problem` is indices and integers only (no plan, no layout): per free group the number of
candidates and which one is the input; per kept step the constant bytes of each class and, per
live group, its bytes per candidate; per candidate its exchange bytes; the budget `Limit`s.
`model.build` makes one from a plan's facts and candidate space; a solver imports only this.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from ipuplan.plan.budgets import Limit, excess


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

    @cached_property
    def tie_weight(self) -> int:
        """What one exchange byte weighs against one changed value in `exchange x weight + changed values`,
        the objective's terms after the peak as one figure: more than every value changing at once, so the
        exchange decides and the changed values only break its ties."""
        return sum(self.group_sizes) + 1

    def changed_of(self, choice: tuple[int, ...]) -> int:
        return sum(size for size, c, i in zip(self.group_sizes, choice, self.input_choice) if c != i)


def solution_fingerprint(choice: tuple[int, ...]) -> str:
    """sha256 of the chosen candidate per free group: two runs with equal fingerprints chose the same layouts."""
    return hashlib.sha256(repr(tuple(choice)).encode()).hexdigest()
