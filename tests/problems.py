"""Hand-made `Problem`s for the tests of model/ and solvers/: a short way to write one, the few that several test
files work out by hand, and what every backend promises of a result."""

from __future__ import annotations

import itertools

import numpy as np

from ipuplan.model.objective import Objective
from ipuplan.model.problem import Problem, StepRow
from ipuplan.plan.budgets import Budgets


def b(*numbers: int) -> np.ndarray:
    return np.array(numbers, dtype=np.int64)


def problem(rows, counts, *, sizes=None, exchange=None, limits=(), input_choice=None, steps_total=None,
            edges=()) -> Problem:
    """Groups of one value each, the input at candidate 0, no exchange and no edge, unless told otherwise."""
    return Problem(
        candidate_counts=counts,
        input_choice=input_choice or (0,) * len(counts),
        group_sizes=sizes or (1,) * len(counts),
        rows=tuple(rows),
        exchange=exchange or tuple((0,) * n for n in counts),
        limits=limits,
        steps_total=steps_total or len(rows),
        edges=tuple(edges),
    )


# step 0 = 100 + A[50, 20] (the peak step), step 1 = 10 + B[30, 10]
TWO_STEPS = problem([StepRow(0, 100, 0, ((0, b(50, 20), b(0, 0)),)), StepRow(1, 10, 0, ((1, b(30, 10), b(0, 0)),))],
                    (2, 2))

# A must trade standard for interleaved at step 0 to meet a 60-byte standard budget; its smallest
# candidate (by total bytes) is standard, so the constructive repair has to move it. Interleaved budget 100.
#   step 0 = 20 std + A[std 50 | il 55] + B[std 30, 10]
BUDGETED = problem([StepRow(0, 20, 0, ((0, b(50, 0), b(0, 55)), (1, b(30, 10), b(0, 0))))], (2, 2),
                   limits=Budgets(160, 100, 0).limits)

# Both steps hold A and B, each at 50 in the input (peak 100). A's other candidate is small at step 0 and
# large at step 1, B's the other way round: either switch alone raises a step to 120, both give 80.
#   step 0 = A[50, 10] + B[50, 70]   step 1 = A[50, 70] + B[50, 10]   per-step bound 60
STALL = problem(
    [StepRow(0, 0, 0, ((0, b(50, 10), b(0, 0)), (1, b(50, 70), b(0, 0)))),
     StepRow(1, 0, 0, ((0, b(50, 70), b(0, 0)), (1, b(50, 10), b(0, 0))))],
    (2, 2),
)


def valid_choices(p: Problem):
    """Every choice that makes no forbidden pick and meets the budgets, by enumeration."""
    for choice in itertools.product(*(range(n) for n in p.candidate_counts)):
        if not p.forbidden_in(choice) and not p.usage(choice).violation(p.limits):
            yield choice


def best_by_brute_force(p: Problem, objective: Objective) -> tuple[int, ...] | None:
    """The objective's terms in order at the best valid choice, by enumeration: (peak, exchange, changed values),
    with `fit` (exchange, changed values); None when no choice is valid."""
    return min((((p.usage(c).peak,) if objective == Objective.PEAK else ()) + (p.exchange_of(c), p.changed_of(c))
                for c in valid_choices(p)), default=None)


def consistent(p: Problem, result) -> None:
    """What every backend promises about a result that has a solution."""
    assert result.exchange_bytes == p.exchange_of(result.choice)
    assert result.changed_values == p.changed_of(result.choice)
    assert p.usage(result.choice).peak == result.peak
