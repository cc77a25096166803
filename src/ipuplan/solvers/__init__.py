"""Solver backends over a `costs.Problem`: `cpsat` (the default), `highs` and `greedy`.

Each backend module has `solve(problem, settings, progress) -> SolveResult`, so the baselines
are measured by the same code path as the optimiser. A backend is imported when first used:
`ipuplan check` never pays for OR-Tools or SciPy.
"""

from __future__ import annotations

from enum import Enum
from importlib import import_module

from ipuplan.costs import Problem
from ipuplan.solvers.result import Progress, SolveResult, SolverSettings, SolveStatus


class Backend(str, Enum):
    CPSAT = "cpsat"
    HIGHS = "highs"
    GREEDY = "greedy"


def solve(problem: Problem, settings: SolverSettings, backend: str | Backend = Backend.CPSAT,
          progress: Progress | None = None) -> SolveResult:
    """Minimise the objective terms in order with the named backend."""
    return import_module(f"ipuplan.solvers.{Backend(backend).value}").solve(problem, settings, progress)


def explain_infeasible(problem: Problem, seconds: float) -> str:
    """Which budget at which step cannot be met, and the lowest reachable peak (CP-SAT, whatever solved)."""
    return import_module("ipuplan.solvers.cpsat").explain_infeasible(problem, seconds)


__all__ = ["Backend", "Progress", "SolveResult", "SolveStatus", "SolverSettings", "explain_infeasible", "solve"]
