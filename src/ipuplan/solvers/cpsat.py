"""CP-SAT backend: data -> variables -> constraints -> objective -> solve -> extract.

`build_model` turns a `Problem` into a model and a `LayoutChoices` handle; `solve` runs the
objective's phases in order (REPLAN.md: `peak` minimises the peak, then exchange bytes and
changed values at that peak; `fit` only the latter under the budgets), each phase fixing its
optimum for the next and hinting its solution. With soft budgets (best effort) a first phase
minimises the total excess over the budgets. `pareto_front` walks the peak / exchange trade-off;
`solvers.conflict` explains infeasible budgets.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial

import numpy as np

from ipuplan.model.objective import OBJECTIVES, Objective, Term
from ipuplan.model.problem import FORBIDDEN, Problem, StepRow
from ipuplan.solvers import wcsp
from ipuplan.solvers.bounds import WindowBound, window_bound
from ipuplan.solvers.construct import cheapest, construct, tie_bound, tie_value
from ipuplan.solvers.deadline import FLOOR, part
from ipuplan.solvers.lagrange import STALE_ROUNDS, lagrangian, least_bytes
from ipuplan.solvers.linear import LinearRows, PairColumns, RuleRows, linear_rows, pair_columns
from ipuplan.solvers.lns import repaired, search
from ipuplan.solvers.ortools_import import cp_model
from ipuplan.solvers.reduce import Reduced, on_undominated, pairwise, reduce
from ipuplan.solvers.result import FrontPoint, Progress, SolveResult, SolverSettings, SolveStatus, model_size

STATUS = {
    cp_model.OPTIMAL: SolveStatus.OPTIMAL,
    cp_model.FEASIBLE: SolveStatus.FEASIBLE,
    cp_model.INFEASIBLE: SolveStatus.INFEASIBLE,
    cp_model.UNKNOWN: SolveStatus.NO_SOLUTION,
}
SOLVED = (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE)


@dataclass
class LayoutChoices:
    """Owns the model's variables and decodes a solution."""

    model: cp_model.CpModel
    choose: list[list[cp_model.IntVar]]
    peak: cp_model.IntVar
    exchange: cp_model.LinearExpr
    changed: cp_model.LinearExpr
    over: tuple[cp_model.IntVar, ...] = ()
    """Soft budgets: per limit, how far the worst row may exceed it (empty: the budgets are hard)."""
    terms: int = 0
    """Entries of the rows and the shared sums' definitions (counted while building: reading
    `constraint.linear` of the proto would turn other constraint kinds into empty linear ones)."""
    rows: LinearRows | None = None
    problem: Problem | None = None
    shared: tuple[cp_model.IntVar, ...] = ()
    """One integer per shared sum of merged terms (`rows.sums`)."""
    pairs: PairColumns | None = None
    pair_booleans: tuple[cp_model.IntVar, ...] = ()
    """One boolean per pair of candidates an edge may choose (`linear.pair_columns`)."""

    @property
    def ties(self) -> cp_model.LinearExpr:
        """The objective's terms after the peak as one: exchange bytes x tie weight + changed values (only where
        `problem.ties_combine`: elsewhere its coefficients may overflow)."""
        return self.exchange * self.problem.tie_weight + self.changed

    def chosen(self, solver: cp_model.CpSolver) -> tuple[int, ...]:
        return chosen_candidates(solver, self.choose)

    def hint(self, choice: tuple[int, ...]) -> None:
        """A complete hint (CP-SAT uses only complete ones as a solution at once): the booleans of `choice`,
        the shared sums, the peak and the excess over each soft budget they give."""
        hint_choice(self.model, self.choose, choice)
        if self.rows is None:
            return
        booleans = self.rows.booleans_of(choice)
        usage = self.problem.usage(choice)
        excess = usage.worst_excess(self.problem.limits) if self.over else ()
        _add_hints(self.model, [*self.pair_booleans, *self.shared, self.peak, *self.over],
                   [*self.pairs.values(booleans).tolist(), *self.rows.sums.values(booleans).tolist(), usage.peak,
                    *excess])


def choice_variables(model: cp_model.CpModel, counts: tuple[int, ...]) -> list[list[cp_model.IntVar]]:
    """One boolean per candidate of each group, exactly one of them true."""
    choose = [[model.new_bool_var(f"g{g}c{c}") for c in range(count)] for g, count in enumerate(counts)]
    for row in choose:
        model.add_exactly_one(row)
    return choose


def chosen_candidates(solver: cp_model.CpSolver, choose) -> tuple[int, ...]:
    """The candidate per group of the solver's solution (read only when it has one), from the response's values
    at once (a call per boolean took 0.26 s at 50k values)."""
    solution = np.asarray(solver.response_proto.solution, dtype=np.int64)
    return tuple(next(c for c, var in enumerate(row) if solution[var.index]) for row in choose)


def hint_choice(model: cp_model.CpModel, choose, choice: tuple[int, ...]) -> None:
    """A complete hint: every candidate boolean of every group."""
    model.clear_hints()
    _add_hints(model, [var for row in choose for var in row],
               [int(c == picked) for row, picked in zip(choose, choice) for c in range(len(row))])


