"""`optimize`: the callable optimiser a compiler pipeline uses (the CLI calls the same function).

The pipeline, each stage run once: `prepare` (facts: liveness, dataflow, estimate, families -> pins ->
candidate space -> problem) -> solver backend -> rewrite (re-checked). `sweep`, `explore` and the report
read the same prepared run. When no layout meets the budgets: the explanation (a minimal conflict,
`explain`), raised, or with `best_effort` the plan of least excess over the budgets, written with
`fits_budget: false`. `time_limit` bounds the whole run: preparation, solve, exact exchange, explanation, best effort.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property
from math import ceil

from ipuplan.errors import InfeasibleBudget, PlanError
from ipuplan.facts.check import Mismatch, ValueChange, check, value_changes
from ipuplan.facts.estimate import Estimate
from ipuplan.facts.plan_exchange import PlanExchange, plan_exchange
from ipuplan.facts.plan_facts import PlanFacts, plan_facts
from ipuplan.model.build import LiveSets, live_sets, problem_of
from ipuplan.model.exact import ExactProblem, exact_problem
from ipuplan.model.objective import Objective
from ipuplan.model.problem import Problem, alive_within, solution_fingerprint
from ipuplan.plan.budgets import Budgets, Limit, excess
from ipuplan.plan.collector import gc_run
from ipuplan.plan.forked import Forked, forks_allowed, in_a_copy
from ipuplan.plan.format import Plan, size_in_words
from ipuplan.replan.explain import Explanation, explain
from ipuplan.replan.gathers import InsertedGather, inserted_gathers
from ipuplan.replan.options import EXACT_AUTO_CANDIDATES, BadOption, ExactExchange, OptimizeOptions, default_workers
from ipuplan.replan.pins import Pins, resolve_pins
from ipuplan.replan.rewrite import Checking, rewrite_checking, with_budgets, with_derived_fields
from ipuplan.replan.size import CHIP_TILES, RunSize, limit_in_words, require_run_fits, room_for_a_copy, usable_cores
from ipuplan.replan.widen import Widening, solve_space
from ipuplan.solvers import Progress, SolveResult, SolverSettings, SolveStatus, solve, solve_soft
from ipuplan.solvers.deadline import Deadline
from ipuplan.space.scopes import candidate_space
from ipuplan.space.types import CandidateSpace, FrozenGroup

Phase = Callable[[str, str], None]


@dataclass(frozen=True)
class Prepared:
    """The front half of a run, done once: what the solve, the explanation, the rewrite and the report read."""

    options: OptimizeOptions
    facts: PlanFacts
    """Of the input, under the run's budgets."""
    pins: Pins
    space: CandidateSpace
    """Of the run's scope, pins and classes."""
    problem: Problem
    live: LiveSets | None = None
    """The space's live sets, for a widening of the space (`replan.widen.Widening`); let go after the solve."""
    size: RunSize | None = None
    """The run's size, its memory and its mandatory seconds estimated (`replan.size`)."""
    priced_input: PlanExchange | None = field(default=None, repr=False, compare=False)
    """The input's exact exchange, where the forked check priced it (`_checked`)."""

    @property
    def input_exchange(self) -> PlanExchange:
        """The input's exact exchange (docs/EXCHANGE.md)."""
        return self.priced_input if self.priced_input is not None else plan_exchange(self.facts.plan, self.facts)


def _silent(name: str, detail: str) -> None:
    """The phases of a run nobody watches."""


def prepare(plan: Plan, options: OptimizeOptions, on_phase: Phase = _silent) -> Prepared:
    """Facts, pins, candidate space and problem of `plan` under `options`; PlanError (exit 2) for a plan whose
    layouts, families or scratch break the format's rules, or pins that name nothing, or a run whose estimated memory
    passes `options.memory_limit` (`RunTooLarge`, told before any heavy stage)."""
    size = require_run_fits(plan, options)
    if size.mandatory_seconds > options.time_limit:
        on_phase("deadline", past_the_limit(size.mandatory_seconds, options.time_limit, size.slowdown))
    on_phase("analyse", f"{size.values:,} values, {size.steps:,} steps, memory up to about "
                        f"{size_in_words(size.bytes)} (limit {limit_in_words(options.memory_limit)})")
    facts = plan_facts(plan, options.budgets_for(plan))
    facts.elementwise  # noqa: B018 - the check and the space both read it: found here, before the check forks
    with Forked(_checked, facts, size.tiles <= CHIP_TILES, fork=forks(size, options)) as checking:
        if not checking.forked:  # refused before anything is built on it
            _refuse_inconsistent(checking.result()[0])
        try:
            pins, space = prepared_space(facts, options, on_phase)
            on_phase("problem", f"{len(space.free):,} free groups, "
                                f"{sum(len(g.candidates) for g in space.free):,} candidates")
            live = live_sets(facts, space)
            problem = problem_of(facts, space, live)
        except Exception:
            _refuse_inconsistent(checking.result()[0])  # an inconsistent plan is told as one, whatever it broke after
            raise
        problems, priced = checking.result()
        _refuse_inconsistent(problems)
    return Prepared(options, facts, pins, space, problem, live, size, priced)


