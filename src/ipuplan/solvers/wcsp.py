"""A start for large problems with pairwise costs under budgets: the budgets priced into the candidates, per group,
and the whole problem solved as a weighted constraint network by toulbar2 (`pip install 'ipuplan[toulbar2]'`).

The IOPDDL contest's winning solver works so (ti2-group, "Soft constraints, strong solutions"): the limit is not a
constraint but a price on each group's bytes above its least, `weight[g] * spread[g][c]`, and a solver of pairwise
costs alone (no rows) takes the whole problem at once, which lets thousands of groups move together (a parameter
replicated, its gathers gone, and room made for it elsewhere): what our moves of a few groups at a time do not find
(IOPDDL K: our neighbourhood search stays at 4.7-5.1 G, this start and the search after it reach 2.3-2.4 G). Each
round solves at the weights so far (with two processes, at two levels of them at once, `Solvers`; every other round
the lower one from the best valid choice so far, `LEVELS`), repairs its choices (the neighbourhoods' repair,
`lagrange.relieve`, `unforbid`, `descend`: over the limits by a little, moved within them), keeps the best, and moves
each weight within a bracket: up where the group is live at a row over a limit (it was "broken" at that weight), down
where it is not, halfway (geometrically) once both are known.
With two processes, a round's choices are repaired in this process while the next round's solves run in its children
(a repair of a choice over the limit took 8-12 s on IOPDDL K and S, the solves 6 s: repaired after them, a core idled
most of each round).

Optional: `available()` says whether toulbar2 is installed; without it the Lagrangian start serves alone.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable

import numpy as np

from ipuplan.model.problem import FORBIDDEN, Problem
from ipuplan.plan.forked import Forked
from ipuplan.solvers.construct import GroupRows
from ipuplan.solvers.lagrange import choice_key, descend, group_rows, least_bytes, relieve, unforbid

SHORT_SECONDS, LONGEST_SECONDS = 3, 12
"""toulbar2's CPU seconds per round (whole seconds): SHORT_SECONDS, doubled (up to LONGEST_SECONDS) each time a solve
from no start finds nothing in them. More rounds let the weights settle, fewer seconds make each round's choice
worse, and too few find nothing: on IOPDDL K 2 s give a penalised cost within 0.5% of 6 s's; on S toulbar2's
preprocessing takes 2.7 s and its first dive ends at 6.1 s at some weights (the first times 0.7), so that 3 s find
nothing there and 6 s barely; on M every solve ends by itself within 2 s. Busy, one run each: K at 3 s +0.11%,
+0.81%, +1.86%, +3.64%, +4.76%, +4.76%, at 6 s +3.05%, +8.10%; S at 3 s throughout +18.27%, at 6 s +3.20% to
+3.36%. Alone, two processes: K at 6 s 2.33 G, at 10 s 2.39 G; S 1.60 G at either."""
TOP = 10**15
"""toulbar2's forbidden cost: above any sum of the contest's finite costs (int64 either way)."""
FIRST_WEIGHT = 0.25
"""Of the ratio of the spreads of cost to those of bytes, the weight every group starts at."""
SAFE_SCALE, FIRST_SECONDS = 16.0, 3
"""The first round: every weight SAFE_SCALE times the first, for FIRST_SECONDS, so that a valid choice is known
early (IOPDDL K at 30 times a price that worked: valid at 4.75 G, a tenth of its timeout in)."""
UP, DOWN = 2.0, 1.25
"""A weight's factor while its bracket is open above (broken at every weight tried) or below (never broken)."""
MOST = SAFE_SCALE ** 2
"""A weight at most so many times the first: a group broken at every weight does not climb without end (its prices
stay below toulbar2's top cost, which would forbid its candidates)."""
LEVELS = (2 ** -0.5, 2 ** 0.5)
"""With two processes, each round solves at these times the weights: each bracket learns at two weights. Every other
round, once a valid choice is known, the lower level (the only one with one process) starts from the best of them: a
search near it at weights that let it pass the limits a little, whose choice the repair brings back; the rounds
between start cold, to find other basins. The penalised rounds alone, 140 s on IOPDDL K and 190 s on S, one run
each, best valid choice:

| rounds' lower level | K | S |
|---|---:|---:|
| always cold | 2.277 G (none better after 75 s), 2.314 G, 2.376 G | 1.574 G |
| started every round | 2.262 G (each round from 77 s on 2.26-2.31 G) | 1.621 G (stuck at 1.62 G from 70 s on) |
| started every other round | 2.243 G | 1.523 G |

(the best known: K 2.257 G, S 1.535 G)."""
SHED_SHARE = 0.1
"""Of the time left, the most `shed_least_bytes` takes."""
REPAIR_SECONDS = 5.0
"""Each step of a round's repair at most."""
REPAIR_SHARE, REPAIR_MOST = 0.1, 60.0
"""Of the time left, the most the neighbourhoods' repair of a round takes (at least REPAIR_SECONDS, at most
REPAIR_MOST)."""
FAR_OVER = 0.02
"""A choice whose worst row passes a limit by more than this share of it is not repaired once a valid choice is known:
on IOPDDL K and S such repairs took 7-22 s each (the workers' next solves slowed beside them) and none came near the
best valid (S: 1.14 GB over, repaired to 2.68 G where the best was 1.65 G; K: 3% over to 2.92 G, the best 2.31 G);
the best came from choices within it (K: 0.4% over, 2.289 G repaired to 2.314 G; S: 1.3% over, 1.557 G to 1.574 G)."""


