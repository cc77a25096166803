"""ipuplan: re-plan the tensor layouts of an IPU memory plan with CP-SAT.

The pipeline, one module per concept: format -> layout / operation -> estimate ->
dataflow -> space (candidates) -> model (CP-SAT) -> rewrite -> report; `optimize`
ties them together for a compiler pipeline and the CLI.
"""

from ipuplan.errors import BudgetError, InfeasibleBudget, IpuplanError, PlanError
from ipuplan.format import Plan, dump_plan, load_plan, plan_from_json, write_plan
from ipuplan.explore import ExploreRow, explore
from ipuplan.optimize import Change, OptimizeResult, optimize

__all__ = [
    "BudgetError",
    "Change",
    "ExploreRow",
    "InfeasibleBudget",
    "IpuplanError",
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
