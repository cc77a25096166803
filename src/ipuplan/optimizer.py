"""`optimize`: the callable optimiser a compiler pipeline uses (the CLI calls the same function).

The pipeline, each fact computed once: facts (liveness, dataflow, estimate, families) ->
candidate space -> problem (indices and integers) -> solver backend -> rewrite (re-checked).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from ipuplan.budgets import Budgets
from ipuplan.candidates import CandidateSpace, FrozenGroup, candidate_space
from ipuplan.check import check
from ipuplan.costs import problem_of
from ipuplan.errors import InfeasibleBudget, PlanError
from ipuplan.estimate import Estimate
from ipuplan.facts import PlanFacts, plan_facts
from ipuplan.format import Plan
from ipuplan.options import OptimizeOptions
from ipuplan.rewrite import rewrite, with_budgets, with_derived_fields
from ipuplan.solvers import Progress, SolveResult, SolveStatus, explain_infeasible, solve


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
    options: OptimizeOptions

    @property
    def status(self) -> SolveStatus:
        return self.solve.status

    @property
    def bound(self) -> int:
        return self.solve.bound


def _changes(before: Plan, after: Plan, old: Estimate, new: Estimate) -> tuple[Change, ...]:
    return tuple(
        Change(a.id, a.name, a.layout, b.layout, a.memory_class, b.memory_class, old.values[a.id].bytes, new.values[a.id].bytes)
        for a, b in zip(before.values, after.values)
        if a.layout != b.layout
    )


STRUCTURAL_FIELDS = frozenset({"layout", "Gemm family", "scratch.standard"})
"""Mismatches a rewrite cannot repair; stale derived numbers (bytes, usage, peaks) it recomputes."""


def require_structurally_consistent(facts: PlanFacts) -> None:
    """Refuse a plan whose layouts, families or scratch break the format's rules (PlanError, exit 2)."""
    problems = [m for m in check(facts.plan, facts) if m.field in STRUCTURAL_FIELDS]
    if problems:
        more = f" (and {len(problems) - 1} more; run `ipuplan check`)" if len(problems) > 1 else ""
        raise PlanError(f"the input plan is inconsistent: {problems[0]}{more}")


def _result_facts(facts: PlanFacts, space: CandidateSpace, solved: SolveResult) -> tuple[PlanFacts, str]:
    """The facts of the plan to return, and a note when it is the input unchanged."""
    if solved.status == SolveStatus.NO_SOLUTION:
        note = "no solution within the time limit: the input is returned unchanged"
    elif solved.peak is not None and solved.peak >= facts.estimate.raw_peak and facts.estimate.fits_budget:
        note = "nothing better than the input in this scope: the input is returned unchanged"
    else:
        return rewrite(facts, space, solved.choice, facts.budgets), ""
    unchanged = with_derived_fields(with_budgets(facts.plan, facts.budgets), facts.estimate)
    return replace(facts, plan=unchanged), note


def optimize(
    plan: Plan,
    options: OptimizeOptions | None = None,
    *,
    progress: Progress | None = None,
    on_phase: Callable[[str, str], None] | None = None,
    dump_model: str | None = None,
    **option_values,
) -> OptimizeResult:
    """Re-plan the free layouts of `plan` to minimise its peak per-tile usage.

    `options` (or keyword values of its fields) choose scope, solver, limits and budgets;
    `progress` hears every improving solution, `on_phase` each stage as it starts (name, detail).
    Budgets default to the plan's own; overridden budgets are written into the result.
    The result is never worse than the input: when the solver finds nothing better, the
    input comes back unchanged (its derived fields recomputed) and `note` says so.
    Raises InfeasibleBudget (naming the budget and step) when no layout meets the budgets.

    >>> from ipuplan import load_plan
    >>> result = optimize(load_plan("models/vit-so400m-finalist-5.json"), workers=1)
    >>> result.before.raw_peak, result.after.raw_peak, result.status.value
    (367216, 194160, 'optimal')
    """
    options = (options or OptimizeOptions()).with_values(**option_values)
    phase = on_phase or (lambda name, detail: None)
    phase("analyse", f"{len(plan.values):,} values, {len(plan.steps):,} steps")
    facts = plan_facts(plan, options.budgets_for(plan))
    require_structurally_consistent(facts)
    phase("candidates", f"scope {options.scope.value}")
    space = candidate_space(facts, options.scope)
    problem = problem_of(facts, space)
    phase("solve", f"{options.solver.value}: {problem.groups:,} free groups, {sum(problem.candidate_counts):,} "
                   f"candidates, {len(problem.rows):,} of {problem.steps_total:,} steps, {options.time_limit:g} s limit")
    solved = solve(problem, options.solver_settings(dump_model), options.solver, progress)
    if solved.status == SolveStatus.INFEASIBLE:
        raise InfeasibleBudget(explain_infeasible(problem, options.time_limit))
    after, note = _result_facts(facts, space, solved)
    changes = _changes(plan, after.plan, facts.estimate, after.estimate)
    added = solved.exchange_bytes - problem.exchange_of(problem.input_choice) if changes else 0
    return OptimizeResult(
        after.plan, facts.estimate, after.estimate, facts.budgets, solved, changes, space.frozen, len(space.free),
        space.candidate_count, added, note, options,
    )
