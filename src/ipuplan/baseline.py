"""Baselines on the same candidate space and estimate: what ipuplan is measured against."""

from __future__ import annotations

import time
from dataclasses import dataclass
from math import prod

import numpy as np

from ipuplan.estimate import Budgets
from ipuplan.format import Plan
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

    def violation(self, budgets: Budgets | None) -> int:
        """Bytes over the budgets, summed over steps and budget rows (0 when everything fits)."""
        if budgets is None:
            return 0
        over = (
            np.maximum(self.standard - budgets.standard_limit, 0)
            + np.maximum(self.interleaved - budgets.interleaved_budget_bytes, 0)
            + np.maximum(self.standard + self.interleaved - budgets.total_limit, 0)
        )
        return int(over.sum())

    def within(self, budgets: Budgets | None) -> bool:
        return self.violation(budgets) == 0


def usage_of(rows: list[StepRow], choice: tuple[int, ...]) -> Usage:
    standard = np.array([r.standard + sum(int(s[choice[g]]) for g, s, _ in r.terms) for r in rows], dtype=np.int64)
    interleaved = np.array([r.interleaved + sum(int(i[choice[g]]) for g, _, i in r.terms) for r in rows], dtype=np.int64)
    return Usage(standard, interleaved)


def smallest_candidates_bound(rows: list[StepRow]) -> int:
    """Every free value at its smallest candidate, step by step: no choice can do better."""
    return max((row.bounds()[0] for row in rows), default=0)


def greedy_choice(space: CandidateSpace, rows: list[StepRow], budgets: Budgets | None) -> tuple[int, ...]:
    """From the input layouts, repeatedly make the single switch that lowers (budget excess, peak) most.

    Switches are tried for the groups live at the peak step, or at the step most over budget.
    """
    choice = [0] * len(space.free)
    current = usage_of(rows, tuple(choice))
    while True:
        focus = rows[_focus_row(current, budgets)]
        best = ((current.violation(budgets), current.peak), None)
        for g, _, _ in focus.terms:
            for c in range(len(space.free[g].candidates)):
                trial = tuple(c if k == g else x for k, x in enumerate(choice))
                usage = usage_of(rows, trial)
                score = (usage.violation(budgets), usage.peak)
                if score < best[0]:
                    best = (score, (g, c))
        if best[1] is None:
            return tuple(choice)
        g, c = best[1]
        choice[g] = c
        current = usage_of(rows, tuple(choice))


def _focus_row(usage: Usage, budgets: Budgets | None) -> int:
    """The step most over budget, or the peak step when everything fits."""
    total = usage.standard + usage.interleaved
    if budgets is not None and not usage.within(budgets):
        over = (np.maximum(usage.standard - budgets.standard_limit, 0)
                + np.maximum(usage.interleaved - budgets.interleaved_budget_bytes, 0)
                + np.maximum(total - budgets.total_limit, 0))
        return int(np.argmax(over))
    return int(np.argmax(total))


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


def absolute_floor(plan: Plan) -> int:
    """Every live value spread over all tiles with no replication and no padding, plus scratch.

    No layout of any freedom level can go below this.
    """
    spread = [-(-prod(v.shape) * v.element_size // plan.tile_count) for v in plan.values]
    return max(
        (sum(spread[v] for v in step.live) + step.scratch.standard + step.scratch.interleaved for step in plan.steps),
        default=0,
    )


@dataclass(frozen=True)
class MipResult:
    peak: int | None
    bound: float | None
    status: str
    seconds: float


def highs_peak(space: CandidateSpace, rows: list[StepRow], budgets: Budgets | None, time_limit: float) -> MipResult:
    """The same model as CP-SAT's phase 1, solved as a MIP by HiGHS (through scipy)."""
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_matrix

    offsets = np.cumsum([0] + [len(g.candidates) for g in space.free])
    count = int(offsets[-1]) + 1  # the last variable is the peak
    entries: list[tuple[int, int, float]] = []
    lower: list[float] = []
    upper: list[float] = []

    def add_row(terms: dict[int, float], low: float, high: float) -> None:
        row = len(lower)
        entries.extend((row, column, value) for column, value in terms.items())
        lower.append(low)
        upper.append(high)

    for g in range(len(space.free)):
        add_row({int(offsets[g]) + c: 1.0 for c in range(len(space.free[g].candidates))}, 1.0, 1.0)
    for row in rows:
        standard: dict[int, float] = {}
        interleaved: dict[int, float] = {}
        for g, s, i in row.terms:
            for c in range(len(s)):
                standard[int(offsets[g]) + c] = float(s[c])
                interleaved[int(offsets[g]) + c] = float(i[c])
        total = {k: standard[k] + interleaved[k] for k in standard}
        add_row({**total, count - 1: -1.0}, -np.inf, -(row.standard + row.interleaved))
        if budgets is not None:
            add_row(standard, -np.inf, budgets.standard_limit - row.standard)
            add_row(interleaved, -np.inf, budgets.interleaved_budget_bytes - row.interleaved)
            add_row(total, -np.inf, budgets.total_limit - row.standard - row.interleaved)
    matrix = coo_matrix(
        ([e[2] for e in entries], ([e[0] for e in entries], [e[1] for e in entries])), shape=(len(lower), count)
    ).tocsr()
    objective = np.zeros(count)
    objective[-1] = 1.0
    integrality = np.ones(count)
    integrality[-1] = 0
    bounds = Bounds(np.zeros(count), np.concatenate([np.ones(count - 1), [np.inf]]))
    started = time.perf_counter()
    result = milp(
        objective,
        constraints=LinearConstraint(matrix, lower, upper),
        integrality=integrality,
        bounds=bounds,
        options={"time_limit": time_limit, "disp": False},
    )
    seconds = time.perf_counter() - started
    peak = None if result.x is None else int(round(result.x[-1]))
    bound = getattr(result, "mip_dual_bound", None)
    status = {0: "optimal", 1: "time limit", 2: "infeasible"}.get(result.status, result.message)
    return MipResult(peak, bound, status, seconds)