def available() -> bool:
    try:
        import pytoulbar2  # noqa: F401
    except ImportError:
        return False
    return True


class Weights:
    """Per group, its price per byte above its least, and the bracket it is sought in: the highest weight at which the
    group was broken (live at a row over a limit), the lowest at which it was not."""

    def __init__(self, start: np.ndarray) -> None:
        self.now = start.astype(np.float64)
        self.most = self.now * MOST
        self.broken_at = np.zeros(len(start))
        self.whole_at = np.full(len(start), np.inf)

    def learn(self, broken: np.ndarray, at: np.ndarray) -> None:
        """The brackets after a choice made at weights `at` broke the `broken` groups."""
        # a bracket that the other groups' moves made wrong opens again on its wrong side
        self.whole_at = np.where(broken & (at >= self.whole_at), at * UP, self.whole_at)
        self.broken_at = np.where(~broken & (at <= self.broken_at), at / DOWN, self.broken_at)
        self.broken_at = np.where(broken, np.maximum(self.broken_at, at), self.broken_at)
        self.whole_at = np.where(broken, self.whole_at, np.minimum(self.whole_at, at))

    def move(self) -> None:
        """Each weight to the geometric middle of its bracket, or beyond its open end."""
        closed = np.isfinite(self.whole_at) & (self.broken_at > 0)
        middle = np.sqrt(self.broken_at * np.where(closed, self.whole_at, 1.0))
        self.now = np.minimum(np.where(closed, middle, np.where(np.isfinite(self.whole_at), self.now / DOWN,
                                                                self.now * UP)), self.most)


def spreads(problem: Problem) -> list[np.ndarray]:
    """Per group, per candidate: its most limit-weighted bytes at any of its terms above the group's least (summed
    over the limits)."""
    table, found = problem.table, [np.zeros(k) for k in problem.candidate_counts]
    for limit in problem.limits:
        weighted = (limit.standard * table.standard + limit.interleaved * table.interleaved).astype(np.float64)
        most = [np.zeros(k) for k in problem.candidate_counts]
        for term, (g, start) in enumerate(zip(table.group.tolist(), table.start.tolist())):
            here = weighted[start:start + problem.candidate_counts[g]]
            most[g] = np.maximum(most[g], here - here.min())
        found = [f + m for f, m in zip(found, most)]
    return found