def past_the_limit(mandatory: float, limit: float, slowdown: float = 1.0) -> str:
    """What a run whose mandatory work alone passes its time limit says, once, before that work (`slowdown`: the
    machine's, `replan.size.machine_slowdown`)."""
    loaded = f" loaded as this one is now ({slowdown:.1f}x slower than alone)" if slowdown > 1 else ""
    return (f"the work every run does on a plan this size (load, analyse, a constructive plan, rewrite, write) "
            f"takes about {mandatory:.1f} s on a 2-core machine{loaded}, more than --time-limit {limit:g} s: the run "
            f"ends after it, its solve cut to what is left (the constructive plan at least); --time-limit "
            f"{ceil(mandatory + limit):g} leaves it about {limit:g} s")


def prepared_space(facts: PlanFacts, options: OptimizeOptions,
                   on_phase: Phase = _silent) -> tuple[Pins, CandidateSpace]:
    """The pins and the candidate space of a run's facts under `options`: what `prepare` builds the problem from,
    and all a report of the free and frozen values needs (`ipuplan report`)."""
    pins = resolve_pins(facts.plan, options.freeze, options.pin_file)
    on_phase("candidates", f"scope {options.scope.value}" + (f", {len(pins.frozen)} values pinned" if pins else ""))
    return pins, candidate_space(facts, options.scope, pins.frozen, keep_classes=options.keep_classes)


def structural_problems(facts: PlanFacts) -> list[Mismatch]:
    """What `check` finds of the plan that breaks the format's rules: its layouts, families or scratch (not the
    stale derived numbers, bytes, usage and peaks, that the rewrite recomputes)."""
    return [m for m in check(facts.plan, facts) if m.kind.structural]


def _checked(facts: PlanFacts, price: bool) -> tuple[list[Mismatch], PlanExchange | None]:
    """`structural_problems`, and with `price`, where there are none and the check is made in a forked copy, the
    input's exact exchange: the copy idles after the check while the space is built, and the run's tail, where the
    exchange is reported, has both cores busy (0.15 s of a 50,160-value run). Not past a chip's tiles, where pricing
    may outlast the space and `prepare` would wait for it. None where pricing failed: the run prices it again, and
    fails, as before."""
    problems = structural_problems(facts)
    if problems or not price or not in_a_copy():
        return problems, None
    try:
        return problems, plan_exchange(facts.plan, facts)
    except Exception:  # noqa: BLE001 - raised again where the run prices it itself
        return problems, None


def _refuse_inconsistent(problems: list[Mismatch]) -> None:
    """PlanError (exit 2) for a plan with `structural_problems`."""
    if problems:
        more = f" (and {len(problems) - 1} more; run `ipuplan check`)" if len(problems) > 1 else ""
        raise PlanError(f"the input plan is inconsistent: {problems[0]}{more}")


def explain_run(prepared: Prepared, *, proven: bool, deadline: float) -> Explanation:
    """Why the run's budgets cannot be met, by `deadline`, from the run's own facts, space, problem and pins."""
    return explain(prepared.facts, prepared.space, prepared.problem, prepared.options, prepared.pins.frozen,
                   proven=proven, deadline=deadline)


class BudgetConflict(InfeasibleBudget):
    """No layout meets the budgets; `explanation` says which rows conflict and what would fit (exit 3), and
    `prepared` is the run that found it (its report needs no second look at the plan)."""

    def __init__(self, explanation: Explanation, prepared: Prepared) -> None:
        self.explanation = explanation
        self.prepared = prepared
        super().__init__(explanation.line)


@dataclass(frozen=True)
class Shortfall:
    """One budget a step of the written plan exceeds."""

    step: int
    budget: str
    bytes: int
    """The step's bytes as that budget counts them."""
    limit: int

    @property
    def over(self) -> int:
        return self.bytes - self.limit


