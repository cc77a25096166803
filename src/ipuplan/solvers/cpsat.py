"""CP-SAT backend: data -> variables -> constraints -> objective -> solve -> extract.

`build_model` turns a `Problem` into a model and a `LayoutChoices` handle; `solve` runs the
lexicographic objective of REPLAN.md (peak, then exchange bytes and changed values at that
peak); `explain_infeasible` says which budget cannot be met and the lowest reachable peak.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from ortools.sat.python import cp_model

from ipuplan.costs import Problem, StepRow
from ipuplan.solvers.result import Progress, SolveResult, SolverSettings, SolveStatus

_STATUS = {
    cp_model.OPTIMAL: SolveStatus.OPTIMAL,
    cp_model.FEASIBLE: SolveStatus.FEASIBLE,
    cp_model.INFEASIBLE: SolveStatus.INFEASIBLE,
    cp_model.UNKNOWN: SolveStatus.NO_SOLUTION,
}


@dataclass
class LayoutChoices:
    """Owns the model's variables and decodes a solution."""

    model: cp_model.CpModel
    choose: list[list[cp_model.IntVar]]
    peak: cp_model.IntVar
    exchange: cp_model.LinearExpr
    changed: cp_model.LinearExpr

    def chosen(self, solver: cp_model.CpSolver) -> tuple[int, ...]:
        return tuple(next(c for c, var in enumerate(row) if solver.boolean_value(var)) for row in self.choose)

    def hint(self, choice: tuple[int, ...]) -> None:
        self.model.clear_hints()
        for row, chosen in zip(self.choose, choice):
            for c, var in enumerate(row):
                self.model.add_hint(var, c == chosen)


def usage_expressions(choose, rows: tuple[StepRow, ...]):
    for row in rows:
        standard = row.standard + sum(
            cp_model.LinearExpr.weighted_sum(choose[g], [int(x) for x in s]) for g, s, _ in row.terms
        )
        interleaved = row.interleaved + sum(
            cp_model.LinearExpr.weighted_sum(choose[g], [int(x) for x in i]) for g, _, i in row.terms
        )
        yield row, standard, interleaved


def build_model(problem: Problem) -> LayoutChoices:
    """Variables: one-hot candidate choice per group, and the peak. Constraints: the budget limits per kept step."""
    model = cp_model.CpModel()
    choose = [[model.new_bool_var(f"g{g}c{c}") for c in range(count)] for g, count in enumerate(problem.candidate_counts)]
    for row in choose:
        model.add_exactly_one(row)
    floor, ceiling = problem.lower_bound(), problem.upper_bound()
    peak = model.new_int_var(min(floor, ceiling), max(floor, ceiling), "peak")
    for _, standard, interleaved in usage_expressions(choose, problem.rows):
        model.add(standard + interleaved <= peak)
        for limit in problem.limits:
            model.add(limit.usage(standard, interleaved) <= limit.bytes)
    exchange = sum(cp_model.LinearExpr.weighted_sum(row, list(costs)) for row, costs in zip(choose, problem.exchange))
    changed = sum(
        cp_model.LinearExpr.weighted_sum([v for c, v in enumerate(row) if c != original], [size] * (len(row) - 1))
        for row, original, size in zip(choose, problem.input_choice, problem.group_sizes)
    )
    return LayoutChoices(model, choose, peak, exchange, changed)


class _Watcher(cp_model.CpSolverSolutionCallback):
    def __init__(self, phase: str, progress: Progress | None, started: float) -> None:
        super().__init__()
        self.phase, self.progress, self.started = phase, progress, started
        self.first: float | None = None

    def on_solution_callback(self) -> None:
        elapsed = time.perf_counter() - self.started
        if self.first is None:
            self.first = elapsed
        if self.progress is not None:
            self.progress(self.phase, int(self.objective_value), int(self.best_objective_bound), elapsed)


def _solver(settings: SolverSettings, seconds: float) -> cp_model.CpSolver:
    solver = cp_model.CpSolver()
    solver.parameters.random_seed = settings.seed
    if settings.deterministic:
        solver.parameters.num_workers = 1
        solver.parameters.max_deterministic_time = max(seconds, 0.1)
        solver.parameters.max_time_in_seconds = max(seconds, 0.1) * 20
    else:
        solver.parameters.num_workers = max(1, settings.workers)
        solver.parameters.max_time_in_seconds = max(seconds, 0.1)
    return solver


_BOUND_LINE = re.compile(r"^#Bound\s+\S+\s+best:(\S+)\s+next:\[(\d+),")


def _bound_reporter(phase: str, progress: Progress, started: float):
    """Turns CP-SAT's `#Bound` log lines into progress calls, so long proofs show the bound moving."""

    def report(line: str) -> None:
        match = _BOUND_LINE.match(line)
        if match and match.group(1) != "inf":
            progress(phase, int(float(match.group(1))), int(match.group(2)), time.perf_counter() - started)

    return report


