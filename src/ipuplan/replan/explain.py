"""Why a plan cannot fit, in plain words: a minimal conflict, what holds each of its rows, what would fit.

Alpa's answer to a plan that does not fit is "increase the memory budget". Ours, from the CP-SAT
conflict of `solvers.conflict` (a minimal set of (step, budget) rows no layout meets together):
for each row, the values that hold it (bytes, and why each is frozen) and the least it needs
while the others hold; per budget of the conflict, the least bytes that would fit, the others
unchanged, and the options that give them; the lowest raw peak within the budgets the conflict
leaves alone; and which wider freedom (a wider scope, `--no-keep-classes`, no pins) would fit.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

from ipuplan.facts.check import LiveValue, live_values
from ipuplan.facts.plan_facts import PlanFacts
from ipuplan.model.build import problem_of
from ipuplan.model.problem import Problem, StepRow
from ipuplan.plan.budgets import Budgets, Limit
from ipuplan.replan.options import OptimizeOptions
from ipuplan.solvers.conflict import (
    Conflict,
    ConflictRow,
    conflict_line,
    feasible,
    least_budget,
    lowest_peak_outside,
    minimal_conflict,
)
from ipuplan.solvers.deadline import part
from ipuplan.space.scopes import Scope, candidate_space
from ipuplan.space.types import CandidateSpace


@dataclass(frozen=True)
class ConflictStep:
    step: int
    operation: str
    budget: str
    budget_bytes: int
    needs: int
    """The least this budget's bytes at this step can be while the conflict's other rows hold."""
    fixed_bytes: int
    """Frozen values and scratch, counted by this budget."""
    free_values: int
    free_least_bytes: int
    """The least the free values can take here, whatever the other rows."""
    holders: tuple[LiveValue, ...]
    """The frozen values live here that this budget counts, largest first."""

    @property
    def scratch(self) -> int:
        return self.fixed_bytes - sum(h.bytes for h in self.holders)


@dataclass(frozen=True)
class BudgetRaise:
    budget: str
    bytes: int
    least: int | None
    """The least bytes this budget needs for the plan to fit, the others unchanged (None: not known)."""
    options: str
    """Command-line options that give at least that."""
    enough_alone: bool | None = True
    """False: proven that no raise of this budget alone fits; None: not decided in time."""


@dataclass(frozen=True)
class Freedom:
    options: str
    fits: bool | None
    """None: not decided within the time left."""


@dataclass(frozen=True)
class Explanation:
    line: str
    scope: str
    steps: tuple[ConflictStep, ...]
    minimal: bool
    """Proven with exact integers: dropping any one row lets the rest be met."""
    raises: tuple[BudgetRaise, ...]
    lowest_peak: int | None
    lowest_within: tuple[str, ...]
    freedoms: tuple[Freedom, ...]
    seconds: float

    def summary(self) -> dict:
        """For `--json`: every field, the holders of each step included."""
        return {**asdict(self), "steps": [{**asdict(s), "scratch": s.scratch} for s in self.steps]}


def within(deadline: float, seconds: float) -> float:
    """`seconds`, or what is left before `deadline` when that is less (a solver needs a few hundredths)."""
    return max(min(seconds, deadline - time.perf_counter()), 0.05)


def _holders(facts: PlanFacts, space: CandidateSpace, step: int, limit: Limit) -> tuple[LiveValue, ...]:
    """Frozen values live at `step` whose class `limit` counts, largest first."""
    counted = {"standard": limit.standard, "interleaved": limit.interleaved}
    live = live_values(facts.plan, facts.estimate, step, space.reasons())
    return tuple(value for value in live if counted[value.memory_class] and value.frozen is not None)


def conflict_step(facts: PlanFacts, space: CandidateSpace, problem: Problem, row: ConflictRow) -> ConflictStep:
    step_row: StepRow = problem.rows[row.row]
    limit = problem.limits[row.limit]
    free_least = sum(int(min(limit.usage(s, i))) for _, s, i in step_row.terms)
    free_values = sum(len(space.free[g].members) for g, _, _ in step_row.terms)
    return ConflictStep(
        step_row.step, facts.plan.steps[step_row.step].parsed_operation.kind, limit.name, limit.bytes, row.need.low,
        limit.usage(step_row.standard, step_row.interleaved), free_values, free_least,
        _holders(facts, space, step_row.step, limit),
    )


def raise_options(budgets: Budgets, limit: Limit, least: int) -> str:
    """Options that lift `limit` to `least` without lowering another limit (the standard region is what
    the interleaved budget leaves of the whole budget, so raising the interleaved budget raises both)."""
    more = least - limit.bytes
    if limit.interleaved and not limit.standard:
        return f"--budget {budgets.budget_bytes + more} --interleaved-budget {budgets.interleaved_budget_bytes + more}"
    return f"--budget {budgets.budget_bytes + more}"


def budget_raises(problem: Problem, budgets: Budgets, conflict: Conflict, seconds: float,
                  deadline: float) -> tuple[BudgetRaise, ...]:
    """Per budget of the conflict, the least bytes that fit with the other budgets as they are (`seconds`
    each, none past `deadline`)."""
    raises = []
    for k in sorted({row.limit for row in conflict.rows}):
        limit = problem.limits[k]
        found = least_budget(problem, k, within(deadline, seconds))
        value = found.high if found is not None and found.exact else None
        enough = False if found is None else (True if value is not None else None)
        flags = "" if value is None else raise_options(budgets, limit, value)
        raises.append(BudgetRaise(limit.name, limit.bytes, value, flags, enough))
    return tuple(raises)


def wider_freedoms(options: OptimizeOptions) -> list[tuple[str, Scope, bool, bool]]:
    """(options to give, scope, keep classes, keep the pins) for every freedom wider than `options`."""
    wider = [(f"--scope {s.value}", s, options.keep_classes, True)
             for s in options.scope.wider()]
    if options.keep_classes:
        wider.append((f"--scope {Scope.FULL.value} --no-keep-classes", Scope.FULL, False, True))
    if options.freeze or options.pin_file is not None:
        wider.append(("without --freeze and --pin-file", options.scope, options.keep_classes, False))
    return wider


def freedoms(facts: PlanFacts, options: OptimizeOptions, pinned: frozenset[int],
             deadline: float) -> tuple[Freedom, ...]:
    """Whether each wider freedom lets the budgets be met (None: no time left to decide)."""
    found = []
    for flags, scope, keep_classes, keep_pins in wider_freedoms(options):
        if time.perf_counter() >= deadline:
            found.append(Freedom(flags, None))
            continue
        space = candidate_space(facts, scope, pinned if keep_pins else frozenset(), keep_classes=keep_classes)
        found.append(Freedom(flags, feasible(problem_of(facts, space), max(deadline - time.perf_counter(), 0.1))))
    return tuple(found)


def explain(facts: PlanFacts, space: CandidateSpace, problem: Problem, options: OptimizeOptions,
            pinned: frozenset[int] = frozenset(), *, proven: bool, deadline: float) -> Explanation:
    """Why no layout of `space` meets the budgets of `facts`, by `deadline` (`time.perf_counter()` seconds;
    `proven`: a solver proved it; else it only found none in time). Its parts share the time left: most
    to the conflict, the rest to what would fit; a wider freedom is tried only while time is left."""
    started = time.perf_counter()
    seconds = max(deadline - started, 0.1)
    searched = part("conflict", seconds)  # the heart of it: most of the time
    conflict = minimal_conflict(problem, searched)
    lowest = lowest_peak_outside(problem, conflict, within(deadline, part("lowest peak", seconds)))
    line = conflict_line(problem, conflict, lowest, round(searched, 1), proven or conflict is not None)
    steps = tuple(conflict_step(facts, space, problem, row) for row in conflict.rows) if conflict else ()
    raising = part("budget raises", seconds)
    raises = budget_raises(problem, facts.budgets, conflict, raising, deadline) if conflict else ()
    wider = freedoms(facts, options, pinned, deadline)
    peak = lowest.peak.high if lowest.peak is not None and lowest.peak.exact else None
    return Explanation(line, options.scope.value, steps, bool(conflict and conflict.minimal), raises, peak,
                       lowest.within, wider, time.perf_counter() - started)
