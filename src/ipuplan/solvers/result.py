"""What every solver backend takes besides the problem, and the plain result it returns."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

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

    @property
    def gap(self) -> float | None:
        if self.peak is None or self.peak == 0:
            return None
        return (self.peak - self.bound) / self.peak
