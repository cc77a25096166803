"""ipuplan: re-plan the tensor layouts of an IPU memory plan with CP-SAT.

The pipeline, one module per concept: format -> layout / operation -> budgets / liveness ->
estimate -> dataflow -> families -> facts -> check -> candidates (one module per freedom
level) -> costs -> solvers (cpsat, highs, greedy) -> options -> rewrite -> optimizer ->
report / page / diff -> exploration -> cli. `optimize` and `explore` are loaded on first use, so
`import ipuplan` (and `ipuplan check`) does not pay for the solver's import.
"""

from importlib import import_module

from ipuplan.errors import BudgetError, InfeasibleBudget, IpuplanError, PlanError
from ipuplan.plan.format import Plan, dump_plan, load_plan, plan_from_json, write_plan

_ON_FIRST_USE = {
    "optimize": "ipuplan.replan.pipeline",
    "OptimizeResult": "ipuplan.replan.pipeline",
    "Change": "ipuplan.replan.pipeline",
    "OptimizeOptions": "ipuplan.replan.options",
    "explore": "ipuplan.workbench.explore",
    "ExploreRow": "ipuplan.workbench.explore",
}


def __getattr__(name: str):
    if name in _ON_FIRST_USE:
        return getattr(import_module(_ON_FIRST_USE[name]), name)
    raise AttributeError(f"module 'ipuplan' has no attribute {name!r}")


__all__ = [
    "BudgetError",
    "Change",
    "ExploreRow",
    "InfeasibleBudget",
    "IpuplanError",
    "OptimizeOptions",
    "OptimizeResult",
    "Plan",
    "PlanError",
    "dump_plan",
    "explore",
    "load_plan",
    "optimize",
    "plan_from_json",
    "write_plan",
]
__version__ = "0.1.0"
