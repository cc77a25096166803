"""What every solver backend takes besides the problem, and the plain result it returns."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from ipuplan.model.objective import Objective
from ipuplan.model.problem import Problem
from ipuplan.solvers.deadline import DETERMINISTIC_WALL, FLOOR
from ipuplan.solvers.linear import LinearRows

Progress = Callable[[str, int, int, float], None]
"""Called on every improving solution: phase, objective, bound, seconds since the solve began."""


class SolveStatus(str, Enum):
    OPTIMAL = "optimal"
    FEASIBLE = "feasible"
    """A solution, not proven optimal within the limit."""
    INFEASIBLE = "infeasible"
    """Proven: no choice meets the budgets."""
    NO_SOLUTION = "no_solution"
    """Timed out before any solution: neither feasible nor proven infeasible."""


@dataclass(frozen=True)
class SolverSettings:
    time_limit: float = 10.0
    workers: int = 2
    seed: int = 0
    deterministic: bool = False
    """One worker and a deterministic time limit: the same answer on every run."""
    dump_model: str | None = None
    """Write the phase-1 model (CP-SAT text proto) here, for debugging."""
    objective: Objective = Objective.PEAK
    presolve: bool = True
    """CP-SAT's presolve (off: a small model whose search is cheaper than its presolve, as the exact exchange's)."""
    ends_at: float | None = None
    """The run's deadline (`time.perf_counter()` seconds, `solvers.deadline.Deadline.ends_at`): no solve runs past it,
    whatever its own limit (None: each solve's limit alone)."""
    proxy_ties: bool = True
    """Whether a solve whose start proves its peak then minimises the model's exchange and changes at that peak (the
    phases after the peak). False where the run's exact exchange stage follows and minimises the written plan's own
    figures from the peak found: the start is then the answer (`SolveResult.ties_left`), as past PROXY_TIES_ENTRIES."""
    start: tuple[int, ...] | None = None
    """A choice of the problem solved, already constructed (`replan.widen.solve_space`'s): the constructive start is
    repaired from it rather than built again (a second construction took 1.4 s at 50k values). Only for that one
    problem: a solve of another (a window, a relaxation) is given settings without it."""

    def left_since(self, started: float, at_least: float) -> float:
        """The limit of a later solve of one run: what `time_limit` leaves since `started`, at least `at_least` (its
        share); with one worker the share alone, so that its deterministic units do not hang on the clock."""
        return at_least if self.deterministic else max(self.time_limit - (time.perf_counter() - started), at_least)

    def wall(self, seconds: float) -> float:
        """The wall limit of a solve of `seconds`: with one worker only a guard (`deadline.DETERMINISTIC_WALL` x its
        deterministic units, which bind first); else `seconds`, or what is left before `ends_at` when that is less
        (at least a few hundredths: a solver asked at all answers with its hint)."""
        if self.deterministic:
            return seconds * DETERMINISTIC_WALL
        return seconds if self.ends_at is None else max(min(seconds, self.ends_at - time.perf_counter()), FLOOR)


@dataclass(frozen=True)
class SolveResult:
    status: SolveStatus
    choice: tuple[int, ...]
    """Chosen candidate index per free group (the input layouts when there is no solution)."""
    peak: int | None
    bound: int
    build_seconds: float
    solve_seconds: float
    first_solution_seconds: float | None
    variables: int
    constraints: int
    steps_kept: int
    steps_total: int
    exchange_bytes: int = 0
    changed_values: int = 0
    objective: Objective = Objective.PEAK
    exchange_bound: int | None = None
    """With the fit objective: the proven lower bound on exchange bytes."""
    excess: tuple[int, ...] = ()
    """Soft budgets (best effort): per budget limit, the most any step exceeds it."""
    constructed: bool = False
    """The choice is the constructive solution: proven optimal (the solver was skipped) or the best known
    (the solver found nothing in time)."""
    ties_left: bool = False
    """The terms after the peak (exchange, changed values) were not minimised: the peak is proven, and on a model
    this large the phases after it would minimise only the model's exchange proxy (`cpsat.PROXY_TIES_ENTRIES`)."""
    terms_merged: int = 0
    """Model reduction: distinct terms folded into shared sums (terms live at exactly the same steps)."""
    candidates_dropped: int = 0
    """Model reduction: candidates another candidate of the same group dominates."""
    windows: int = 0
    """Distinct windows solved exactly for a lower bound on the peak (`solvers.bounds`)."""
    entries_before: int = 0
    entries: int = 0
    """Model reduction: row entries before (every candidate of every term, every rule) and as written."""
    search_units: float = 0.0
    """CP-SAT's deterministic units the solve's phases used: how much search it got, the same figure on any machine
    for the same work (0 for other backends)."""
    left_out: int = 0
    """Choices a cap left out of the candidates that could still beat the peak found, and so counted in the bound
    (`solvers.bounds.whole_scope`): 0 when none was left out or none can."""

    @property
    def gap(self) -> float | None:
        """Of the objective's first term: the peak, or with `fit` the exchange bytes."""
        return self.exchange_gap if self.objective == Objective.FIT else self.peak_gap

    @property
    def peak_gap(self) -> float | None:
        if self.peak is None or self.peak == 0:
            return None
        return (self.peak - self.bound) / self.peak

    @property
    def exchange_gap(self) -> float | None:
        """Of the exchange bytes, where the model bounds them (`exchange_bound`)."""
        if self.peak is None or self.exchange_bound is None or self.exchange_bytes == 0:
            return None if self.peak is None else 0.0
        return (self.exchange_bytes - self.exchange_bound) / self.exchange_bytes


def model_size(problem: Problem, variables: int = 0, constraints: int = 0, build_seconds: float = 0.0,
               rows: LinearRows | None = None) -> dict[str, int | float]:
    """A result's size fields, alike for every backend: the problem's steps kept of all, and the model the
    backend wrote (zeros when it wrote none) with, from the reduced `rows` it wrote, their entries."""
    sizes = {"variables": variables, "constraints": constraints, "build_seconds": build_seconds,
             "steps_kept": len(problem.rows), "steps_total": problem.steps_total}
    if rows is not None:
        sizes.update(entries_before=rows.plain_entries, entries=rows.entries, terms_merged=rows.merged_terms)
    return sizes


@dataclass(frozen=True)
class FrontPoint:
    """One point of the peak / exchange trade-off: no choice has a lower peak at this exchange or less."""

    choice: tuple[int, ...]
    peak: int
    exchange_bytes: int
    changed_values: int
    proven: bool
    """Both its solves (peak under the exchange cap, then exchange at that peak) proven optimal."""
    seconds: float
