"""Solver backends over a `model.problem.Problem`, by name: `cpsat` (the default), `highs`, `greedy` and any
name `register_backend` adds.

A backend is one function `solve(problem, settings, progress) -> SolveResult`, so the baselines are
measured by the same code path as the optimiser. A built-in backend's module is imported when first used:
`ipuplan check` never pays for OR-Tools or SciPy. Soft budgets (best effort), the peak / exchange front
and the explanation of infeasible budgets (`conflict`) are CP-SAT's, whatever backend solved.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from importlib import import_module

from ipuplan.model.objective import Objective
from ipuplan.model.problem import Problem
from ipuplan.solvers.bounds import whole_scope, whole_scope_fit
from ipuplan.solvers.result import FrontPoint, Progress, SolveResult, SolverSettings, SolveStatus, model_size

SolveFunction = Callable[[Problem, SolverSettings, Progress | None], SolveResult]

BACKENDS: dict[str, str | SolveFunction] = {
    "cpsat": "ipuplan.solvers.cpsat",
    "highs": "ipuplan.solvers.highs",
    "greedy": "ipuplan.solvers.greedy",
}
"""Backend name (what `--solver` takes) -> the module whose `solve` it runs, or the function itself."""


def register_backend(name: str, solve: SolveFunction) -> None:
    """Make `name` a backend that runs `solve`: `solvers.solve(..., name)` and `optimize(plan, solver=name)`
    take it from then on."""
    BACKENDS[name] = solve


class _Registered(str, Enum):
    """A backend's name. The built-ins are members, so the CLI lists them as `--solver`'s choices; a name
    registered later becomes one when first asked for, so the options accept it like a built-in."""

    @classmethod
    def _missing_(cls, value):
        if value not in BACKENDS:
            raise ValueError(f"no solver backend {value!r}: one of {', '.join(BACKENDS)}")
        member = str.__new__(cls, value)
        member._name_ = member._value_ = value
        return member


Backend = _Registered("Backend", {name.upper(): name for name in BACKENDS})


def solve(problem: Problem, settings: SolverSettings, backend: str | Backend = Backend.CPSAT,
          progress: Progress | None = None) -> SolveResult:
    """Minimise the objective terms in order with the named backend. The status and the bound are the whole scope's,
    choices a cap left out of the candidates included (`windows.whole_scope`, `whole_scope_fit`)."""
    found = BACKENDS[Backend(backend).value]
    run = import_module(found).solve if isinstance(found, str) else found
    if settings.objective != Objective.PEAK:
        return whole_scope_fit(problem, settings, run, progress)
    return whole_scope(problem, settings, run, progress)


def solve_soft(problem: Problem, settings: SolverSettings, progress: Progress | None = None) -> SolveResult:
    """Best effort: the least total excess over the budgets first, then the objective's terms (CP-SAT)."""
    return import_module("ipuplan.solvers.cpsat").solve(problem, settings, progress, soft=True)


def pareto_front(problem: Problem, settings: SolverSettings, max_points: int,
                 on_point: Callable[[FrontPoint], None] | None = None,
                 first: FrontPoint | None = None) -> tuple[list[FrontPoint], bool]:
    """The peak / exchange trade-off from the smallest peak on (from `first`, when solved already), and whether it
    was walked to its end (CP-SAT)."""
    return import_module("ipuplan.solvers.cpsat").pareto_front(problem, settings, max_points, on_point, first)


__all__ = ["BACKENDS", "Backend", "FrontPoint", "Progress", "SolveFunction", "SolveResult", "SolveStatus",
           "SolverSettings", "model_size", "pareto_front", "register_backend", "solve", "solve_soft"]