def shortfall(result: Estimate, budgets: Budgets) -> tuple[Shortfall, ...]:
    """Every (step, budget) the estimate exceeds, in step order."""
    found, limits = [], budgets.limits
    for step, (standard, interleaved) in enumerate(zip(result.standard, result.interleaved)):
        for limit in limits:
            if excess(limit, standard, interleaved):
                found.append(Shortfall(step, limit.name, limit.usage(standard, interleaved), limit.bytes))
    return tuple(found)


@dataclass(frozen=True)
class OptimizeResult:
    prepared: Prepared
    """The run's front half: the input's facts, the pins, the candidate space and the problem."""
    facts: PlanFacts
    """Of the returned plan (the rewritten one, or the input with recomputed fields when nothing better was
    found): its report reads them instead of inferring them again."""
    solve: SolveResult
    changes: tuple[ValueChange, ...]
    note: str
    explanation: Explanation | None = None
    """Why the budgets cannot be met (with `best_effort`, when they could not)."""
    shortfall: tuple[Shortfall, ...] = ()
    """Where the returned plan exceeds its budgets (best effort, or an input returned unchanged)."""
    model_exchange_before: int = 0
    """The model's exchange figure at the input's layouts, what the choice was made by: where `exact` (the default,
    `exchange_phase` ran) the plan's own exact exchange, equal to `exchange_before`; else the optimiser's proxy (each
    candidate priced against the other side of a move at its input layout, reductions unpriced)."""
    model_exchange_after: int = 0
    """The same figure at the returned plan's layouts: where `exact`, equal to `exchange_after`; else the proxy's."""
    solved_problem: Problem | None = field(default=None, repr=False, compare=False)
    """The problem the choice was solved in (the exact exchange's where `exact`): `model_fingerprint` reads it."""
    solution_fingerprint: str = ""
    """sha256 of the chosen candidates: equal fingerprints, equal layouts."""
    exact: bool = False
    """The choice was made by the exact exchange (`exchange_phase`): `model_exchange_*` are the plan's own figures."""
    priced_input: PlanExchange | None = field(default=None, repr=False, compare=False)
    """The input's exact exchange when the run priced it already (`input_exchange` reads it rather than again)."""
    priced_output: PlanExchange | None = field(default=None, repr=False, compare=False)
    """The returned plan's, when the run counted it while the plan was checked (`output_exchange` reads it)."""

    @property
    def plan(self) -> Plan:
        return self.facts.plan

    @cached_property
    def model_fingerprint(self) -> str:
        """sha256 of the integers the solver saw: equal fingerprints, equal models. Worked out when asked for (0.24 s
        of a 50,160-value run that does not report it)."""
        return "" if self.solved_problem is None else self.solved_problem.fingerprint()

    @cached_property
    def input_exchange(self) -> PlanExchange:
        """The exact exchange of the input plan (docs/EXCHANGE.md), computed when first asked for."""
        return self.priced_input if self.priced_input is not None else self.prepared.input_exchange

    @cached_property
    def output_exchange(self) -> PlanExchange:
        """The exact exchange of the returned plan, the one that is written (docs/EXCHANGE.md)."""
        if self.priced_output is not None:
            return self.priced_output
        return plan_exchange(self.plan, self.facts)

    @cached_property
    def inserted(self) -> tuple[InsertedGather, ...]:
        """The steps and values the returned plan inserted (scope `program`: gathered parameters), read from it; the
        compiler must honour them."""
        return inserted_gathers(len(self.prepared.facts.plan.values), self.facts)

    @property
    def exchange_before(self) -> int:
        """Bytes the input's mover and reduction steps send between tiles, each step once."""
        return self.input_exchange.total

    @property
    def exchange_after(self) -> int:
        """Bytes the returned plan's mover and reduction steps send between tiles, each step once."""
        return self.output_exchange.total

    @property
    def exchange_bytes_added(self) -> int:
        """The returned plan's exchange less the input's (negative: it sends less)."""
        return self.exchange_after - self.exchange_before

    @property
    def before(self) -> Estimate:
        return self.prepared.facts.estimate

    @property
    def after(self) -> Estimate:
        return self.facts.estimate

    @property
    def budgets(self) -> Budgets:
        return self.prepared.facts.budgets

    @property
    def options(self) -> OptimizeOptions:
        return self.prepared.options

    @property
    def pins(self) -> Pins:
        return self.prepared.pins

    @property
    def frozen(self) -> tuple[FrozenGroup, ...]:
        """Every value group left alone, with why."""
        return self.prepared.space.frozen

    @property
    def free_groups(self) -> int:
        return len(self.prepared.space.free)

    @property
    def candidates(self) -> int:
        return self.prepared.space.candidate_count

    @property
    def status(self) -> SolveStatus:
        return self.solve.status

    @property
    def bound(self) -> int:
        return self.solve.bound

    @property
    def best_effort(self) -> bool:
        """The budgets could not be met and this is the plan of least excess (`options.best_effort`)."""
        return self.explanation is not None


