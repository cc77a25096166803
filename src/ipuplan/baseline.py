"""Baselines on the same candidate space and estimate: what ipuplan is measured against."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ipuplan.estimate import Budgets
from ipuplan.model import StepRow
from ipuplan.space import CandidateSpace


@dataclass(frozen=True)
class Usage:
    """Per-row standard and interleaved bytes under one choice."""

    standard: np.ndarray
    interleaved: np.ndarray

    @property
    def peak(self) -> int:
        return int((self.standard + self.interleaved).max(initial=0))

    def within(self, budgets: Budgets | None) -> bool:
        if budgets is None:
            return True
        total = self.standard + self.interleaved
        return bool(
            (self.standard <= budgets.standard_limit).all()
            and (self.interleaved <= budgets.interleaved_budget_bytes).all()
            and (total <= budgets.total_limit).all()
        )


def usage_of(rows: list[StepRow], choice: tuple[int, ...]) -> Usage:
    standard = np.array([r.standard + sum(int(s[choice[g]]) for g, s, _ in r.terms) for r in rows], dtype=np.int64)
    interleaved = np.array([r.interleaved + sum(int(i[choice[g]]) for g, _, i in r.terms) for r in rows], dtype=np.int64)
    return Usage(standard, interleaved)


def smallest_candidates_bound(rows: list[StepRow]) -> int:
    """Every free value at its smallest candidate, step by step: no choice can do better."""
    return max((row.bounds()[0] for row in rows), default=0)


def greedy_choice(space: CandidateSpace, rows: list[StepRow], budgets: Budgets | None) -> tuple[int, ...]:
    """From the input layouts, repeatedly make the single switch that lowers the peak most."""
    choice = [0] * len(space.free)
    current = usage_of(rows, tuple(choice))
    while True:
        peak_row = rows[int(np.argmax(current.standard + current.interleaved))]
        best = (current.peak, None)
        for g, _, _ in peak_row.terms:
            for c in range(len(space.free[g].candidates)):
                trial = tuple(c if k == g else x for k, x in enumerate(choice))
                usage = usage_of(rows, trial)
                if usage.peak < best[0] and usage.within(budgets):
                    best = (usage.peak, (g, c))
        if best[1] is None:
            return tuple(choice)
        g, c = best[1]
        choice[g] = c
        current = usage_of(rows, tuple(choice))


def unneeded_changes(space: CandidateSpace, rows: list[StepRow], choice: tuple[int, ...]) -> list[int]:
    """Changed groups that could go back to their input layout without raising the peak or the exchange."""
    peak = usage_of(rows, choice).peak
    found = []
    for g, chosen in enumerate(choice):
        if chosen == 0:
            continue
        reverted = tuple(0 if k == g else c for k, c in enumerate(choice))
        candidates = space.free[g].candidates
        if usage_of(rows, reverted).peak <= peak and candidates[0].exchange_bytes <= candidates[chosen].exchange_bytes:
            found.append(g)
    return found