def first_weight(problem: Problem, spread: list[np.ndarray]) -> float:
    """FIRST_WEIGHT of the problem's spreads of cost (its groups' and its edges' allowed ones) to its spreads of
    bytes: a price of the same order as what moving bytes costs."""
    def allowed_spread(costs: np.ndarray) -> float:
        allowed = costs[costs < FORBIDDEN]
        return float(allowed.max() - allowed.min()) if len(allowed) else 0.0

    cost = sum(allowed_spread(np.asarray(c)) for c in problem.exchange)
    cost += sum(allowed_spread(edge.costs) for edge in problem.edges)
    room = sum(float(s.max()) for s in spread)
    return FIRST_WEIGHT * cost / room if room else 0.0


def broken_groups(problem: Problem, choice) -> np.ndarray:
    """Per group, whether it is live at a row over a limit under `choice`."""
    table = problem.table
    over = problem.usage(choice).excess(problem.limits) > 0
    counted = np.concatenate([[0], np.cumsum(over)])
    found = np.zeros(problem.groups, dtype=bool)
    found[table.group[table.span_term[counted[table.span_end] > counted[table.span_first]]]] = True
    return found


class Network:
    """The problem's pairwise costs as toulbar2 reads them, laid out once for every round."""

    def __init__(self, problem: Problem) -> None:
        self.counts = problem.candidate_counts
        self.unary = [np.minimum(np.asarray(costs, dtype=np.float64), TOP) for costs in problem.exchange]
        self.edges = [([edge.a, edge.b], np.minimum(edge.costs, TOP).ravel().tolist()) for edge in problem.edges]

    def unpriced(self):
        """toulbar2's network of the variables and the pairwise costs: what every solve shares (on IOPDDL K 1.0 s of
        each solve's 7.2 s, where the penalised unary costs take 0.3 s)."""
        import pytoulbar2

        pytoulbar2.tb2.option.lds = 4  # limited discrepancy search: a heuristic, not a proof (what ti2 set)
        network = pytoulbar2.CFN(TOP, vac=0, verbose=-1)
        for g, count in enumerate(self.counts):
            network.AddVariable(f"g{g}", range(count))
        for groups, costs in self.edges:
            network.AddFunction(groups, costs)
        return network

    def solved(self, penalty: list[np.ndarray], seconds: int, seed: int,
               start: tuple[int, ...] | None = None, network=None) -> tuple[int, ...] | None:
        """The least of the costs plus `penalty` toulbar2 finds in `seconds` (None: none), from `start` if given: its
        cost the first upper bound, its values the first tried (toulbar2's `read_solution`, its `-x`): the search
        looks near it for a cheaper choice (None when it finds none). On `network` (`unpriced`, which the solve
        uses up) if given."""
        import pytoulbar2

        network = self.unpriced() if network is None else network
        pytoulbar2.tb2.option.seed = seed
        for g, (own, extra) in enumerate(zip(self.unary, penalty)):
            priced = np.where(own >= TOP, TOP, np.minimum(np.rint(own + extra), TOP))
            network.AddFunction([g], priced.astype(np.int64).tolist())
        if start is not None:
            _read_start(network, start)
        found = network.Solve(showSolutions=0, timeLimit=max(int(seconds), 1))
        return None if not found else tuple(int(c) for c in found[0])


def _read_start(network, start: tuple[int, ...]) -> None:
    """`start` given to toulbar2 as its first solution (it reads one only from a file)."""
    with tempfile.TemporaryDirectory(prefix="ipuplan-tb2-") as folder:
        path = os.path.join(folder, "start.sol")
        with open(path, "w") as file:
            file.write(" ".join(map(str, start)) + "\n")
        network.CFN.read_solution(path, True)


Solved = tuple[tuple[int, ...] | None, float]
"""A solve's choice (None: none found) and its wall seconds."""


