"""`plan.forked`: a call made in a forked copy of the process gives what it gives here (its result, or what it
raises), is made here when the copy cannot answer, once, and ends with the context that started it or with an
interrupt of the wait; forks are off until allowed (or the call forks `always`); a caller may have its own result
where the copy gives none, and a time past which the copy is ended."""

from __future__ import annotations

import _thread
import os
import threading
import time

import pytest

from ipuplan.plan import forked
from ipuplan.plan.forked import Forked, ForkedError


def in_the_copy(parent: int) -> bool:
    return os.getpid() != parent


class NeedsTwo(Exception):
    """An exception that pickles but does not unpickle (pickle calls it with its one `args`)."""

    def __init__(self, first: str, second: str) -> None:
        super().__init__(f"{first} {second}")


def test_forks_are_off_until_allowed():
    assert not forked.forks_allowed()
    with Forked(os.getpid) as call:
        assert not call.forked and call.result() == os.getpid()


def test_a_caller_can_ask_whether_forks_are_allowed(forks_allowed):
    assert forked.forks_allowed()


def test_a_copys_result_is_the_calls(forks_allowed):
    parent = os.getpid()
    with Forked(lambda: (in_the_copy(parent), sum(range(1000)))) as call:
        assert call.forked
        assert call.result() == (True, 499_500)


def test_what_the_copy_raises_is_raised_here_with_the_copys_trace(forks_allowed):
    with Forked(int, "twelve") as call:
        assert call.forked
        with pytest.raises(ValueError, match="twelve") as raised:
            call.result()
    assert isinstance(raised.value.__cause__, ForkedError) and "int" in str(raised.value.__cause__)


def test_a_copy_that_dies_is_made_here(forks_allowed):
    parent = os.getpid()

    def dies_in_the_copy() -> str:
        if in_the_copy(parent):
            os._exit(1)
        return "made here"

    with Forked(dies_in_the_copy) as call:
        assert call.result() == "made here"


def test_a_result_that_does_not_pickle_is_made_here(forks_allowed):
    parent = os.getpid()
    with Forked(lambda: (lambda: in_the_copy(parent))) as call:  # a function does not pickle
        assert call.result()() is False


def test_an_exception_that_does_not_unpickle_is_made_here_and_raised_once_for_all(forks_allowed):
    made = []

    def raises() -> None:
        made.append(1)  # seen here only when made here
        raise NeedsTwo("one", "two")

    with Forked(raises) as call:
        for _ in range(2):
            with pytest.raises(NeedsTwo, match="one two"):
                call.result()
    assert made == [1]


def test_without_a_fork_the_call_is_made_once_when_its_result_is_asked_for():
    made = []
    call = Forked(made.append, 1, fork=False)
    assert not call.forked and made == []
    call.result()
    call.result()
    assert made == [1]


def test_a_copy_whose_result_is_not_wanted_ends_with_its_context(tmp_path, forks_allowed):
    mark = tmp_path / "still running"
    with Forked(lambda: time.sleep(1) or mark.touch()) as call:
        assert call.forked
    time.sleep(2)
    assert not mark.exists()


def test_an_interrupt_handed_to_the_waiting_thread_ends_the_wait_and_the_copy(tmp_path, forks_allowed):
    """As `cli.signals` hands SIGINT over (`_thread.interrupt_main`, no signal): the wait looks up and takes it."""
    mark = tmp_path / "still running"
    threading.Timer(0.3, _thread.interrupt_main).start()
    began = time.monotonic()
    with pytest.raises(KeyboardInterrupt), Forked(lambda: time.sleep(2) or mark.touch()) as call:
        call.result()
    assert time.monotonic() - began < 1.5
    time.sleep(2.5)
    assert not mark.exists()


def test_a_call_made_always_forks_before_forks_are_allowed():
    assert not forked._allowed["forks"]
    with Forked(os.getpid, always=True) as call:
        assert call.forked and call.result() != os.getpid()


def test_where_a_copy_dies_the_result_is_lost_s_and_the_call_is_not_made_here(forks_allowed):
    parent, made = os.getpid(), []

    def dies_in_the_copy() -> str:
        if in_the_copy(parent):
            os._exit(1)  # as toulbar2 does on some errors: made here, it would end this process
        made.append(1)
        return "made here"

    with Forked(dies_in_the_copy, lost=lambda: "lost") as call:
        assert call.result() == "lost"
    assert made == []


def test_without_a_fork_lost_is_not_asked_and_the_call_is_made_here():
    with Forked(os.getpid, fork=False, lost=lambda: "lost") as call:
        assert call.result() == os.getpid()


def test_a_copy_that_has_not_answered_by_until_is_ended_and_its_result_lost(tmp_path, forks_allowed):
    mark = tmp_path / "still running"
    began = time.perf_counter()
    call = Forked(lambda: time.sleep(2) or mark.touch(), until=began + 0.3, lost=lambda: "late")
    pid = call._pid
    assert call.result() == "late" and time.perf_counter() - began < 1.5
    with pytest.raises(ChildProcessError):  # reaped
        os.waitpid(pid, os.WNOHANG)
    time.sleep(2.5)
    assert not mark.exists()


def test_an_answer_whole_in_the_pipe_by_until_is_read_though_the_wait_began_after_it(forks_allowed):
    # a round's second solve is waited for after its first: its answer may be waiting when its time has passed
    call = Forked(os.getpid, until=time.perf_counter() + 0.5, lost=lambda: "lost")
    time.sleep(1.0)
    assert call.result() not in ("lost", os.getpid())
