"""`plan.forked`: a call made in a forked copy of the process gives what it gives here (its result, or what it
raises), is made here when the copy cannot answer, and ends with the context that started it."""

from __future__ import annotations

import os
import time

import pytest

from ipuplan.plan.forked import Forked


def in_the_copy(parent: int) -> bool:
    return os.getpid() != parent


def test_a_copys_result_is_the_calls():
    parent = os.getpid()
    with Forked(lambda: (in_the_copy(parent), sum(range(1000)))) as call:
        assert call.forked
        assert call.result() == (True, 499_500)


def test_what_the_copy_raises_is_raised_here():
    with Forked(int, "twelve") as call:
        assert call.forked
        with pytest.raises(ValueError, match="twelve"):
            call.result()


def test_a_copy_that_dies_is_made_here():
    parent = os.getpid()

    def dies_in_the_copy() -> str:
        if in_the_copy(parent):
            os._exit(1)
        return "made here"

    with Forked(dies_in_the_copy) as call:
        assert call.result() == "made here"


def test_a_result_that_does_not_pickle_is_made_here():
    parent = os.getpid()
    with Forked(lambda: (lambda: in_the_copy(parent))) as call:  # a function does not pickle
        assert call.result()() is False


def test_without_a_fork_the_call_is_made_when_its_result_is_asked_for():
    made = []
    call = Forked(made.append, 1, fork=False)
    assert not call.forked and made == []
    call.result()
    assert made == [1]


def test_a_copy_whose_result_is_not_wanted_ends_with_its_context(tmp_path):
    mark = tmp_path / "still running"
    with Forked(lambda: time.sleep(1) or mark.touch()) as call:
        assert call.forked
    time.sleep(2)
    assert not mark.exists()