def _timed(network: Network, penalty: list[np.ndarray], seconds: int, seed: int,
           start: tuple[int, ...] | None, unpriced=None) -> Solved:
    """`Network.solved`, and the wall seconds it took; no choice where toulbar2 raised (a heuristic solve that fails
    must not end a run that holds a valid choice)."""
    began = time.perf_counter()
    try:
        found = network.solved(penalty, seconds, seed, start, unpriced)
    except Exception:  # noqa: BLE001 - toulbar2's own (tb2.Contradiction, SolverOut) and whatever it passes up
        found = None
    return found, time.perf_counter() - began


def _can_fork() -> bool:
    return hasattr(os, "fork")


GRACE = 2.0
"""Seconds past its deadline and its own CPU limit a solve may run before it is killed (a child that hangs)."""


class Solvers:
    """toulbar2 (one thread) on one network, `processes` solves at a time (two at most, LEVELS). Each solve runs in a
    child forked from this process, which holds the unpriced network built once (`Network.unpriced`): a solve that
    crashes or exits (toulbar2 calls `exit` on some errors) ends its child only, and gives no choice: a busy IOPDDL M
    run ended with exit 1 once in three, cause not found, when a pool of workers solved and a worker's death moved the
    solves into this process. In this process, rebuilt each time, where the platform cannot fork."""

    def __init__(self, network: Network, processes: int, deadline: float) -> None:
        self.network, self.processes, self.deadline = network, processes, deadline
        self.unpriced = network.unpriced() if _can_fork() else None
        self.running: list[Forked[Solved]] = []

    @property
    def parallel(self) -> bool:
        """Whether a round's solves run at once, beside this process."""
        return self.processes > 1 and self.unpriced is not None

    def submitted(self, penalties: list[list[np.ndarray]], seconds: int, seed: int,
                  starts: list[tuple[int, ...] | None]) -> Callable[[], list[Solved]]:
        """The solves begun (with more processes than one, while this process goes on), each from its start (None:
        none), and what waits for their choices and wall seconds; with one process each is made when waited for."""
        solves = [(penalty, seconds, seed + k, start) for k, (penalty, start) in enumerate(zip(penalties, starts))]
        if self.unpriced is None:
            return lambda: [_timed(self.network, *solve) for solve in solves]
        if self.processes > 1:
            begun = [self._forked(*solve) for solve in solves]
            return lambda: [self._waited(call) for call in begun]
        return lambda: [self._waited(self._forked(*solve)) for solve in solves]

    def _forked(self, penalty: list[np.ndarray], seconds: int, seed: int,
                start: tuple[int, ...] | None) -> Forked[Solved]:
        """The solve begun in a forked child, ended GRACE past the deadline or past its own limit; a child that gives
        no answer gives no choice (never the solve again in this process). It forks without `allow_forks`: toulbar2
        takes no lock of this process, as the pool of workers it replaces did not."""
        began = time.perf_counter()
        call = Forked(_timed, self.network, penalty, seconds, seed, start, self.unpriced, always=True,
                      until=max(self.deadline, began + seconds) + GRACE,
                      lost=lambda: (None, time.perf_counter() - began))
        self.running.append(call)
        return call

    def _waited(self, call: Forked[Solved]) -> Solved:
        """The child's answer, with its own wall seconds: this process may have come to read late."""
        try:
            return call.result()
        finally:
            self.running.remove(call)

    def close(self) -> None:
        for call in self.running:
            call.cancel()
        self.running.clear()
        self.unpriced = None


def shed_least_bytes(problem: Problem, index: GroupRows, deadline: float) -> tuple[int, ...] | None:
    """Each group's least bytes, its forbidden picks shed (`unforbid`) and descended, where that is valid (IOPDDL K, M,
    S: valid in 1.4-2.7 s, far from the best; toulbar2 finds nothing in S's first round); None where not. At most
    SHED_SHARE of the time left."""
    ends = time.perf_counter() + SHED_SHARE * max(deadline - time.perf_counter(), 0.0)
    least = least_bytes(problem)
    if problem.usage(least).violation(problem.limits):
        return None
    shed = unforbid(problem, least, index, deadline=ends)
    return tuple(descend(problem, shed, index, deadline=ends)) if problem.valid(tuple(shed)) else None


