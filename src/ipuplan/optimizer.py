"""`optimize`: the callable optimiser a compiler pipeline uses (the CLI calls the same function)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from ortools.sat.python import cp_model

from ipuplan.check import check
from ipuplan.dataflow import Dataflow, dataflow
from ipuplan.errors import BudgetError, InfeasibleBudget, PlanError
from ipuplan.estimate import Budgets, Estimate, estimate
from ipuplan.format import Plan
from ipuplan.model import (
    Progress,
    SolveResult,
    SolverSettings,
    SolveStatus,
    StepRow,
    build_model,
    solve,
    step_rows,
    usage_expressions,
)
from ipuplan.rewrite import rewrite, with_budgets, with_derived_fields
from ipuplan.space import CandidateSpace, FrozenGroup, candidate_space


@dataclass(frozen=True)
class Change:
    value_id: int
    name: str
    old_layout: str
    new_layout: str
    old_class: str
    new_class: str
    old_bytes: int
    new_bytes: int


@dataclass(frozen=True)
class OptimizeResult:
    plan: Plan
    """The rewritten plan (the input, with recomputed fields, when nothing better was found)."""
    before: Estimate
    after: Estimate
    budgets: Budgets
    solve: SolveResult
    changes: tuple[Change, ...]
    frozen: tuple[FrozenGroup, ...]
    free_groups: int
    candidates: int
    exchange_bytes_added: int
    note: str

    @property
    def status(self) -> SolveStatus:
        return self.solve.status

    @property
    def bound(self) -> int:
        return self.solve.bound


def default_workers() -> int:
    return max(1, min(8, os.cpu_count() or 1))


def resolve_budgets(plan: Plan, budget: int | None, interleaved_budget: int | None, support_reserve: int | None) -> Budgets:
    chosen = Budgets(
        plan.budget_bytes if budget is None else budget,
        plan.interleaved_budget_bytes if interleaved_budget is None else interleaved_budget,
        plan.support_reserve_bytes if support_reserve is None else support_reserve,
    )
    if min(chosen.budget_bytes, chosen.interleaved_budget_bytes, chosen.support_reserve_bytes) < 0:
        raise BudgetError("budgets must not be negative")
    if chosen.standard_limit < 0:
        raise BudgetError(
            f"interleaved budget {chosen.interleaved_budget_bytes:,} exceeds the budget {chosen.budget_bytes:,}: "
            "no room would be left for standard memory"
        )
    return chosen


def _changes(before: Plan, after: Plan, old: Estimate, new: Estimate) -> tuple[Change, ...]:
    return tuple(
        Change(a.id, a.name, a.layout, b.layout, a.memory_class, b.memory_class, old.values[a.id].bytes, new.values[a.id].bytes)
        for a, b in zip(before.values, after.values)
        if a.layout != b.layout
    )


STRUCTURAL_FIELDS = frozenset({"layout", "Gemm family", "scratch.standard"})
"""Mismatches a rewrite cannot repair; stale derived numbers (bytes, usage, peaks) it recomputes."""


def require_structurally_consistent(plan: Plan, flow: Dataflow) -> None:
    """Refuse a plan whose layouts, families or scratch break the format's rules (PlanError, exit 2)."""
    problems = [m for m in check(plan, flow) if m.field in STRUCTURAL_FIELDS]
    if problems:
        more = f" (and {len(problems) - 1} more; run `ipuplan check`)" if len(problems) > 1 else ""
        raise PlanError(f"the input plan is inconsistent: {problems[0]}{more}")


