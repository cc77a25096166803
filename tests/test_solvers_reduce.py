"""`solvers.reduce`: dominated candidates dropped before any backend sees them, the input always kept, and
a reduced choice lifted back to the problem's candidates."""

from __future__ import annotations

import numpy as np

from ipuplan.model.problem import Problem, StepRow
from ipuplan.solvers import SolveResult, SolverSettings, SolveStatus, model_size
from ipuplan.solvers.reduce import on_undominated, reduce

# One group of one value, five candidates at one row (standard bytes), the input is candidate 3:
#   bytes     50  40  40  60  55
#   exchange   0   5   5   0   0
# 2 is 1 again (identical: the lower index stays); 4 has more bytes than 0 at the same cost; 0, 1 and 3
# each beat the others in bytes or in exchange + changes, and 3 is the input.
FIVE = Problem(candidate_counts=(5,), input_choice=(3,), group_sizes=(1,),
               rows=(StepRow(0, 10, 0, ((0, np.array([50, 40, 40, 60, 55]), np.zeros(5, dtype=np.int64)),)),),
               exchange=((0, 5, 5, 0, 0),), limits=(), steps_total=1)


def test_dominated_and_repeated_candidates_are_dropped_and_the_input_kept():
    reduced = reduce(FIVE)
    assert reduced.kept[0].tolist() == [0, 1, 3] and reduced.dropped == 2
    assert reduced.problem.candidate_counts == (3,) and reduced.problem.input_choice == (2,)
    assert reduced.problem.exchange == ((0, 5, 0),)
    assert reduced.problem.usage((2,)).peak == FIVE.usage((3,)).peak == 70


def test_a_backend_on_undominated_candidates_answers_in_the_problem_s_indices():
    seen = []

    def the_input(problem: Problem, settings: SolverSettings, progress) -> SolveResult:
        seen.append(problem.candidate_counts)
        return SolveResult(SolveStatus.FEASIBLE, problem.input_choice, problem.usage(problem.input_choice).peak, 0,
                           solve_seconds=0.0, first_solution_seconds=None, **model_size(problem))

    result = on_undominated(the_input)(FIVE, SolverSettings())
    assert seen == [(3,)] and (result.choice, result.candidates_dropped, result.peak) == ((3,), 2, 70)