def far_over(problem: Problem, choice) -> bool:
    """Whether `choice`'s worst row passes a limit by more than FAR_OVER of it."""
    worst = problem.usage(choice).worst_excess(problem.limits)
    return any(over > FAR_OVER * limit.bytes for over, limit in zip(worst, problem.limits))


def repaired(problem: Problem, choice, index: GroupRows, deadline: float,
             repair: Callable[..., list[int]] | None = None, repair_seconds: float = REPAIR_SECONDS,
             beside_valid: bool = False) -> tuple[int, ...]:
    """`choice` moved within the limits where a few moves can, then descended (`descend`); each step at most
    REPAIR_SECONDS and none past `deadline`. The moves: `relieve`'s then `unforbid`'s, and `repair(choice,
    deadline=...)` (the neighbourhoods, for `repair_seconds`, if given) on a choice still over with no forbidden pick;
    a choice a little over (not `far_over`) goes to `repair` first: on IOPDDL K `relieve` spent its 5.5 s and left
    such choices over, where the neighbourhoods alone made them valid in 1.5-2.7 s at the same cost or less.
    `beside_valid` (a valid choice is known): the neighbourhoods alone, and a choice they leave over is given back
    as it is. On busy IOPDDL K runs the moves and the second neighbourhoods after them took up to 20 s of a repair
    (this process's CPU, which the rounds' solves share) and gave nothing valid near the best (+18% to +66% of it)."""
    def ends(seconds: float = REPAIR_SECONDS) -> float:
        return min(time.perf_counter() + seconds, deadline)

    def over(choice) -> bool:
        return problem.usage(choice).violation(problem.limits) > 0

    def by_neighbourhoods(choice):
        if repair is None or not over(choice) or problem.forbidden_in(tuple(choice)) or time.perf_counter() >= deadline:
            return choice
        return repair(list(choice), deadline=ends(repair_seconds))

    def by_moves(choice):
        if not over(choice):
            return choice
        return unforbid(problem, relieve(problem, choice, index, deadline=ends()), index, deadline=ends())

    if beside_valid:
        steps = (by_neighbourhoods,)
    else:
        steps = ((by_neighbourhoods,) if not far_over(problem, choice) else ()) + (by_moves, by_neighbourhoods)
    for step in steps:
        choice = step(choice)
    if beside_valid and over(choice):
        return tuple(choice)
    return tuple(descend(problem, choice, index, deadline=ends()))


class _Best:
    """The best choice offered so far (`choice_key`), and who hears of each better valid one."""

    def __init__(self, problem: Problem, on_valid: Callable[[tuple[int, ...]], None] | None) -> None:
        self.problem, self.on_valid = problem, on_valid
        self.key: tuple[int, int, int] | None = None
        self.choice: tuple[int, ...] | None = None

    @property
    def valid(self) -> bool:
        return self.key is not None and self.key[:2] == (0, 0)

    def offer(self, choice: tuple[int, ...]) -> None:
        found = choice_key(self.problem, choice)
        if self.key is not None and found >= self.key:
            return
        if self.on_valid is not None and found[:2] == (0, 0):  # the rounds take minutes: each better one is told
            self.on_valid(choice)
        self.key, self.choice = found, choice


def _round(problem: Problem, solvers: Solvers, weights: Weights, spread: list[np.ndarray], levels: tuple[float, ...],
           seconds: int, seed: int, start: tuple[int, ...] | None) -> Callable[[], tuple[list, float, bool]]:
    """toulbar2's solves at the weights times each of `levels` (one each, at once; the first from `start`) begun,
    and what waits for their choices, learns the weights' brackets from each and gives the choices, the longest
    solve's wall seconds and whether a solve from no start found nothing; the weights are not moved."""
    at = [weights.now * level for level in levels]
    starts = [start if k == 0 else None for k in range(len(levels))]
    waited = solvers.submitted([[w * s for w, s in zip(weighted.tolist(), spread)] for weighted in at], seconds, seed,
                               starts)

    def learnt() -> tuple[list[tuple[int, ...]], float, bool]:
        found = waited()
        for (choice, _), weighted in zip(found, at):
            if choice is not None:
                weights.learn(broken_groups(problem, choice), weighted)
        missed = any(choice is None and begun is None for (choice, _), begun in zip(found, starts))
        return [choice for choice, _ in found if choice is not None], max(wall for _, wall in found), missed
    return learnt