def _add_hints(model: cp_model.CpModel, variables: list[cp_model.IntVar], values: list[int]) -> None:
    """Hints written straight into the proto: `add_hint` costs a Python call per variable (3.7 s at 50k values)."""
    model.proto.solution_hint.vars.extend([var.index for var in variables])
    model.proto.solution_hint.values.extend(values)


def usage_expressions(choose, rows: tuple[StepRow, ...]):
    for row in rows:
        standard = row.standard + sum(
            cp_model.LinearExpr.weighted_sum(choose[g], [int(x) for x in s]) for g, s, _ in row.terms
        )
        interleaved = row.interleaved + sum(
            cp_model.LinearExpr.weighted_sum(choose[g], [int(x) for x in i]) for g, _, i in row.terms
        )
        yield row, standard, interleaved


def build_model(problem: Problem, soft: bool = False) -> LayoutChoices:
    """Variables: one-hot candidate choice per group, the shared sums of merged terms, the peak, and a boolean per
    pair of candidates an edge may choose. Constraints: the rows of `linear.linear_rows` (the peak and the budgets
    per kept step, reduced); each edge's pairs tied to its candidates, forbidden candidates false (`pair_columns`).

    `soft`: each limit gets an excess variable (XLA's "overbudget") that its rows may use, instead
    of being hard; plain rows either way, no enforcement literal (CP-SAT 9.15 issue #5293).
    """
    model = cp_model.CpModel()
    choose = choice_variables(model, problem.candidate_counts)
    rows = linear_rows(problem, soft)
    shared = [model.new_int_var(0, int(top), f"sum{k}") for k, top in enumerate(rows.sums.upper)]
    _add_definitions(model, rows, [v.index for v in shared])
    floor, ceiling = problem.lower_bound(), problem.upper_bound()
    peak = model.new_int_var(min(floor, ceiling), max(floor, ceiling), "peak")
    if rows.peak_cap is not None:
        model.add(peak <= rows.peak_cap)
    over = (tuple(model.new_int_var(0, max(ceiling * 2, 1), f"over_{limit.name}") for limit in problem.limits)
            if soft else ())
    for rule_rows in rows.rules:
        _add_rule(model, rule_rows, problem.limits, peak.index, [v.index for v in over])
    variables = [v for row in choose for v in row]
    pairs = pair_columns(problem, rows.first)
    paired = add_pairs(model, pairs, [v.index for v in variables])
    exchange = cp_model.LinearExpr.weighted_sum(variables + paired, [
        int(x) if x < FORBIDDEN else 0 for costs in problem.exchange for x in costs] + pairs.cost.tolist())
    changed = cp_model.LinearExpr.weighted_sum(variables, [0 if c == original else size for original, size, row in zip(
        problem.input_choice, problem.group_sizes, choose) for c in range(len(row))])
    return LayoutChoices(model, choose, peak, exchange, changed, over, rows.entries, rows, problem, tuple(shared),
                         pairs, tuple(paired))


def add_pairs(model: cp_model.CpModel, pairs: PairColumns, booleans: list[int]) -> list[cp_model.IntVar]:
    """The pair booleans, each candidate's pairs on an edge summing to its boolean; forbidden candidates false."""
    paired = [model.new_bool_var(f"pair{k}") for k in range(pairs.count)]
    for column, members in pairs.equalities:
        _add_linear(model, [paired[k].index for k in members.tolist()] + [booleans[column]],
                    [1] * len(members) + [-1], 0, 0)
    for column in pairs.forbidden.tolist():
        _add_linear(model, [booleans[column]], [1], 0, 0)
    return paired


_FLOOR = -(2**40)
"""Lower end of a `<=` row's domain: below anything a row's left-hand side can reach (bytes per tile are far
below 2^40), and small enough that CP-SAT without presolve does not overflow (-2^53 made it report
a feasible model infeasible)."""


def _add_linear(model: cp_model.CpModel, variables: list[int], coefficients: list[int], low: int, high: int) -> None:
    """`low <= coefficients . variables <= high` written straight into the proto: the expression API costs a
    Python object per term, minutes at 50k values."""
    constraint = model.proto.constraints.add()
    constraint.linear.vars.extend(variables)
    constraint.linear.coeffs.extend(coefficients)
    constraint.linear.domain.extend([low, high])


def _add_definitions(model: cp_model.CpModel, rows: LinearRows, shared: list[int]) -> None:
    """Each shared sum equals its merged terms' bytes: `sum - coefficients . booleans = 0`."""
    columns, coefficients = rows.sums.columns.tolist(), (-rows.sums.coefficients).tolist()
    for k, (a, b) in enumerate(zip(rows.sums.indptr[:-1].tolist(), rows.sums.indptr[1:].tolist())):
        _add_linear(model, [shared[k], *columns[a:b]], [1, *coefficients[a:b]], 0, 0)


