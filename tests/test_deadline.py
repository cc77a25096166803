"""One deadline per run (`solvers.deadline`): its phases' limits are shares of it, summing to the limit with one worker
(deterministic units) and leaving the later phases their part with more; every share is data in one place."""

from __future__ import annotations

import time

import pytest

from ipuplan.replan.options import OptimizeOptions
from ipuplan.replan.pipeline import past_the_limit, prepare
from ipuplan.replan.size import MANDATORY_SECONDS, MANDATORY_SECONDS_PER_LIVE, TAIL_SECONDS_PER_LIVE, run_size
from ipuplan.solvers.deadline import (
    DETERMINISTIC_WALL,
    FLOOR,
    RUN_SHARES,
    SHARES,
    Deadline,
    part,
)
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


def test_the_rewrite_and_the_write_are_set_aside_at_the_end(reference_plan):
    reserve = run_size(reference_plan, OptimizeOptions()).tail_seconds
    assert reserve == pytest.approx(TAIL_SECONDS_PER_LIVE * sum(len(step.live) for step in reference_plan.steps))
    began = time.perf_counter() - 2.0  # a run prepared in 2 s
    deadline = Deadline.starting(10.0, False, began, reserve=reserve)
    assert deadline.ends_at == pytest.approx(began + 10.0 - reserve)
    assert deadline.share("peak", ("peak",)) == pytest.approx(8.0 - reserve, abs=0.01)
    # with one worker the phases' units are shares of the whole limit, whatever is set aside
    units = Deadline.starting(10.0, True, began, reserve=reserve)
    assert units.share("peak", ("peak", "exchange")) == pytest.approx(6.0)


def test_a_run_whose_mandatory_work_passes_its_limit_says_so_once_before_that_work(reference_plan):
    size = run_size(reference_plan, OptimizeOptions())
    assert size.mandatory_seconds == pytest.approx(MANDATORY_SECONDS + MANDATORY_SECONDS_PER_LIVE * size.live)
    heard: list[tuple[str, str]] = []
    limit = size.mandatory_seconds / 2
    prepare(reference_plan, OptimizeOptions(time_limit=limit), lambda name, detail: heard.append((name, detail)))
    names = [name for name, _ in heard]
    assert names[:2] == ["deadline", "analyse"] and names.count("deadline") == 1
    assert heard[0][1] == past_the_limit(size.mandatory_seconds, limit)
    assert f"about {size.mandatory_seconds:.1f} s" in heard[0][1] and f"--time-limit {limit:g} s" in heard[0][1]
    heard.clear()
    prepare(reference_plan, OptimizeOptions(time_limit=size.mandatory_seconds * 2),
            lambda name, detail: heard.append((name, detail)))
    assert "deadline" not in [name for name, _ in heard]