def no_better_than_input(problem: Problem, solved: SolveResult, facts: PlanFacts,
                         exchange_of: Callable[[tuple[int, ...]], int] | None = None) -> bool:
    """The input is at least as good by the solve's objective (`exchange_of`: the exchange the choice was made by, the
    exact one after the exact stage; default the problem's); with soft budgets (a non-empty `excess`) its total excess
    comes first, and otherwise only an input that fits can be as good."""
    objective = _objective_terms(problem, solved.objective, exchange_of or problem.exchange_of)
    if solved.excess:
        def terms(choice):
            return sum(problem.usage(choice).worst_excess(problem.limits)), *objective(choice)

        return terms(problem.input_choice) <= terms(solved.choice)
    return facts.estimate.fits_budget and objective(problem.input_choice) <= objective(solved.choice)


def _objective_terms(problem: Problem, goal: Objective, exchange_of: Callable[[tuple[int, ...]], int]):
    """The figures an objective compares, first to last, of a choice."""
    if goal == Objective.FIT:
        return lambda choice: (exchange_of(choice), problem.changed_of(choice))
    return lambda choice: (problem.usage(choice).peak,)


_NOT_MINIMISED = ("the peak is proven; the exchange and changed values after it are the constructive plan's, not "
                  "minimised")
TIES_LEFT = f"{_NOT_MINIMISED} (on a model this large the solver would minimise only the model's exchange proxy)"
TIES_LEFT_TO_EXACT = f"{_NOT_MINIMISED} (the exact exchange stage that minimises them was left out)"


def _result_facts(prepared: Prepared, solved: SolveResult, exact: ExactProblem | None = None) -> tuple[Checking, str]:
    """The facts of the plan to return with its check (`rewrite_checking`: in a forked copy on a large plan,
    `FORK_VALUES`), and a note when it is the input unchanged (judged by the exact exchange where the choice was made
    by it)."""
    facts, problem = prepared.facts, prepared.problem
    if solved.status == SolveStatus.NO_SOLUTION and solved.peak is None:
        note = "no solution within the time limit: the input is returned unchanged"
    elif solved.constructed and solved.status == SolveStatus.FEASIBLE:
        # The solver found nothing in time; the constructive plan ranked better than the input (cpsat.start).
        fits = not problem.usage(solved.choice).violation(problem.limits)
        return _rewritten(prepared, solved.choice), (
            "no solver solution within the time limit: the constructive plan is returned"
            + ("" if fits else "; it does not fit the budgets"))
    elif no_better_than_input(problem, solved, facts, None if exact is None else exact.exchange_of):
        note = "nothing better than the input in this scope: the input is returned unchanged"
    else:
        return _rewritten(prepared, solved.choice), _ties_note(prepared, solved)
    unchanged = with_derived_fields(with_budgets(facts.plan, facts.budgets), facts.estimate)
    return Checking.already(replace(facts, plan=unchanged)), note


def _ties_note(prepared: Prepared, solved: SolveResult) -> str:
    """What the run says of the terms after a proven peak that no stage minimised (`SolveResult.ties_left`)."""
    if not solved.ties_left:
        return ""
    return TIES_LEFT_TO_EXACT if exact_follows(prepared) else TIES_LEFT


FORK_VALUES = 5_000
"""Values from which a plan's check runs in a forked copy of the process: the input's beside its candidate space
and problem, the rewritten plan's beside the figures the run reports of it (at 50k values 0.35 s beside 2.8 s, and
1 s beside 1.3 s), where the machine has a second core and the copy fits beside the run (`size.room_for_a_copy`); on
a smaller plan the fork would cost more than it saves."""


def forks(size: RunSize | None, options: OptimizeOptions) -> bool:
    """Whether a run of `size` checks a plan in a forked copy of the process (`FORK_VALUES`): it may use two
    cores (`workers`; `explore` gives each job its share) and this process has them."""
    return size is not None and size.values >= FORK_VALUES and _two_cores(size, options)


def _two_cores(size: RunSize, options: OptimizeOptions) -> bool:
    """Whether a run of `size` may use two cores (`workers`) that this process has, a copy of it fitting beside it."""
    return min(usable_cores(), options.workers or default_workers()) > 1 and room_for_a_copy(size, options.memory_limit)


