"""ipuplan: re-plan the tensor layouts of an IPU memory plan with CP-SAT.

The pipeline, one folder per stage (the README's module map): plan/ -> facts/ -> space/ -> model/ ->
solvers/ -> replan/ -> report/ -> workbench/ -> cli. Everything but the errors is loaded on first use, so
`import ipuplan` (and `ipuplan check`) does not pay for the solver's import, and the `ipuplan` command is
ready to take Ctrl-C (cli) before it imports pydantic.
"""

from importlib import import_module

from ipuplan.errors import BudgetError, InfeasibleBudget, IpuplanError, PlanError

_ON_FIRST_USE = {
    **dict.fromkeys(("Plan", "dump_plan", "load_plan", "plan_from_json", "write_plan"), "ipuplan.plan.format"),
    "optimize": "ipuplan.replan.pipeline",
    "OptimizeResult": "ipuplan.replan.pipeline",
    "ValueChange": "ipuplan.facts.check",
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
    "ExploreRow",
    "InfeasibleBudget",
    "IpuplanError",
    "OptimizeOptions",
    "OptimizeResult",
    "Plan",
    "PlanError",
    "ValueChange",
    "dump_plan",
    "explore",
    "load_plan",
    "optimize",
    "plan_from_json",
    "write_plan",
]
__version__ = "0.1.0"