def _run(choices: LayoutChoices, settings: SolverSettings, seconds: float, phase: str, progress, started):
    solver = _solver(settings, seconds)
    if progress is not None:
        solver.parameters.log_search_progress = True
        solver.parameters.log_to_stdout = False
        solver.log_callback = _bound_reporter(phase, progress, started)
    watcher = _Watcher(phase, progress, started)
    status = solver.solve(choices.model, watcher)
    if status == cp_model.MODEL_INVALID:
        raise RuntimeError(f"CP-SAT rejected the model: {choices.model.validate()}")
    return solver, _STATUS[status], watcher.first


def _in_exchange_bytes(progress: Progress | None, weight: int) -> Progress | None:
    """Phase 2's objective is exchange x weight + changes: report it in exchange bytes."""
    if progress is None:
        return None
    return lambda phase, objective, bound, elapsed: progress(phase, objective // weight, bound // weight, elapsed)


def solve(problem: Problem, settings: SolverSettings, progress: Progress | None = None) -> SolveResult:
    """Phase 1 minimises the peak; phase 2 fixes it and minimises exchange bytes, then changed values."""
    started = time.perf_counter()
    choices = build_model(problem)
    choices.hint(problem.input_choice)
    choices.model.minimize(choices.peak)
    if settings.dump_model:
        choices.model.export_to_file(settings.dump_model)
    built = time.perf_counter()
    proto = choices.model.proto
    sizes = {"variables": len(proto.variables), "constraints": len(proto.constraints), "steps_kept": len(problem.rows),
                 "steps_total": problem.steps_total, "build_seconds": built - started}
    solver, status, first = _run(choices, settings, settings.time_limit * 0.8, "peak", progress, built)
    if status in (SolveStatus.INFEASIBLE, SolveStatus.NO_SOLUTION):
        bound = int(solver.best_objective_bound) if status == SolveStatus.NO_SOLUTION else 0
        return SolveResult(status, problem.input_choice, None, bound, solve_seconds=time.perf_counter() - built,
                           first_solution_seconds=first, **sizes)
    best_peak, bound, choice = int(solver.objective_value), int(solver.best_objective_bound), choices.chosen(solver)
    choices.model.add(choices.peak <= best_peak)
    weight = sum(problem.group_sizes) + 1
    choices.model.minimize(choices.exchange * weight + choices.changed)
    choices.hint(choice)
    remaining = max(settings.time_limit - (time.perf_counter() - built), settings.time_limit * 0.2)
    solver2, status2, _ = _run(choices, settings, remaining, "exchange", _in_exchange_bytes(progress, weight), built)
    if status2 in (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE):
        choice = choices.chosen(solver2)
    return SolveResult(status, choice, best_peak, bound, solve_seconds=time.perf_counter() - built,
                       first_solution_seconds=first, exchange_bytes=problem.exchange_of(choice),
                       changed_values=problem.changed_of(choice), **sizes)


def _single_worker(seconds: float) -> cp_model.CpSolver:
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_time_in_seconds = max(seconds, 1.0)
    return solver


def explain_infeasible(problem: Problem, seconds: float) -> str:
    """Which budget at which step cannot be met, by how much, and the lowest reachable peak.

    Slack per budget row and minimise their sum: no enforcement literals on byte-sized rows
    (the CP-SAT 9.15 issue #5293), and every row with slack is a budget that cannot be met.
    """
    unbudgeted = problem.without_budgets()
    probe = build_model(unbudgeted)
    model = probe.model
    slacks = []
    for row, standard, interleaved in usage_expressions(probe.choose, problem.rows):
        for limit in problem.limits:
            slack = model.new_int_var(0, max(row.bounds()[1], 1), f"slack_{limit.name}_{row.step}")
            model.add(limit.usage(standard, interleaved) - slack <= limit.bytes)
            slacks.append((limit, row.step, slack))
    model.minimize(sum(s for *_, s in slacks))
    solver = _single_worker(seconds)
    solver.solve(model)
    violated = sorted(
        ((solver.value(s), limit.name, limit.bytes, step) for limit, step, s in slacks if solver.value(s) > 0), reverse=True
    )
    lowest = f"the lowest raw peak any layout reaches is {lowest_peak(unbudgeted, seconds):,} bytes"
    if not violated:
        return f"the budgets cannot be met together; {lowest}"
    excess, label, limit, step = violated[0]
    others = len(violated) - 1
    more = f" ({others} other budget-at-a-step limit{'s are' if others > 1 else ' is'} exceeded too)" if others else ""
    return f"the {label} ({limit:,} bytes) cannot be met at step {step}: it needs at least {limit + excess:,}{more}; {lowest}"


def lowest_peak(problem: Problem, seconds: float) -> int:
    """The best bound CP-SAT proves on the peak within `seconds`."""
    choices = build_model(problem)
    choices.model.minimize(choices.peak)
    solver = _single_worker(seconds)
    solver.solve(choices.model)
    return int(solver.best_objective_bound)