def explain_infeasible(space: CandidateSpace, rows: list[StepRow], budgets: Budgets, seconds: float) -> str:
    """Which budget at which step cannot be met, by how much, and the lowest reachable peak.

    Slack per budget row and minimise their sum: no enforcement literals on byte-sized rows
    (the CP-SAT 9.15 issue #5293), and every row with slack is a budget that cannot be met.
    """
    probe = build_model(space, rows, None, max((r.bounds()[1] for r in rows), default=0))
    model = probe.model
    slacks = []
    limits = (
        ("standard budget", budgets.standard_limit, lambda s, i: s),
        ("interleaved budget", budgets.interleaved_budget_bytes, lambda s, i: i),
        ("total budget less support reserve", budgets.total_limit, lambda s, i: s + i),
    )
    for row, standard, interleaved in usage_expressions(probe.choose, rows):
        for label, limit, usage in limits:
            slack = model.new_int_var(0, max(row.bounds()[1], 1), f"slack_{label}_{row.step}")
            model.add(usage(standard, interleaved) - slack <= limit)
            slacks.append((label, limit, row.step, slack))
    model.minimize(sum(s for *_, s in slacks))
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_time_in_seconds = max(seconds, 1.0)
    solver.solve(model)
    violated = sorted(
        ((solver.value(s), label, limit, step) for label, limit, step, s in slacks if solver.value(s) > 0), reverse=True
    )
    lowest = f"the lowest raw peak any layout reaches is {_lowest_peak(space, rows, seconds):,} bytes"
    if not violated:
        return f"the budgets cannot be met together; {lowest}"
    excess, label, limit, step = violated[0]
    more = f" (and {len(violated) - 1} more budget rows)" if len(violated) > 1 else ""
    return f"the {label} ({limit:,} bytes) cannot be met at step {step}: it needs at least {limit + excess:,}{more}; {lowest}"


def _lowest_peak(space: CandidateSpace, rows: list[StepRow], seconds: float) -> int:
    choices = build_model(space, rows, None, max((r.bounds()[1] for r in rows), default=0))
    choices.model.minimize(choices.peak)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_time_in_seconds = max(seconds, 1.0)
    solver.solve(choices.model)
    return int(solver.best_objective_bound)


def optimize(
    plan: Plan,
    *,
    budget: int | None = None,
    interleaved_budget: int | None = None,
    support_reserve: int | None = None,
    time_limit: float = 10.0,
    workers: int | None = None,
    seed: int = 0,
    deterministic: bool = False,
    scope: str = "kernels",
    progress: Progress | None = None,
    dump_model: str | None = None,
) -> OptimizeResult:
    """Re-plan the free layouts of `plan` to minimise its peak per-tile usage.

    Budgets default to the plan's own; overridden budgets are written into the result.
    The result is never worse than the input: when the solver finds nothing better, the
    input comes back unchanged (its derived fields recomputed) and `note` says so.
    Raises InfeasibleBudget (naming the budget and step) when no layout meets the budgets.

    >>> from ipuplan import load_plan
    >>> result = optimize(load_plan("models/vit-so400m-finalist-5.json"), deterministic=True)
    >>> result.before.raw_peak, result.after.raw_peak, result.status.value
    (367216, 194928, 'optimal')
    """
    budgets = resolve_budgets(plan, budget, interleaved_budget, support_reserve)
    flow = dataflow(plan)
    require_structurally_consistent(plan, flow)
    settings = SolverSettings(time_limit, workers or default_workers(), seed, deterministic, dump_model)
    space = candidate_space(plan, scope, flow)
    solved = solve(plan, space, budgets, settings, progress)
    before = estimate(plan, budgets)
    if solved.status == SolveStatus.INFEASIBLE:
        raise InfeasibleBudget(explain_infeasible(space, step_rows(plan, space), budgets, time_limit))
    unchanged = with_derived_fields(with_budgets(plan, budgets))
    if solved.status == SolveStatus.NO_SOLUTION:
        result_plan, note = unchanged, "no solution within the time limit: the input is returned unchanged"
    elif solved.peak is not None and solved.peak >= before.raw_peak and before.fits_budget:
        result_plan, note = unchanged, "nothing better than the input in this scope: the input is returned unchanged"
    else:
        result_plan, note = rewrite(plan, space, solved.choice, budgets), ""
    after = estimate(result_plan)
    changes = _changes(plan, result_plan, before, after)
    added = solved.exchange_bytes - sum(g.candidates[0].exchange_bytes for g in space.free) if changes else 0
    return OptimizeResult(
        result_plan, before, after, budgets, solved, changes, space.frozen, len(space.free), space.candidate_count,
        added, note,
    )
