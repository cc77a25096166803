"""One run's time: `--time-limit` from the run's start, handed down to every phase and solver, and every share of it
as data, here.

A run's phases draw on one `Deadline`. With more workers than one, a phase may take what the deadline leaves, less
what it sets aside for the phases after it (`share`), and no solve runs past the deadline (`SolverSettings.ends_at`).
With one worker (`deterministic`) a run is reproducible instead: a phase's limit is its share of the whole in CP-SAT's
deterministic units, the shares of one run's path summing to the limit, and a solve's wall limit is only a guard,
DETERMINISTIC_WALL times its units, so that the bytes written do not hang on the machine's speed or load: a slow or
busy machine takes longer than `--time-limit` rather than write other bytes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

RUN_SHARES: dict[str, float] = {
    # The first solve (`optimize`'s peak, or `fit`'s first choice), its widening included.
    "peak": 0.6,
    # The exact exchange at the peak found (`replan.pipeline.exchange_phase`), when the run expects one.
    "exchange": 0.4,
    # When no layout meets the budgets: the explanation, then with best effort the soft solve.
    "explain": 0.2,
    "best effort": 0.4,
}
"""Weights of a run's phases (`replan.pipeline`): a run's path (peak then exchange; peak alone; or peak, explain and
best effort) divides `--time-limit` among its phases in proportion to them."""

SHARES: dict[str, float] = {
    # Of a solve, the second one over the left-out choices, when no constructive choice meets the budgets
    # (`replan.widen.solve_space`).
    "widen": 0.4,
    # Of a solve, the bound over the choices a cap left out (`solvers.bounds.whole_scope`).
    "relaxation": 0.2,
    # Of a CP-SAT solve of a `fit` with edges, the Lagrangian starts together (`solvers.cpsat.searched_start`).
    "lagrangian start": 0.5,
    # Of a CP-SAT solve of a `fit` with edges too large for the whole model, the penalised network's start
    # (`solvers.wcsp`, when toulbar2 is installed): its rounds find what the neighbourhoods after it only polish (a
    # busy IOPDDL S run: the rounds' last 40 s took 0.75% off, the neighbourhoods' 60 s after them 0.25%; at 0.8
    # busy S gave +3.14% to +3.36%, at 0.9 +2.27%).
    "penalised start": 0.9,
    # Of a CP-SAT solve, the objective phases before the last together; the last has what is left, at least the
    # rest (`solvers.cpsat.run_phases`).
    "phases before the last": 0.8,
    # Of an explanation, the minimal conflict (`replan.explain`).
    "conflict": 0.6,
    # Of an explanation, the lowest peak outside the conflict.
    "lowest peak": 0.1,
    # Of an explanation, each budget's least raise that fits.
    "budget raises": 0.2,
    # Of a sweep's per-point limit, the exact exchange at each walked peak (`replan.sweep.exact_front`): the walk
    # has the whole of it (a front of the reference plan walks some 50 peaks).
    "point exchange": 0.2,
}
"""Of a phase's or a solve's own time, each of its parts."""

DETERMINISTIC_WALL = 20.0
"""With one worker, a solve's wall limit per deterministic unit it may use: a guard, not the limit. Models with pair
booleans run few units a second: the exact exchange of unroll3 in scope `full` used 2.6 units in 15 s on a quiet
2-core machine (5.7 s a unit), so a guard of 4 s a unit cut it under a little load and the bytes written changed
from process to process; 20 leaves that model 3.5 times its quiet speed."""

FLOOR = 0.05
"""Seconds at least for a solve to be asked at all (CP-SAT answers a hinted model in a few hundredths)."""


def part(name: str, seconds: float) -> float:
    """`name`'s share (SHARES) of `seconds`."""
    return SHARES[name] * seconds


@dataclass(frozen=True)
class Deadline:
    """A run's time limit, from the moment it started (`time.perf_counter()`), and whether its solves count CP-SAT's
    deterministic time (one worker)."""

    seconds: float
    started: float
    deterministic: bool = False
    reserve: float = 0.0
    """Seconds set aside at the end for the work after the last phase (the rewrite and the write): the phases end
    that much before the limit."""

    @classmethod
    def starting(cls, seconds: float, deterministic: bool, started: float | None = None,
                 reserve: float = 0.0) -> Deadline:
        return cls(seconds, time.perf_counter() if started is None else started, deterministic, reserve)

    @property
    def ends_at(self) -> float:
        """When the phases end: the limit less the reserve."""
        return self.started + self.seconds - self.reserve

    def left(self) -> float:
        """Seconds before the deadline (0 past it)."""
        return max(self.ends_at - time.perf_counter(), 0.0)

    def share(self, phase: str, path: tuple[str, ...], asked_by: str | None = None) -> float:
        """The limit of `phase` on the run's `path` of phases (RUN_SHARES; a phase not on it comes last):
        deterministic, its part of the whole (CP-SAT's units: the parts of a path sum to the limit); else its part of
        what the deadline leaves, shared with the phases after it (the last takes all that is left). `asked_by`: an
        earlier phase of `path`, now starting, that sets this later one's part aside."""
        path = path if phase in path else (*path, phase)
        if self.deterministic:
            return max(RUN_SHARES[phase] / sum(RUN_SHARES[p] for p in path) * self.seconds, FLOOR)
        rest = sum(RUN_SHARES[p] for p in path[path.index(asked_by or phase):])
        return max(RUN_SHARES[phase] / rest * self.left(), FLOOR)
