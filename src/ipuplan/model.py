"""The CP-SAT model: data -> variables -> constraints -> objective -> solve -> extract.

`build_model` turns a candidate space into a model and a `LayoutChoices` handle;
`solve` runs the lexicographic objective of REPLAN.md (peak, then exchange bytes and
changed values at that peak) and returns a plain `SolveResult`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

import numpy as np
from ortools.sat.python import cp_model

from ipuplan.estimate import Budgets, estimate
from ipuplan.format import Plan
from ipuplan.layout import STANDARD
from ipuplan.space import CandidateSpace, FreeGroup

Progress = Callable[[str, int, int, float], None]
"""Called on every improving solution: phase, objective, bound, seconds since the solve began."""


class SolveStatus(str, Enum):
    OPTIMAL = "optimal"
    FEASIBLE = "feasible"
    """A solution, not proven optimal within the limit."""
    INFEASIBLE = "infeasible"
    """Proven: no choice meets the budgets."""
    NO_SOLUTION = "no_solution"
    """Timed out before any solution: neither feasible nor proven infeasible."""


_STATUS = {
    cp_model.OPTIMAL: SolveStatus.OPTIMAL,
    cp_model.FEASIBLE: SolveStatus.FEASIBLE,
    cp_model.INFEASIBLE: SolveStatus.INFEASIBLE,
    cp_model.UNKNOWN: SolveStatus.NO_SOLUTION,
}


@dataclass(frozen=True)
class StepRow:
    """One kept step: constant bytes per class and, per free group, bytes per candidate per class."""

    step: int
    standard: int
    interleaved: int
    terms: tuple[tuple[int, np.ndarray, np.ndarray], ...]
    """(group index, standard bytes per candidate, interleaved bytes per candidate)."""

    def bounds(self) -> tuple[int, int]:
        low = self.standard + self.interleaved + sum(int((s + i).min()) for _, s, i in self.terms)
        high = self.standard + self.interleaved + sum(int((s + i).max()) for _, s, i in self.terms)
        return low, high


@dataclass(frozen=True)
class SolverSettings:
    time_limit: float = 10.0
    workers: int = 2
    seed: int = 0
    deterministic: bool = False
    """One worker and a deterministic time limit: the same answer on every run."""
    dump_model: str | None = None
    """Write the phase-1 model (CP-SAT text proto) here, for debugging."""


@dataclass(frozen=True)
class SolveResult:
    status: SolveStatus
    choice: tuple[int, ...]
    """Chosen candidate index per free group (the input layouts when there is no solution)."""
    peak: int | None
    bound: int
    build_seconds: float
    solve_seconds: float
    first_solution_seconds: float | None
    variables: int
    constraints: int
    steps_kept: int
    steps_total: int
    exchange_bytes: int = 0
    changed_values: int = 0
    violations: tuple[str, ...] = field(default=())

    @property
    def gap(self) -> float | None:
        if self.peak is None or self.peak == 0:
            return None
        return (self.peak - self.bound) / self.peak


def step_rows(plan: Plan, space: CandidateSpace) -> list[StepRow]:
    """Per-step constant and variable bytes; steps dominated by another step are dropped."""
    group_of = {m: (g, position) for g, group in enumerate(space.free) for position, m in enumerate(group.members)}
    computed = estimate(plan).values
    fixed_bytes = {v.id: (computed[v.id].bytes, v.memory_class == STANDARD) for v in plan.values}
    scratch_groups: dict[int, list[int]] = {}
    for g, group in enumerate(space.free):
        for step in {entry[0] for candidate in group.candidates for entry in candidate.scratch}:
            scratch_groups.setdefault(step, []).append(g)
    cache: dict[tuple[int, tuple[int, ...]], tuple[np.ndarray, np.ndarray]] = {}
    rows = []
    for step in plan.steps:
        standard, interleaved = step.scratch.standard, step.scratch.interleaved
        live_members: dict[int, list[int]] = {}
        for value_id in step.live:
            if value_id in group_of:
                g, position = group_of[value_id]
                live_members.setdefault(g, []).append(position)
            else:
                size, is_standard = fixed_bytes[value_id]
                standard += size if is_standard else 0
                interleaved += 0 if is_standard else size
        terms = {}
        for g, positions in live_members.items():
            key = (g, tuple(positions))
            if key not in cache:
                cache[key] = _group_bytes(space.free[g], positions)
            terms[g] = cache[key]
        if step.index in scratch_groups:
            standard -= step.scratch.standard
            interleaved -= step.scratch.interleaved
            for g in scratch_groups[step.index]:
                extra_std, extra_il = _scratch_bytes(space.free[g], step.index)
                base_std, base_il = terms.get(g, (0, 0))
                terms[g] = (base_std + extra_std, base_il + extra_il)
        rows.append(StepRow(step.index, standard, interleaved, tuple((g, s, i) for g, (s, i) in sorted(terms.items()))))
    return _undominated(rows)


def _group_bytes(group: FreeGroup, positions: list[int]) -> tuple[np.ndarray, np.ndarray]:
    standard = np.zeros(len(group.candidates), dtype=np.int64)
    interleaved = np.zeros(len(group.candidates), dtype=np.int64)
    for c, candidate in enumerate(group.candidates):
        for p in positions:
            if candidate.layouts[p].memory_class == STANDARD:
                standard[c] += candidate.value_bytes[p].bytes
            else:
                interleaved[c] += candidate.value_bytes[p].bytes
    return standard, interleaved


def _scratch_bytes(group: FreeGroup, step: int) -> tuple[np.ndarray, np.ndarray]:
    """Scratch of `step` under each candidate (a candidate that does not name the step leaves none)."""
    standard = np.zeros(len(group.candidates), dtype=np.int64)
    interleaved = np.zeros(len(group.candidates), dtype=np.int64)
    for c, candidate in enumerate(group.candidates):
        for index, std, il in candidate.scratch:
            if index == step:
                standard[c], interleaved[c] = std, il
    return standard, interleaved


def _undominated(rows: list[StepRow]) -> list[StepRow]:
    """Drop a step whose every term is matched by an identical term of a step with more constant bytes."""
    best: dict[tuple, list[StepRow]] = {}
    for row in rows:
        key = tuple((g, s.tobytes(), i.tobytes()) for g, s, i in row.terms)
        front = best.setdefault(key, [])
        if any(o.standard >= row.standard and o.interleaved >= row.interleaved for o in front):
            continue
        front[:] = [o for o in front if not (row.standard >= o.standard and row.interleaved >= o.interleaved)]
        front.append(row)
    kept = sorted((row for front in best.values() for row in front), key=lambda r: r.step)
    return kept


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


def usage_expressions(choose, rows: list[StepRow]):
    for row in rows:
        standard = row.standard + sum(
            cp_model.LinearExpr.weighted_sum(choose[g], [int(x) for x in s]) for g, s, _ in row.terms
        )
        interleaved = row.interleaved + sum(
            cp_model.LinearExpr.weighted_sum(choose[g], [int(x) for x in i]) for g, _, i in row.terms
        )
        yield row, standard, interleaved


def build_model(space: CandidateSpace, rows: list[StepRow], budgets: Budgets | None, peak_ceiling: int) -> LayoutChoices:
    """Variables: one-hot candidate choice per group, and the peak. Constraints: budgets per kept step."""
    model = cp_model.CpModel()
    choose = [
        [model.new_bool_var(f"g{g}c{c}") for c in range(len(group.candidates))] for g, group in enumerate(space.free)
    ]
    for row in choose:
        model.add_exactly_one(row)
    floor = max((row.bounds()[0] for row in rows), default=0)
    peak = model.new_int_var(min(floor, peak_ceiling), max(floor, peak_ceiling), "peak")
    for _, standard, interleaved in usage_expressions(choose, rows):
        model.add(standard + interleaved <= peak)
        if budgets is not None:
            model.add(standard <= budgets.standard_limit)
            model.add(interleaved <= budgets.interleaved_budget_bytes)
            model.add(standard + interleaved <= budgets.total_limit)
    exchange = sum(
        cp_model.LinearExpr.weighted_sum(choose[g], [c.exchange_bytes for c in group.candidates])
        for g, group in enumerate(space.free)
    )
    changed = sum(
        cp_model.LinearExpr.weighted_sum(choose[g][1:], [len(group.members)] * (len(group.candidates) - 1))
        for g, group in enumerate(space.free)
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


def solve(
    plan: Plan,
    space: CandidateSpace,
    budgets: Budgets | None,
    settings: SolverSettings = SolverSettings(),
    progress: Progress | None = None,
) -> SolveResult:
    """Phase 1 minimises the peak; phase 2 fixes it and minimises exchange bytes, then changed values."""
    started = time.perf_counter()
    rows = step_rows(plan, space)
    input_choice = tuple(0 for _ in space.free)
    ceiling = max((row.bounds()[1] for row in rows), default=0)
    choices = build_model(space, rows, budgets, ceiling)
    choices.hint(input_choice)
    choices.model.minimize(choices.peak)
    if settings.dump_model:
        choices.model.export_to_file(settings.dump_model)
    built = time.perf_counter()
    proto = choices.model.proto
    sizes = dict(variables=len(proto.variables), constraints=len(proto.constraints), steps_kept=len(rows),
                 steps_total=len(plan.steps), build_seconds=built - started)
    solver, status, first = _run(choices, settings, settings.time_limit * 0.8, "peak", progress, built)
    if status in (SolveStatus.INFEASIBLE, SolveStatus.NO_SOLUTION):
        bound = int(solver.best_objective_bound) if status == SolveStatus.NO_SOLUTION else 0
        return SolveResult(status, input_choice, None, bound, solve_seconds=time.perf_counter() - built,
                           first_solution_seconds=first, **sizes)
    best_peak, bound, choice = int(solver.objective_value), int(solver.best_objective_bound), choices.chosen(solver)
    choices.model.add(choices.peak <= best_peak)
    weight = sum(len(g.members) for g in space.free) + 1
    choices.model.minimize(choices.exchange * weight + choices.changed)
    choices.hint(choice)
    remaining = max(settings.time_limit - (time.perf_counter() - built), settings.time_limit * 0.2)
    solver2, status2, _ = _run(choices, settings, remaining, "exchange", _in_exchange_bytes(progress, weight), built)
    if status2 in (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE):
        choice = choices.chosen(solver2)
    exchange = sum(space.free[g].candidates[c].exchange_bytes for g, c in enumerate(choice))
    changed = sum(len(space.free[g].members) for g, c in enumerate(choice) if c)
    return SolveResult(status, choice, best_peak, bound, solve_seconds=time.perf_counter() - built,
                       first_solution_seconds=first, exchange_bytes=exchange, changed_values=changed, **sizes)