def _add_rule(model: cp_model.CpModel, rule_rows: RuleRows, limits, peak: int, over: list[int]) -> None:
    """The rule's rows: `usage <= peak`, or `usage <= cap` (`<= cap + over` with soft budgets)."""
    columns, coefficients = rule_rows.columns.tolist(), rule_rows.coefficients.tolist()
    rule = rule_rows.rule
    extra = [peak] if rule.limit is None else [over[rule.limit]] if over else []
    cap = 0 if rule.limit is None else limits[rule.limit].bytes
    tail = [-1] * len(extra)
    for constant, a, b in zip(rule_rows.constant.tolist(), rule_rows.indptr[:-1].tolist(),
                              rule_rows.indptr[1:].tolist()):
        _add_linear(model, columns[a:b] + extra, coefficients[a:b] + tail, _FLOOR, cap - constant)


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


PRESOLVE_TERMS = 250_000
"""Above this many row terms and definitions CP-SAT's presolve alone outlasts a 10 s limit (10k values, 463,838
terms: 8 s, then no solution); without it the hinted solution is there in 0.75 s and the search improves on it."""
LARGE_MODEL_TERMS = 2_000_000
"""Row terms at most for the whole model of a `fit` with edges to be built and solved (`whole_model_fits`)."""


PAIRWISE_WORKERS = 8
"""Workers at least for a model with pair booleans: CP-SAT's portfolio closes them with its LP-based workers
(max_lp, reduced_costs, core), which 2 workers do not run (IOPDDL B: 2 workers never lifted the bound off the
sum of minima in 60 s; 8 on the same 2 cores proved the optimum in 40 s)."""


def _solver(settings: SolverSettings, seconds: float, large: bool = False, paired: bool = False) -> cp_model.CpSolver:
    solver = cp_model.CpSolver()
    solver.parameters.random_seed = settings.seed
    solver.parameters.cp_model_presolve = settings.presolve and not large
    if paired:  # probing the pair booleans took 11 of presolve's 18 s on IOPDDL B, and found nothing the search needs
        solver.parameters.cp_model_probing_level = 0
    # the wall limit, never past the run's deadline, bounds every solve; with one worker the deterministic limit
    # (usually hit first) keeps it reproducible
    solver.parameters.max_time_in_seconds = settings.wall(max(seconds, 0.1))
    if settings.deterministic:
        solver.parameters.num_workers = 1
        solver.parameters.max_deterministic_time = max(seconds, 0.1)
    else:
        solver.parameters.num_workers = max(1, settings.workers, PAIRWISE_WORKERS if paired else 1)
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
    solver = _solver(settings, seconds, choices.terms > PRESOLVE_TERMS, bool(choices.pair_booleans))
    if progress is not None:
        solver.parameters.log_search_progress = True
        solver.parameters.log_to_stdout = False
        solver.log_callback = _bound_reporter(phase, progress, started)
    watcher = _Watcher(phase, progress, started)
    status = solver.solve(choices.model, watcher)
    if status == cp_model.MODEL_INVALID:
        raise RuntimeError(f"CP-SAT rejected the model: {choices.model.validate()}")
    return solver, STATUS[status], watcher.first