def penalised(problem: Problem, deadline: float, seed: int = 0,
              on_valid: Callable[[tuple[int, ...]], None] | None = None,
              repair: Callable[..., list[int]] | None = None, rounds: int | None = None,
              processes: int = 1) -> tuple[int, ...] | None:
    """The best choice (`choice_key`) of the rounds that fit before `deadline` (a `time.perf_counter` value), each
    repaired (`repaired`; `repair(choice, deadline=...)` as `lagrange.lagrangian` takes it); None when no round found
    one. `on_valid` hears of each better valid one; `rounds`: at most so many; `processes`: toulbar2's solves at once
    (each round at as many levels of the weights, LEVELS). The shed least bytes (`shed_least_bytes`) come first: the
    first valid choice early. toulbar2 counts its limit in CPU seconds: a round's limit is SHORT_SECONDS, doubled
    each time a solve from no start finds nothing in them (up to LONGEST_SECONDS), at most the time left over the last
    round's wall seconds per second asked (a busy machine stretches it). Once a valid choice is known, every other
    round's lower level starts from the best (LEVELS), and a choice far over the limits (`far_over`) is not repaired
    (the rounds learn from it all the same)."""
    index, network, spread = group_rows(problem), Network(problem), spreads(problem)
    weights = Weights(np.where([s.max() > 0 for s in spread], first_weight(problem, spread), 0.0))
    best, overhead, stretch, round_seconds = _Best(problem, on_valid), 0.0, 1.0, SHORT_SECONDS
    if (early := shed_least_bytes(problem, index, deadline)) is not None:
        best.offer(early)  # valid in 1.4-2.7 s on IOPDDL K, M, S, where the first round's took 6.4 s (S: none)
    solvers = Solvers(network, min(processes, len(LEVELS)), deadline)
    levels = LEVELS if solvers.parallel else (1.0,)
    pending: list[tuple[int, ...]] = []

    def offer_repaired(choices: list[tuple[int, ...]], began: float) -> None:
        for choice in choices:
            if not (best.valid and far_over(problem, choice)):
                best.offer(repaired(problem, choice, index, deadline, repair, _repair_seconds(deadline, began),
                                    beside_valid=best.valid))

    try:
        for round_ in range(10**9 if rounds is None else rounds):
            began = time.perf_counter()
            # the time left holds this round's solves and the repair of its choices after them (and, one at a time,
            # the repair of the last round's before them)
            seconds = int(min(round_seconds if round_ else FIRST_SECONDS,
                              (deadline - began - overhead * (1 if solvers.parallel else 2)) / stretch))
            if seconds < 1:
                break
            learnt = _round(problem, solvers, weights, spread, (SAFE_SCALE,) if round_ == 0 else levels, seconds,
                            seed + 10 * round_, best.choice if round_ % 2 and best.valid else None)
            # the last round's choices repaired while this round's solves run in the children: both cores busy
            offer_repaired(pending, began)
            overhead = time.perf_counter() - began if pending else overhead
            pending, wall, missed = learnt()
            stretch = max(wall / seconds, 1.0)
            round_seconds = min(2 * round_seconds, LONGEST_SECONDS) if missed else round_seconds
            if round_ > 0 and pending:  # the first round's brackets are kept, the search begins at the first weights
                weights.move()
        offer_repaired(pending, time.perf_counter())  # the last round's, in the time left
    finally:
        solvers.close()
    return best.choice


def _repair_seconds(deadline: float, began: float) -> float:
    return max(REPAIR_SECONDS, min(REPAIR_SHARE * (deadline - began), REPAIR_MOST))
