"""`solvers.reduce`: dominated candidates dropped before any backend sees them, the input always kept, and
a reduced choice lifted back to the problem's candidates; the candidates kept are those no other beats, by a
candidate-by-candidate reading of the rule, however the groups are batched."""

from __future__ import annotations

import numpy as np
import pytest
from test_pairwise import PROBLEMS
from test_solvers_construct import unrolled, with_one_figure_more

from ipuplan.model.problem import Edge, Problem, StepRow
from ipuplan.solvers import SolveResult, SolverSettings, SolveStatus, model_size
from ipuplan.solvers import reduce as reduce_module
from ipuplan.solvers.construct import tie_ranks
from ipuplan.solvers.reduce import dominance, on_undominated, reduce

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


def many_rows(seed: int, steps: int = 30) -> Problem:
    """Five groups of 3-12 candidates over `steps` rows of small random bytes (ties and dominance are common, and at 30
    a group has more rows than `_no_more` reads first), with a chain of edges of small random costs."""
    rng = np.random.default_rng(seed)
    counts = tuple(int(n) for n in rng.choice([3, 4, 12], 5))
    rows = [StepRow(step, 0, 0, tuple((g, rng.integers(0, 3, counts[g]), rng.integers(0, 2, counts[g]))
                                      for g in sorted(rng.choice(5, int(rng.integers(1, 6)), replace=False).tolist())))
            for step in range(steps)]
    edges = [Edge(g, g + 1, rng.integers(0, 3, (counts[g], counts[g + 1]))) for g in range(4)]
    return Problem(candidate_counts=counts, input_choice=tuple(int(rng.integers(0, n)) for n in counts),
                   group_sizes=(1,) * 5, rows=tuple(rows), exchange=tuple(tuple(rng.integers(0, 3, n).tolist())
                                                                          for n in counts),
                   limits=(), steps_total=steps, edges=tuple(edges))


def undominated_one_by_one(p: Problem) -> list[list[int]]:
    """Per group, the candidates no other beats (the module docstring's rule), candidate by candidate."""
    ties = tie_ranks(p)
    kept = []
    for g, count in enumerate(p.candidate_counts):
        columns = [list(term[1]) for row in p.rows for term in row.terms if term[0] == g]
        columns += [list(term[2]) for row in p.rows for term in row.terms if term[0] == g]
        columns += [list(e.costs[:, n]) for e in p.edges if e.a == g for n in range(e.costs.shape[1])]
        columns += [list(e.costs[n, :]) for e in p.edges if e.b == g for n in range(e.costs.shape[0])]
        columns.append(list(ties[g]))
        kept.append([c for c in range(count)
                     if c == p.input_choice[g] or not any(beats(columns, d, c) for d in range(count) if d != c)])
    return kept


def beats(columns: list[list[int]], d: int, c: int) -> bool:
    """Whether `d` is no more than `c` in every column and not identical, or identical with a lower index."""
    no_more = all(row[d] <= row[c] for row in columns)
    same = all(row[d] == row[c] for row in columns)
    return no_more and (not same or d < c)


@pytest.mark.parametrize("batch", [1 << 24, 64])
@pytest.mark.parametrize("p", PROBLEMS[:12] + [many_rows(seed) for seed in range(8)])
def test_the_candidates_kept_are_those_no_other_beats_however_the_groups_are_batched(p, batch, monkeypatch):
    monkeypatch.setattr(reduce_module, "DOMINANCE_BATCH", batch)
    assert [kept.tolist() for kept in dominance(p).kept] == undominated_one_by_one(p)


# FIVE six times over, the last copy's candidate 0 two bytes larger (52): 4 (51) then beats it. A group's kept
# candidates are its block's alone, worked out once per distinct block: the copies share one, the last has its own.
FIVES = with_one_figure_more(unrolled(with_one_figure_more(FIVE, 0, 0, 4, -4), 6), 5, 0, 0, 2)


@pytest.mark.parametrize("p", [FIVES] + [with_one_figure_more(unrolled(many_rows(seed, steps), 7), 3 * steps + 1, 0, 0)
                                         for seed in range(6) for steps in (3, 30)])
def test_copies_of_a_group_keep_what_each_alone_keeps_though_one_differs_in_a_figure(p, monkeypatch):
    expected = undominated_one_by_one(p)
    assert [kept.tolist() for kept in dominance(p).kept] == expected
    # every block hashing alike: the blocks compared in full still tell them apart
    monkeypatch.setattr(reduce_module, "_block_hashes", lambda flat: np.zeros(len(flat), dtype=np.uint64))
    assert [kept.tolist() for kept in dominance(p).kept] == expected


def test_fives_keep_their_block_s_candidates_and_the_changed_copy_its_own():
    assert [kept.tolist() for kept in dominance(FIVES).kept] == [[0, 1, 3]] * 5 + [[1, 3, 4]]