def _scaled(progress: Progress | None, weight: int) -> Progress | None:
    """A phase whose objective is a term x weight + a tie-breaker reports the term alone, and only when
    what it shows changes (the tie-breaker alone improving would repeat the same line)."""
    if progress is None:
        return None
    shown: list[tuple[str, int, int]] = []

    def report(phase: str, objective: int, bound: int, elapsed: float) -> None:
        figures = (phase, objective // weight, bound // weight)
        if shown != [figures]:
            shown[:] = [figures]
            progress(phase, figures[1], figures[2], elapsed)

    return report


@dataclass(frozen=True)
class Phase:
    """One term of a lexicographic objective: minimised, then fixed at its optimum for the next phase."""

    name: str
    expression: cp_model.LinearExprT
    weight: int = 1
    """The expression is the term x weight + a tie-breaker below the weight: progress shows the term."""


def ties_phases(choices: LayoutChoices, problem: Problem) -> list[Phase]:
    """Exchange bytes, then changed values: one phase (`ties`) where the weighted sum is safe
    (`Problem.ties_combine`, it is faster), else one each, the exchange fixed at what its phase found."""
    if problem.ties_combine:
        return [Phase("exchange", choices.ties, problem.tie_weight)]
    if not any(problem.group_sizes):  # no choice changes a value: the changed phase has nothing to find
        return [Phase("exchange", choices.exchange)]
    return [Phase("exchange", choices.exchange), Phase("changed", choices.changed)]


def phases(choices: LayoutChoices, problem: Problem, objective: Objective) -> list[Phase]:
    """The objective's terms in order (`OBJECTIVES`), exchange and changed values after the peak (`ties_phases`);
    soft budgets put the total excess first."""
    ties = ties_phases(choices, problem)
    ordered = [Phase("peak", choices.peak), *ties] if Term.PEAK in OBJECTIVES[objective] else ties
    return ([Phase("excess", sum(choices.over))] if choices.over else []) + ordered


@dataclass(frozen=True)
class PhaseOutcome:
    phase: Phase
    status: SolveStatus
    value: int
    bound: int


def _phase_seconds(limit: float, before_last: int, elapsed: float, last: bool) -> float:
    """Phases before the last share their part of the limit; the last gets what is left, at least the rest."""
    together = part("phases before the last", limit)
    return max(limit - elapsed, limit - together) if last else together / before_last


def run_phases(choices: LayoutChoices, ordered: list[Phase], settings: SolverSettings, progress, built: float,
               first_only: bool = False):
    """Each phase in turn from the hinted start: (outcomes, last choice, first-solution seconds, deterministic units
    used); stops at the first phase without a solution (its outcome has value 0). `first_only`: the first phase
    alone, with the seconds it has among them all."""
    outcomes: list[PhaseOutcome] = []
    choice, first = None, None
    units = 0.0  # deterministic time the phases used: with one worker the shares hang on it, not on the clock
    for index, phase in enumerate(ordered):
        last = index == len(ordered) - 1
        spent = units if settings.deterministic else time.perf_counter() - built
        seconds = _phase_seconds(settings.time_limit, len(ordered) - 1, spent, last)
        choices.model.minimize(phase.expression)
        if choice is not None:
            choices.hint(choice)
        elif settings.dump_model:
            choices.model.export_to_file(settings.dump_model)
        solver, status, found = _run(choices, settings, seconds, phase.name, _scaled(progress, phase.weight), built)
        units += solver.response_proto.deterministic_time
        first = found if index == 0 else first
        if status not in SOLVED:
            bound = int(solver.best_objective_bound) if status == SolveStatus.NO_SOLUTION else 0
            outcomes.append(PhaseOutcome(phase, status, 0, bound // phase.weight))
            break
        value = int(solver.value(phase.expression))  # exact: the objective value is a double
        outcomes.append(PhaseOutcome(phase, status, value // phase.weight,
                                     int(solver.best_objective_bound) // phase.weight))
        choice = choices.chosen(solver)
        if first_only:
            break
        if not last:
            choices.model.add(phase.expression <= value)
    return outcomes, choice, first, units


@dataclass(frozen=True)
class Start:
    """The phase-1 hint: the constructive choice when it beats the input, and what it already proves."""

    choice: tuple[int, ...]
    constructed: bool
    """The hint is the constructive choice (not the input)."""
    peak_proven: bool
    """It fits and its peak is the lower bound: the peak phase has nothing to find."""
    proven: bool
    """It also has the least exchange x weight + changes any choice can have: every term is optimal."""
    bound: int
    """The best lower bound on the peak known before the solve (per row, or from windows)."""
    windows: WindowBound | None = None
    first_valid: float | None = None
    """Seconds from the start's beginning to its first valid choice, when it reported one."""


def _rank(problem: Problem, choice: tuple[int, ...], objective: Objective) -> tuple:
    """Forbidden picks and budget excess first, then the objective's terms (`Problem.objective_key`)."""
    invalid = (problem.forbidden_in(choice), problem.usage(choice).violation(problem.limits))
    return (*invalid, *problem.objective_key(choice, objective))


def start(problem: Problem, objective: Objective, soft: bool = False, settings: SolverSettings | None = None,
          on_valid: Callable[[tuple[int, ...]], None] | None = None) -> Start:
    """The better of the constructive choice (for a `fit` with edges the searched start, whose first valid choice
    `on_valid` hears of) and the input (by `_rank`), and what it already proves; with `settings` (and the peak
    objective, hard budgets) window bounds try to prove its peak optimal."""
    began = time.perf_counter()
    found: list[float] = []

    def heard(choice: tuple[int, ...]) -> None:
        found.append(time.perf_counter() - began)
        if on_valid is not None:
            on_valid(choice)

    pairwise_fit = _pairwise_fit(problem, objective, soft)
    given = None if settings is None else settings.start
    built = searched_start(problem, settings, heard) if pairwise_fit else construct(problem, objective, given=given)
    better = _rank(problem, built, objective) < _rank(problem, problem.input_choice, objective)
    hint = built if better else problem.input_choice
    usage = problem.usage(hint)
    fits = problem.valid(hint) and not soft
    windows = None
    if settings is not None and objective == Objective.PEAK and not soft and usage.peak > problem.lower_bound():
        windows = window_bound(problem, _without_windows, settings, usage.peak if fits else problem.upper_bound())
    bound = windows.bound if windows else problem.lower_bound()
    peak_proven = fits and (objective == Objective.FIT or usage.peak <= bound)
    return Start(hint, better, peak_proven, peak_proven and tie_value(problem, hint) == tie_bound(problem), bound,
                 windows, found[0] if found else None)


EXCESS_SHARE = 2 / 3
"""Of a repair neighbourhood's work (`repair_part`), the most its least excess takes: the exchange gets the rest."""
REPAIR_UNITS, REPAIR_STRETCH = 0.9, 3.0
"""A repair neighbourhood's work per second it is given (`repair_part`), in CP-SAT's deterministic units: what two
workers on a quiet 2-core machine do in a second (IOPDDL K: 2.7 units in 3 s). A busy machine stretches its wall
time, up to REPAIR_STRETCH times the seconds, rather than cut its search: K's neighbourhoods got 0.25 units a second
beside two busy loops, and the choices they repaired cost up to 1.7x their inputs'."""
WHOLE_MODEL_PAIRS = 300_000
"""Pair booleans at most for the whole model to be built and solved after the neighbourhoods (IOPDDL B: 82k, A: 2 M;
presolve alone outlasts a minute on the latter)."""


def _pairwise_fit(problem: Problem, objective: Objective, soft: bool) -> bool:
    """`fit` of a problem with edges and hard budgets: the Lagrangian start and the neighbourhood search serve it."""
    return objective == Objective.FIT and bool(problem.edges) and not soft


def searched_start(problem: Problem, settings: SolverSettings | None,
                   on_valid: Callable[[tuple[int, ...]], None] | None = None) -> tuple[int, ...]:
    """The Lagrangian start (`lagrange.lagrangian`) from the input, from each group's cheapest candidate and from its
    least bytes (`lagrange.least_bytes`), in that order but those within the limits first, and among them the fewest
    forbidden picks first (IOPDDL K: its least bytes' 6,007 are shed in 10 s, its cheapest is stuck), until one is
    valid. One over the limits needs `relieve`'s moves, each a pass over the groups of a row: from the input of IOPDDL
    A, 16 T over the limit, a round took 140 s. They share one deadline, the "lagrangian start" share of the time limit
    (none without settings or when deterministic: their rounds are capped anyway), and one GroupRows
    (`lagrange.group_rows`, kept for the neighbourhood search): a start that is stuck leaves the rest to the next. A
    round's choice over the limits is repaired by CP-SAT neighbourhoods (`lns.repaired`), and rounds that stall end
    (STALE_ROUNDS: the neighbourhood search has the time), where the whole model does not fit. Then the constructive
    choice when the start still breaks a budget or makes a forbidden pick and is better (only where the whole model
    fits: the repair's moves each sort the rows, 66 s on IOPDDL A)."""
    deadline = None if settings is None or settings.deterministic else time.perf_counter() + settings.wall(
        part("lagrangian start", settings.time_limit))
    seed = settings.seed if settings else 0
    begins = [tuple(begin(problem)) for begin in (lambda problem: problem.input_choice, cheapest, least_bytes)]
    found = None
    # where the whole model fits, its solve repairs (IOPDDL G: 26 s to the proof, 47 s with repairs in the rounds)
    repair = None if whole_model_fits(problem) else partial(repaired, problem, seed=seed,
                                                            repair_part=partial(repair_part, settings=settings))
    if repair is not None and deadline is not None and wcsp.available():
        ends = time.perf_counter() + settings.wall(part("penalised start", settings.time_limit))
        found = wcsp.penalised(problem, ends, seed=seed, on_valid=on_valid, repair=repair, processes=settings.workers)
        if found is not None and problem.valid(found):
            return found
        # nothing valid: the Lagrangian's share counts from now, not from before the penalised rounds
        deadline = time.perf_counter() + settings.wall(part("lagrangian start", settings.time_limit))
    for begin in sorted(begins, key=lambda choice: (problem.usage(choice).violation(problem.limits) > 0,
                                                    problem.forbidden_in(choice))):
        again = lagrangian(problem, begin, seed=seed, deadline=deadline, on_valid=on_valid, repair=repair,
                           stale_rounds=None if repair is None else STALE_ROUNDS)
        found = again if found is None else min(found, again, key=lambda choice: _rank(problem, choice, Objective.FIT))
        if problem.valid(found):
            return found
    if whole_model_fits(problem):
        built = construct(problem, Objective.FIT)
        return min(found, built, key=lambda choice: _rank(problem, choice, Objective.FIT))
    return found


def whole_model_fits(problem: Problem) -> bool:
    """Whether the whole model is small enough to build and presolve within a time limit (WHOLE_MODEL_PAIRS,
    LARGE_MODEL_TERMS)."""
    pairs = sum(int(np.count_nonzero(edge.costs < FORBIDDEN)) for edge in problem.edges)
    return pairs <= WHOLE_MODEL_PAIRS and problem.table.occurrence_count <= LARGE_MODEL_TERMS


PROXY_TIES_ENTRIES = 250_000
"""Row entries (each candidate of each term at each row it occurs) above which, once the start's peak is proven, the
start is the answer (`SolveResult.ties_left`, said in the run's note): the phases after the peak minimise the model's
exchange proxy, which the plan's exact figure does not follow there (and the exact stage,
`replan.pipeline.exchange_phase`, prices at most EXACT_AUTO_CANDIDATES candidates: 51,585 at 10k). At 10k values
(1.1 M entries after reduction) the CP-SAT phase ran 8 s and found nothing with presolve, reached 42.92 G from
43.99 G in 6 s at +450 MB with 2 workers (+850 MB at 50k) and nothing with 1; a one-group descent of the proxy
reached 41.89 G but raised the written plan's exact exchange by 4.8% (37.94 G -> 39.76 G; 50k: 189.7 G ->
198.9 G). The largest plan of models/ has 49,107."""


def _beyond_proxy_ties(problem: Problem) -> bool:
    return problem.table.candidate_entries > PROXY_TIES_ENTRIES


def _without_windows(problem: Problem, settings: SolverSettings) -> SolveResult:
    """A window's solve: its bound is all `window_bound` reads (the phases after the peak took 0.15-0.2 s of a
    50,160-value plan's run, their choice dropped)."""
    return solve_reduced(problem, settings, windows=False, bound_only=True)


def _no_worse_than_hint(choices: LayoutChoices, problem: Problem, begun: Start, objective: Objective,
                        soft: bool) -> None:
    """A hint that fits caps the first term at its value: whatever CP-SAT returns is at least as good
    (at 10k values, with presolve, it otherwise returned a peak 23% above the hint's)."""
    usage = problem.usage(begun.choice)
    if soft or not problem.valid(begun.choice):
        return
    exchange, changed = tie_value(problem, begun.choice)
    if objective == Objective.PEAK:
        choices.model.add(choices.peak <= usage.peak)
    elif problem.ties_combine:
        choices.model.add(choices.ties <= exchange * problem.tie_weight + changed)
    else:
        choices.model.add(choices.exchange <= exchange)


def _constructed_result(problem: Problem, begun: Start, settings: SolverSettings, status: SolveStatus, timing: dict,
                        sizes: dict) -> SolveResult:
    """The hint as the answer: proven (the solver was skipped) or the best known (the solver found nothing)."""
    usage = problem.usage(begun.choice)
    bound = usage.peak if begun.peak_proven and settings.objective == Objective.PEAK else begun.bound
    return SolveResult(status, begun.choice, usage.peak, bound, exchange_bytes=problem.exchange_of(begun.choice),
                       changed_values=problem.changed_of(begun.choice), objective=settings.objective,
                       exchange_bound=problem.exchange_of(begun.choice) if status == SolveStatus.OPTIMAL
                       and settings.objective == Objective.FIT else None, constructed=begun.constructed,
                       **timing, **sizes)


def solve_reduced(problem: Problem, settings: SolverSettings, progress: Progress | None = None,
                  soft: bool = False, windows: bool = True, bound_only: bool = False) -> SolveResult:
    """The objective's phases in order (`peak`: the peak, then exchange bytes and changed values at that
    peak; `fit`: exchange bytes and changed values under the budgets); `soft`: least total excess first.
    The hint is the constructive choice when it beats the input; when window bounds (`windows`) or the
    per-row bound meet its peak the peak phase is skipped, when it meets every bound the solve is skipped,
    and when the solver finds nothing in time it is the answer (status feasible). `bound_only`: the first phase alone
    (its status and bound are the same; the choice is not the later phases')."""
    started = time.perf_counter()

    def on_valid(choice: tuple[int, ...]) -> None:
        if progress is not None:
            progress("start", problem.exchange_of(choice), 0, time.perf_counter() - started)

    begun = start(problem, settings.objective, soft, settings if windows else None, on_valid)
    solved = begun.windows.windows if begun.windows else 0
    if progress is not None and solved:
        progress("windows", problem.usage(begun.choice).peak, begun.bound, time.perf_counter() - started)
    if begun.windows is not None and begun.windows.infeasible:
        return SolveResult(SolveStatus.INFEASIBLE, problem.input_choice, None, begun.bound,
                           solve_seconds=time.perf_counter() - started, first_solution_seconds=None,
                           objective=settings.objective, windows=solved, **model_size(problem))
    return replace(_solve_from(problem, settings, progress, soft, begun, started, bound_only), windows=solved)


solve = on_undominated(solve_reduced)
"""`solve(problem, settings, progress, soft=False)`: `solve_reduced` over the undominated candidates."""


def _solve_from(problem: Problem, settings: SolverSettings, progress: Progress | None, soft: bool, begun: Start,
                started: float, bound_only: bool = False) -> SolveResult:
    if begun.proven or (bound_only and begun.peak_proven and settings.objective == Objective.PEAK):
        elapsed = time.perf_counter() - started
        if progress is not None:
            progress("constructive", problem.usage(begun.choice).peak, begun.bound, elapsed)
        return _constructed_result(problem, begun, settings, SolveStatus.OPTIMAL, {
            "solve_seconds": elapsed, "first_solution_seconds": elapsed}, model_size(problem))
    if (begun.peak_proven and settings.objective == Objective.PEAK and not soft
            and (not settings.proxy_ties or _beyond_proxy_ties(problem))):
        elapsed = time.perf_counter() - started
        if progress is not None:
            progress("peak", problem.usage(begun.choice).peak, begun.bound, elapsed)
        return replace(_constructed_result(problem, begun, settings, SolveStatus.OPTIMAL, {
            "solve_seconds": elapsed, "first_solution_seconds": elapsed}, model_size(problem)), ties_left=True)
    first = None
    if _pairwise_fit(problem, settings.objective, soft):
        begun, settings, first = _neighbourhoods(problem, settings, progress, begun, started)
        if not whole_model_fits(problem):
            elapsed = time.perf_counter() - started
            return _constructed_result(problem, begun, settings,
                                       SolveStatus.FEASIBLE if problem.valid(begun.choice) else
                                       SolveStatus.NO_SOLUTION, {"solve_seconds": elapsed,
                                                                 "first_solution_seconds": first}, model_size(problem))
    choices = build_model(problem, soft)
    choices.hint(begun.choice)
    ordered = phases(choices, problem, settings.objective)
    _no_worse_than_hint(choices, problem, begun, settings.objective, soft)
    if begun.peak_proven and settings.objective == Objective.PEAK:
        # The hint's peak is the lower bound: go straight to the exchange phase.
        ordered = [phase for phase in ordered if phase.name != "peak"]
    built = time.perf_counter()
    if not settings.deterministic:
        # the start and the build took their share of the limit (the deterministic units stay whole: reproducible)
        settings = replace(settings, time_limit=max(settings.time_limit - (built - started), 0.2 * settings.time_limit))
    proto = choices.model.proto
    sizes = model_size(problem, len(proto.variables), len(proto.constraints), built - started, choices.rows)
    outcomes, choice, found, units = run_phases(choices, ordered, settings, progress, built, bound_only)
    timing = {"solve_seconds": time.perf_counter() - built, "first_solution_seconds": first if first is not None
              else found, "search_units": round(units, 3)}
    if choice is None and outcomes[0].status == SolveStatus.NO_SOLUTION and (
            begun.constructed or begun.peak_proven) and not problem.forbidden_in(begun.choice):
        proven = begun.peak_proven and settings.objective == Objective.PEAK
        return _constructed_result(problem, begun, settings, SolveStatus.OPTIMAL if proven else SolveStatus.FEASIBLE,
                                   timing, sizes)
    by_name = {outcome.phase.name: outcome for outcome in outcomes}
    head = outcomes[0]
    if "peak" in by_name:
        peak_bound = max(by_name["peak"].bound, begun.bound)
    else:
        peak_bound = begun.bound if choice else 0
    if choice is None:
        return SolveResult(head.status, problem.input_choice, None, peak_bound, objective=settings.objective,
                           **timing, **sizes)
    exchange = by_name.get("exchange")
    usage = problem.usage(choice)
    # The status is the first term's: a hint whose peak is the lower bound proved it before the solve.
    status = SolveStatus.OPTIMAL if begun.peak_proven and settings.objective == Objective.PEAK else head.status
    return SolveResult(status, choice, usage.peak, peak_bound, exchange_bytes=problem.exchange_of(choice),
                       changed_values=problem.changed_of(choice), objective=settings.objective,
                       exchange_bound=exchange.bound if exchange is not None and settings.objective == Objective.FIT
                       else None, excess=usage.worst_excess(problem.limits) if soft else (), **timing, **sizes)


def solve_part(problem: Problem, seconds: float, seed: int,
               settings: SolverSettings | None = None) -> tuple[bool, tuple[int, ...] | None, float]:
    """A neighbourhood's problem (`lns.search`): its least exchange from its input choice, no dearer than that; (proven
    optimal, the choice or None, the deterministic units it used). `settings`: the run's (default one worker, no
    deadline), its limits as every CP-SAT solve of the run has them (`_solver`: with one worker `seconds` are units).
    Solved reduced (`reduce`: with its neighbours fixed, most of a neighbourhood's pairs become one group's costs or
    dominated; IOPDDL A, 300 groups: 98k pair booleans to 162, 1.2 s a neighbourhood to 0.4 s), unless the reduction
    drops the input's pick (a forbidden one)."""
    reduced = _part_reduced(problem)
    if reduced is None:
        return _least_exchange(problem, seconds, seed, settings)
    optimal, found, used = _least_exchange(reduced.problem, seconds, seed, settings)
    return optimal, None if found is None else reduced.lift(found), used


def _part_reduced(problem: Problem) -> Reduced | None:
    """A neighbourhood's problem reduced (`reduce`), or None where the reduction drops its input's pick."""
    reduced = reduce(problem)
    return None if reduced.infeasible or reduced.lowered(problem.input_choice) is None else reduced


def _least_exchange(problem: Problem, seconds: float, seed: int,
                    settings: SolverSettings | None) -> tuple[bool, tuple[int, ...] | None, float]:
    choices = build_model(problem)
    choices.hint(problem.input_choice)
    choices.model.add(choices.exchange <= problem.exchange_of(problem.input_choice))
    choices.model.minimize(choices.exchange)
    solver = _solver(replace(settings or SolverSettings(workers=1), seed=seed, presolve=True), seconds)
    status = solver.solve(choices.model)
    return (status == cp_model.OPTIMAL, choices.chosen(solver) if status in (cp_model.OPTIMAL, cp_model.FEASIBLE)
            else None, solver.response_proto.deterministic_time)


def repair_part(problem: Problem, seconds: float, seed: int,
                settings: SolverSettings | None = None) -> tuple[int, ...] | None:
    """A neighbourhood's problem over its limits (`lns.repaired`): the least excess over them (summed over the limits,
    each its worst row's) in EXCESS_SHARE of the work of `seconds` (REPAIR_UNITS), then the least exchange at that
    excess in what that leaves of it, from its input choice; None when the first solve found no choice. `settings`
    as `solve_part`'s. Solved reduced as `solve_part` (a dominated candidate has no more bytes at any row: the
    least excess survives)."""
    reduced = _part_reduced(problem)
    if reduced is None:
        return _least_excess(problem, seconds, seed, settings)
    found = _least_excess(reduced.problem, seconds, seed, settings)
    return None if found is None else reduced.lift(found)


def _least_excess(problem: Problem, seconds: float, seed: int,
                  settings: SolverSettings | None) -> tuple[int, ...] | None:
    settings = replace(settings or SolverSettings(workers=1), seed=seed, presolve=True)
    units, guard = REPAIR_UNITS * seconds, time.perf_counter() + REPAIR_STRETCH * seconds
    lightest = build_model(problem, soft=True)
    lightest.hint(problem.input_choice)
    lightest.model.minimize(sum(lightest.over))
    solver = _solver_of_units(settings, EXCESS_SHARE * units, guard)
    if solver.solve(lightest.model) not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    found, excess = lightest.chosen(solver), sum(solver.value(over) for over in lightest.over)
    # the same model, held to that excess, for the least exchange there (built once)
    lightest.model.add(sum(lightest.over) <= excess)
    lightest.hint(found)
    lightest.model.minimize(lightest.exchange)
    solver = _solver_of_units(settings, units - solver.response_proto.deterministic_time, guard)
    if solver.solve(lightest.model) in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return lightest.chosen(solver)
    return found


def _solver_of_units(settings: SolverSettings, units: float, guard: float) -> cp_model.CpSolver:
    """A solver that stops at `units` of CP-SAT's deterministic time, or at `guard` (a `time.perf_counter` value)."""
    solver = _solver(settings, max(guard - time.perf_counter(), FLOOR))
    solver.parameters.max_deterministic_time = max(units, FLOOR)
    return solver


def _neighbourhoods(problem: Problem, settings: SolverSettings, progress: Progress | None, begun: Start,
                    started: float) -> tuple[Start, SolverSettings, float | None]:
    """The start reported (when valid) and, when the whole model is too large to solve, improved by the
    neighbourhood search (`lns.search`) for the time left; the start, the settings with the time left, and the
    seconds to the first valid choice (None: the start is not valid). (On IOPDDL B, where the whole model fits,
    30% of the time in neighbourhoods cost the whole model the proof of the optimum.)"""
    elapsed = time.perf_counter() - started
    first = begun.first_valid
    if whole_model_fits(problem):
        return begun, settings, first
    heard: list[float] = []

    def on_improved(phase: str, objective: int, bound: int, seconds: float) -> None:
        heard.append(seconds)
        if progress is not None:
            progress(phase, objective, bound, seconds)

    # with one worker the neighbourhoods share the limit in deterministic units (reproducible), else the wall time left
    budget = settings.time_limit if settings.deterministic else settings.wall(settings.time_limit - elapsed)
    improved = search(problem, begun.choice, budget,
                      partial(solve_part, settings=settings),
                      settings.seed, on_improved, started, deterministic=settings.deterministic)
    return replace(begun, choice=improved, constructed=True), settings, first if first is not None else min(
        heard, default=None)


def pareto_front(problem: Problem, settings: SolverSettings, max_points: int,
                 on_point: Callable[[FrontPoint], None] | None = None,
                 first: FrontPoint | None = None) -> tuple[list[FrontPoint], bool]:
    """The peak / exchange front from the smallest peak on (epsilon-constraint): each point minimises the
    peak with exchange below the previous point's, then the exchange at that peak; each solve starts
    from the previous point's layouts, over the problem after the exact pairwise reductions (the exchange counts
    every edge). `first`: the front's first point, already solved (the optimiser's own solve, whose start and
    window bounds find it where a plain model may not). Returns (points, whether the front was walked to its end)."""
    reduced = pairwise(problem)
    if reduced.infeasible:
        return [], True
    solved = reduced.problem
    points: list[FrontPoint] = []
    hint = solved.input_choice
    if first is not None:
        points.append(first)
        hint = reduced.lowered(first.choice) or hint
    while len(points) < max_points:
        started = time.perf_counter()
        choices = build_model(solved)
        if points:
            choices.model.add(choices.exchange <= points[-1].exchange_bytes - 1)
        choices.hint(hint)
        outcomes, choice, _, _ = run_phases(choices, phases(choices, solved, Objective.PEAK), settings, None, started)
        if choice is None:
            return points, outcomes[0].status == SolveStatus.INFEASIBLE
        proven = all(outcome.status == SolveStatus.OPTIMAL for outcome in outcomes)
        lifted = reduced.lift(choice)
        points.append(FrontPoint(lifted, problem.usage(lifted).peak, problem.exchange_of(lifted),
                                 problem.changed_of(lifted), proven, time.perf_counter() - started))
        if on_point is not None:
            on_point(points[-1])
        hint = choice
    return points, False
