"""Solver backends over a `costs.Problem`: `cpsat` (the default), `highs` and `greedy`.

Each backend module has `solve(problem, settings, progress) -> SolveResult`, so the baselines
are measured by the same code path as the optimiser. A backend is imported when first used:
`ipuplan check` never pays for OR-Tools or SciPy. Soft budgets (best effort) and the explanation
of infeasible budgets (`conflict`) are CP-SAT's, whatever backend solved.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from importlib import import_module

from ipuplan.model.problem import Problem
from ipuplan.solvers.result import FrontPoint, Progress, SolveResult, SolverSettings, SolveStatus


class Backend(str, Enum):
    CPSAT = "cpsat"
    HIGHS = "highs"
    GREEDY = "greedy"


def solve(problem: Problem, settings: SolverSettings, backend: str | Backend = Backend.CPSAT,
          progress: Progress | None = None) -> SolveResult:
    """Minimise the objective terms in order with the named backend."""
    return import_module(f"ipuplan.solvers.{Backend(backend).value}").solve(problem, settings, progress)


def solve_soft(problem: Problem, settings: SolverSettings, progress: Progress | None = None) -> SolveResult:
    """Best effort: the least total excess over the budgets first, then the objective's terms (CP-SAT)."""
    return import_module("ipuplan.solvers.cpsat").solve(problem, settings, progress, soft=True)


def pareto_front(problem: Problem, settings: SolverSettings, max_points: int,
                 on_point: Callable[[FrontPoint], None] | None = None) -> tuple[list[FrontPoint], bool]:
    """The peak / exchange trade-off from the smallest peak on, and whether it was walked to its end (CP-SAT)."""
    return import_module("ipuplan.solvers.cpsat").pareto_front(problem, settings, max_points, on_point)


def explain_infeasible(problem: Problem, seconds: float) -> str:
    """One line: a budget row of a minimal conflict, what it needs while the others hold, and the lowest
    reachable peak (CP-SAT, whatever solved)."""
    return import_module("ipuplan.solvers.conflict").explain_infeasible(problem, seconds)


__all__ = ["Backend", "FrontPoint", "Progress", "SolveResult", "SolveStatus", "SolverSettings", "explain_infeasible",
           "pareto_front", "solve", "solve_soft"]