def pricing_processes(prepared: Prepared) -> int:
    """The processes a run's exact exchange may be priced in (`model.exchange_cost.step_prices`, whatever the plan's
    size: its pairs decide): two where forks are allowed (`plan.forked`) and the run may use two cores."""
    size = prepared.size
    return 2 if forks_allowed() and size is not None and _two_cores(size, prepared.options) else 1


def _rewritten(prepared: Prepared, choice: tuple[int, ...]) -> Checking:
    facts = prepared.facts
    return rewrite_checking(facts, prepared.space, choice, facts.budgets, forks(prepared.size, prepared.options))


def own_plan(plan: object, caller: str) -> Plan:
    """The plan a run of `caller` reads: `plan`'s snapshot (frozen lists, live ids checked: `Plan.snapshot`), so
    that nothing its caller does meanwhile changes the run; TypeError, in one line, for anything but a Plan."""
    if not isinstance(plan, Plan):
        raise TypeError(f"{caller}: plan must be an ipuplan Plan (use ipuplan.load_plan(path)), "
                        f"got {type(plan).__name__}")
    return plan.snapshot()


def chosen_options(options: object, option_values: dict, caller: str) -> OptimizeOptions:
    """`options` (default ones for None) with `option_values` applied; TypeError for options that are not an
    OptimizeOptions, BadOption naming the field for a bool where a number is due (pydantic would take True as 1)."""
    if options is not None and not isinstance(options, OptimizeOptions):
        raise TypeError(f"{caller}: options must be an ipuplan.OptimizeOptions, got {type(options).__name__}")
    for name, value in option_values.items():
        field = OptimizeOptions.model_fields.get(name)
        if isinstance(value, bool) and field is not None and field.annotation is not bool:
            raise BadOption(f"option {name}: expected a number, got the bool {value}")
    return (options or OptimizeOptions()).with_values(**option_values)


def optimize(
    plan: Plan,
    options: OptimizeOptions | None = None,
    *,
    progress: Progress | None = None,
    on_phase: Phase | None = None,
    dump_model: str | None = None,
    started: float | None = None,
    **option_values,
) -> OptimizeResult:
    """Re-plan the free layouts of `plan`: the smallest peak, or with `objective="fit"` the least exchange
    that meets the budgets.

    `options` (or keyword values of its fields) choose scope, objective, solver, limits, budgets and pins;
    `progress` hears every improving solution, `on_phase` each stage as it starts (name, detail).
    Budgets default to the plan's own; overridden budgets are written into the result.
    `time_limit` counts from `started` (`time.perf_counter()`: a caller that did part of the run itself, as the CLI
    loads the plan; default this call), the rewrite's time set aside at its end.
    The result is never worse than the input: when the solver finds nothing better, the
    input comes back unchanged (its derived fields recomputed) and `note` says so.
    When no layout meets the budgets, raises `BudgetConflict` (an InfeasibleBudget) with the
    explanation; with `best_effort`, returns the plan of least excess instead, explanation attached.

    >>> from ipuplan import load_plan
    >>> result = optimize(load_plan("models/vit-so400m-finalist-5.json"), workers=1)
    >>> result.before.raw_peak, result.after.raw_peak, result.status.value
    (367216, 136712, 'optimal')
    """
    started = time.perf_counter() if started is None else started
    plan, options = own_plan(plan, "optimize"), chosen_options(options, option_values, "optimize")
    for name, hook in (("progress", progress), ("on_phase", on_phase)):
        if hook is not None and not callable(hook):
            raise TypeError(f"optimize: {name} must be callable, got {type(hook).__name__}")
    phase = on_phase or _silent
    with gc_run():  # what the run builds stays out of the collector's walks until it returns
        return solve_prepared(prepare(plan, options, phase), progress, phase, dump_model, started)


def solve_prepared(prepared: Prepared, progress: Progress | None = None, on_phase: Phase = _silent,
                   dump_model: str | None = None, started: float | None = None) -> OptimizeResult:
    """The back half of `optimize`, its phases in order on one `Deadline` (`solvers.deadline`: `time_limit` after
    `started`, the run's start, so that its preparation counts too; default: now):

        peak_phase -> exchange_phase -> rewrite          (a choice meets the budgets)
        peak_phase -> unmet_phase (explain, best effort)  (none does)

    With one worker each phase's limit is its share of CP-SAT's deterministic units, the same on every machine, so
    that the bytes written do not hang on its speed; no solve runs past the deadline."""
    deadline, settings = run_clock(prepared, prepared.options.solver_settings(dump_model), started)
    path = run_path(prepared)
    peak = peak_phase(prepared, settings, deadline, path, progress, on_phase)
    if _needs_explaining(peak.prepared, peak.solved):
        return unmet_phase(peak, settings, deadline, progress, on_phase)
    priced = exchange_phase(peak, settings, deadline, path, progress, on_phase)
    on_phase("rewrite", "the chosen layouts written and the plan re-checked")
    return _result(priced.prepared, priced.solved, exact=priced.exact)


