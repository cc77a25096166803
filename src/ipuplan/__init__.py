"""ipuplan: re-plan the tensor layouts of an IPU memory plan with CP-SAT."""

from ipuplan.errors import InfeasibleBudget, IpuplanError, PlanError
from ipuplan.format import Plan, dump_plan, load_plan, plan_from_json, write_plan

__all__ = [
    "InfeasibleBudget",
    "IpuplanError",
    "Plan",
    "PlanError",
    "dump_plan",
    "load_plan",
    "plan_from_json",
    "write_plan",
]
__version__ = "0.1.0"
