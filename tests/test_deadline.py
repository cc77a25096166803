"""One deadline per run (`solvers.deadline`): its phases' limits are shares of it, summing to the limit with one worker
(deterministic units) and leaving the later phases their part with more; every share is data in one place."""

from __future__ import annotations

import time

import pytest

from ipuplan.solvers.deadline import DETERMINISTIC_WALL, FLOOR, RUN_SHARES, SHARES, Deadline, part
from ipuplan.solvers.result import SolverSettings

PATHS = [("peak",), ("peak", "exchange"), ("peak", "explain"), ("peak", "explain", "best effort")]


@pytest.mark.parametrize("path", PATHS)
def test_with_one_worker_a_paths_shares_sum_to_the_limit(path):
    deadline = Deadline.starting(10.0, deterministic=True)
    shares = [deadline.share(phase, path) for phase in path]
    assert sum(shares) == pytest.approx(10.0)
    assert all(s == pytest.approx(10.0 * RUN_SHARES[p] / sum(RUN_SHARES[q] for q in path))
               for s, p in zip(shares, path))


def test_with_more_workers_a_phase_leaves_the_later_ones_their_part_and_the_last_takes_what_is_left():
    deadline = Deadline(10.0, time.perf_counter() - 4.0)  # 4 s of the 10 already spent
    left = deadline.left()
    assert 5.9 < left <= 6.0
    assert deadline.share("peak", ("peak", "exchange")) == pytest.approx(0.6 * left, abs=0.01)  # 40% set aside
    assert deadline.share("exchange", ("peak", "exchange")) == pytest.approx(left, abs=0.01)
    unmet = ("peak", "explain", "best effort")
    assert deadline.share("explain", unmet) == pytest.approx(left / 3, abs=0.01)  # weights 0.2 and 0.4 of what is left
    assert deadline.share("best effort", unmet, asked_by="explain") == pytest.approx(2 * left / 3, abs=0.01)
    assert Deadline(10.0, time.perf_counter() - 20.0).share("peak", ("peak",)) == FLOOR


def test_a_phase_not_on_the_path_is_priced_as_if_it_came_last():
    deadline = Deadline.starting(10.0, deterministic=True)
    assert deadline.share("exchange", ("peak",)) == deadline.share("exchange", ("peak", "exchange"))


def test_a_solves_wall_limit_never_passes_the_deadline_but_with_one_worker_is_only_a_guard():
    ends_at = time.perf_counter() + 1.0
    assert SolverSettings(ends_at=ends_at).wall(5.0) <= 1.0
    assert SolverSettings(ends_at=time.perf_counter() - 1.0).wall(5.0) == FLOOR
    assert SolverSettings().wall(5.0) == 5.0
    assert SolverSettings(deterministic=True, ends_at=ends_at).wall(5.0) == 5.0 * DETERMINISTIC_WALL


def test_parts_are_shares_of_one_table():
    assert part("widen", 10.0) == pytest.approx(10.0 * SHARES["widen"])
    assert all(0 < share < 1 for share in SHARES.values())
    with pytest.raises(KeyError):
        part("no such part", 1.0)