def run_clock(prepared: Prepared, settings: SolverSettings, started: float | None) -> tuple[Deadline, SolverSettings]:
    """A run's one `Deadline` (`time_limit` from `started`, the rewrite's time set aside at its end), and `settings`
    that stop every solve at it."""
    deadline = Deadline.starting(prepared.options.time_limit, settings.deterministic, started,
                                 reserve=prepared.size.tail_seconds if prepared.size else 0.0)
    return deadline, replace(settings, ends_at=deadline.ends_at)


@dataclass(frozen=True)
class Solved:
    """A run after a phase: what its choice indexes (the space and problem the peak phase may have widened), the
    solve, and the exact problem that priced it (None: the figures are the proxy's)."""

    prepared: Prepared
    solved: SolveResult
    exact: ExactProblem | None = None


def run_path(prepared: Prepared) -> tuple[str, ...]:
    """The phases a run expects when a choice meets the budgets (`solvers.deadline.RUN_SHARES`): the exchange phase
    only where it will price (always, or auto with few enough candidates that all of them may be alive)."""
    wanted, problem = prepared.options.exact_exchange, prepared.problem
    expected = wanted == ExactExchange.ALWAYS or (
        wanted == ExactExchange.AUTO and sum(problem.candidate_counts) <= EXACT_AUTO_CANDIDATES)
    return ("peak", "exchange") if expected else ("peak",)


def peak_phase(prepared: Prepared, settings: SolverSettings, deadline: Deadline, path: tuple[str, ...],
               progress: Progress | None = None, on_phase: Phase = _silent) -> Solved:
    """The smallest peak (`fit`: a first choice that meets the budgets) over the memory rows, the proxy exchange
    only its tie-break; where a cap on a family's splits left some out that may beat it, those too (issue 19)."""
    options, problem = prepared.options, prepared.problem
    on_phase("solve", f"{options.solver.value}: {problem.groups:,} free groups, {sum(problem.candidate_counts):,} "
                      f"candidates, {len(problem.rows):,} of {problem.steps_total:,} steps, "
                      f"{options.time_limit:g} s limit")
    # the proxy's ties are left to an exact stage that follows, unless the model they are solved in is asked for
    proxy_ties = settings.dump_model is not None or not exact_follows(prepared)
    settings = replace(settings, time_limit=deadline.share("peak", path), proxy_ties=proxy_ties)
    solved_space, solved = solve_space(Widening(prepared.facts, prepared.space, problem, prepared.live), settings,
                                       options.solver, progress)
    return Solved(replace(prepared, space=solved_space.space, problem=solved_space.problem, live=None), solved)


def unmet_phase(peak: Solved, settings: SolverSettings, deadline: Deadline, progress: Progress | None = None,
                on_phase: Phase = _silent) -> OptimizeResult:
    """No choice meets the budgets: the explanation (a minimal conflict), raised as BudgetConflict, or with best
    effort the plan of least excess, the explanation attached."""
    prepared, options = peak.prepared, peak.prepared.options
    path = ("peak", "explain", "best effort") if options.best_effort else ("peak", "explain")
    # the soft solve's share is set aside first: the explanation cannot eat it
    soft_seconds = deadline.share("best effort", path, asked_by="explain") if options.best_effort else 0.0
    on_phase("explain", "no layout meets the budgets: a minimal conflict")
    explanation = explain_run(prepared, proven=peak.solved.status == SolveStatus.INFEASIBLE,
                              deadline=deadline.ends_at - soft_seconds)
    if not options.best_effort:
        raise BudgetConflict(explanation, prepared)
    on_phase("best effort", "the least excess over the budgets")
    seconds = deadline.share("best effort", path)
    solved = solve_soft(prepared.problem, replace(settings, time_limit=max(seconds, soft_seconds)), progress)
    return _result(prepared, solved, explanation)


EXACT_MIN_SECONDS = 1.0
"""With more workers than one, the least of the time limit left for `auto` to price the exact exchange (pricing the
reference plan's pairs alone takes 0.5-0.9 s)."""


def exchange_phase(peak: Solved, settings: SolverSettings, deadline: Deadline, path: tuple[str, ...],
                   progress: Progress | None = None, on_phase: Phase = _silent) -> Solved:
    """The least exact exchange (docs/EXCHANGE.md), then the fewest changed values, at the peak found (with `fit`:
    under the budgets): the candidates no such choice can use forbidden (`alive_within`), every pair of the others
    priced (`model.exact`), solved, and never worse than the peak phase's choice by the same figures. The peak's
    status and bound stay the peak phase's; with `fit` the status is the exact exchange's. The peak phase's own
    result where its choice does not fit, or the options leave the exact exchange out (the proxy's figures, said)."""
    prepared, solved = peak.prepared, peak.solved
    problem, objective, wanted = prepared.problem, prepared.options.objective, prepared.options.exact_exchange
    if wanted == ExactExchange.NEVER or solved.peak is None or solved.status not in (
            SolveStatus.OPTIMAL, SolveStatus.FEASIBLE) or problem.usage(solved.choice).violation(problem.limits):
        return peak
    left = deadline.left()
    if not deadline.deterministic and wanted == ExactExchange.AUTO and left < EXACT_MIN_SECONDS:
        on_phase("exact exchange", f"left out: {left:.2f} s of --time-limit left, less than {EXACT_MIN_SECONDS:g} "
                                   "(--exact-exchange always prices it); the exchange is the optimiser's proxy")
        return peak
    cap = solved.peak if objective == Objective.PEAK else None
    alive = alive_within(problem, cap)
    priced, count = exact_wanted(wanted, alive)
    if not priced:
        on_phase("exact exchange", f"left out: {count:,} candidates can meet the budgets"
                 + (f" at peak {cap:,}" if cap else "") + f", more than {EXACT_AUTO_CANDIDATES:,} (--exact-exchange "
                 "always prices them); the exchange is the optimiser's proxy")
        return peak
    on_phase("exact exchange", f"every pair of the {count:,} candidates that can meet the budgets"
             + (f" at peak {cap:,}" if cap else "") + " priced")
    seconds = deadline.share("exchange", path)
    exact, found = exact_at(prepared, cap, replace(settings, time_limit=seconds), progress, alive)
    return Solved(prepared, _exact_result(exact, solved, found, objective), exact)


def exact_follows(prepared: Prepared) -> bool:
    """Whether the exchange stage will price the exact exchange after the peak phase, whatever peak it finds: asked
    for always, or `auto` with no more candidates than it prices (unless the time limit runs out first). Then the
    peak phase leaves the proxy's ties alone (on the reference plan, 0.07 s of a 0.8 s run): the exact solve minimises
    the written plan's own exchange and changes from the peak found."""
    wanted = prepared.options.exact_exchange
    return wanted == ExactExchange.ALWAYS or (wanted == ExactExchange.AUTO
                                              and sum(prepared.problem.candidate_counts) <= EXACT_AUTO_CANDIDATES)


def exact_wanted(wanted: ExactExchange, alive: list) -> tuple[bool, int]:
    """Whether `--exact-exchange` prices these `alive` candidates (auto: at most EXACT_AUTO_CANDIDATES), and how many
    there are."""
    count = int(sum(mask.sum() for mask in alive))
    return wanted == ExactExchange.ALWAYS or (wanted == ExactExchange.AUTO and count <= EXACT_AUTO_CANDIDATES), count


def exact_at(prepared: Prepared, cap: int | None, settings: SolverSettings, progress: Progress | None = None,
             alive: list | None = None, priced: ExactProblem | None = None) -> tuple[ExactProblem, SolveResult]:
    """The least exact exchange, then the fewest changed values, of the choices that meet the budgets with a peak of
    at most `cap` (None: any peak), over the run's candidates (`fit`'s whole-scope bound with `cap` None; `alive`:
    `alive_within(problem, cap)` when known; `priced`: those prices already computed for at least those candidates);
    the problem it priced, and the solve."""
    problem = prepared.problem
    alive = alive if alive is not None else alive_within(problem, cap)
    exact = (priced.within(alive) if priced is not None
             else exact_problem(prepared.facts, prepared.space, problem, alive, pricing_processes(prepared)))
    if cap is not None:  # at a peak already found: no left-out choice (the peak's own proof is done)
        capped = exact.problem.with_table(problem.table, limits=(*problem.limits, Limit("peak found", 1, 1, cap)),
                                          left_out=())
        exact = exact.capped(capped)
    # presolve off: on the reference plan it took 0.54 of the solve's 0.68 s and found the same optimum (0.14 s)
    found = solve(exact.problem, replace(settings, objective=Objective.FIT, dump_model=None, presolve=False),
                  prepared.options.solver, progress)
    return exact, found


def exact_choice(exact: ExactProblem, kept: tuple[int, ...], found: SolveResult) -> tuple[tuple[int, ...], bool]:
    """The better of `kept` (a choice that meets the exact problem's limits) and the exact solve's, by (a view whose
    readings differ, exact exchange, changed values), `kept` on a tie; the solve's only when it makes no forbidden pick
    and meets every limit, the cap on the peak included (a constructive answer may not). And whether the choice's
    figures are a proven optimum."""
    problem = exact.problem

    def key(choice: tuple[int, ...]) -> tuple[bool, int, int]:
        return exact.readings_differ_in(choice), *problem.objective_key(choice, Objective.FIT, exact.exchange_of)

    if found.peak is None or not problem.valid(found.choice):
        return kept, False
    choice = min((kept, found.choice), key=key)
    return choice, found.status == SolveStatus.OPTIMAL and key(choice) == key(found.choice)


def _exact_result(exact: ExactProblem, solved: SolveResult, found: SolveResult, objective: Objective) -> SolveResult:
    """`solved` with the better choice (`exact_choice`), its exact figures, and with `fit` the exact solve's status
    and bound (a bound only where that solve gave one)."""
    problem = exact.problem
    choice, proven = exact_choice(exact, solved.choice, found)
    exact_bound = None if found.exchange_bound is None else found.exchange_bound + exact.constant
    figures = {"choice": choice, "peak": problem.usage(choice).peak, "exchange_bytes": exact.exchange_of(choice),
               "changed_values": problem.changed_of(choice), "exchange_bound": exact_bound,
               "search_units": solved.search_units + found.search_units, "ties_left": False,
               # the run's two solves: their seconds add up, and where the peak phase wrote no model (its start proved
               # the peak) the model the run reports is the exact solve's
               "build_seconds": solved.build_seconds + found.build_seconds,
               "solve_seconds": solved.solve_seconds + found.solve_seconds}
    if not solved.variables:
        figures |= {"variables": found.variables, "constraints": found.constraints}
    if objective == Objective.FIT:
        return replace(solved, status=SolveStatus.OPTIMAL if proven else SolveStatus.FEASIBLE, **figures)
    optimal = solved.bound >= figures["peak"]
    return replace(solved, status=SolveStatus.OPTIMAL if optimal else solved.status, **figures)


def _needs_explaining(prepared: Prepared, solved: SolveResult) -> bool:
    """Proven infeasible, or with best effort nothing found that fits (neither a solution nor the constructive
    plan, nor the input)."""
    if solved.status == SolveStatus.INFEASIBLE:
        return True
    problem = prepared.problem
    unmet = solved.status == SolveStatus.NO_SOLUTION or bool(problem.usage(solved.choice).violation(problem.limits))
    return prepared.options.best_effort and unmet and not prepared.facts.estimate.fits_budget


def _result(prepared: Prepared, solved: SolveResult, explanation: Explanation | None = None,
            exact: ExactProblem | None = None) -> OptimizeResult:
    """The rewritten plan (or the input, when it is at least as good) with every figure of the run, returned once
    its check found nothing; where the check runs in a forked copy, both plans' exact exchange is counted meanwhile."""
    facts, problem = prepared.facts, prepared.problem
    checking, note = _result_facts(prepared, solved, exact)
    with checking:
        after = checking.facts
        try:
            changes = value_changes(facts.plan, after.plan, facts.estimate, after.estimate)
            choice = solved.choice if changes else problem.input_choice
            beside = checking.alone.forked
            # with `exact` the model priced the plan's own figure; the input's is that definition too
            input_exchange = prepared.input_exchange if exact is not None or beside else None
            output_exchange = plan_exchange(after.plan, after) if beside else None
            over = shortfall(after.estimate, facts.budgets)  # a loop over every step: beside the check, not after it
        except Exception:
            checking.checked()  # a plan that fails its checks is refused as one, whatever it broke here
            raise
        if exact is None:
            model = problem.exchange_of(problem.input_choice), problem.exchange_of(choice), problem
        else:
            model = input_exchange.total, exact.exchange_of(choice), exact.problem
        after = checking.checked()
    return OptimizeResult(
        prepared, after, solved, changes, note, explanation=explanation,
        shortfall=over, model_exchange_before=model[0],
        model_exchange_after=model[1], solved_problem=model[2], solution_fingerprint=solution_fingerprint(choice),
        exact=exact is not None, priced_input=input_exchange, priced_output=output_exchange,
    )
