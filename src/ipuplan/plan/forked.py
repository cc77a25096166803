"""A pure call made in a forked copy of this process while this one goes on: on a 2-core machine a large plan's
re-check (1.4 s at 50k values) runs beside the figures the run reports of it. The copy shares every object
copy-on-write, so only the result is pickled. Where no fork is wanted, allowed or possible, or the copy dies or its
answer cannot be read, the call is made here when its result is asked for: the result is the same either way. A caller
for whom a second try here would be the harm the copy guards against (toulbar2 calls `exit` on some errors) gives
`lost`, what the result is then instead, and may bound the wait with `until`.

Forks are off until `allow_forks`: a copy has only the thread that forked, and a lock another thread held at that
moment stays held in it for good (Python 3.11's `cached_property` takes one per property, for every instance). The
CLI allows them: its other threads (a progress ticker, a signal taker) take no lock the calls here need. A call that
takes no lock at all (a toulbar2 solve) may fork `always`.
"""

from __future__ import annotations

import gc
import os
import pickle
import select
import signal
import time
import traceback
import warnings
from collections.abc import Callable
from typing import Generic, NoReturn, TypeVar

from ipuplan.plan.collector import gc_paused

T = TypeVar("T")

_READ = 1 << 16
_POLL_SECONDS = 0.05
"""How often the wait for a copy looks up: an interrupt handed to this thread (`cli.signals`) is taken then."""

_allowed = {"forks": False}
_here = {"copy": False}


def allow_forks(allowed: bool = True) -> None:
    """Let `Forked` fork, for the rest of the process (module docstring)."""
    _allowed["forks"] = allowed


def forks_allowed() -> bool:
    """Whether `Forked` may fork now (`allow_forks`), for a caller that would prepare work for a copy."""
    return _allowed["forks"]


def in_a_copy() -> bool:
    """Whether this process is a `Forked` copy: a call may do more there, where it costs the run nothing."""
    return _here["copy"]


class ForkedError(Exception):
    """What a call raised in the copy, where its own exception could not be re-raised here (its text and trace)."""


class Forked(Generic[T]):
    """`function(*arguments)` (with the collector held off), made in a forked copy when `fork` and forks are
    allowed (or `always`); `result` waits for it, once. Where a copy was wanted and gave no answer (the system refused
    the fork, the copy died, its answer did not unpickle, or it had not answered by `until`, a `time.perf_counter`
    value, and was ended), the result is `lost()`, or else the call made here. A context manager: left before the
    result was read, the copy is ended."""

    def __init__(self, function: Callable[..., T], *arguments, fork: bool = True, always: bool = False,
                 until: float | None = None, lost: Callable[[], T] | None = None) -> None:
        if until is not None and lost is None:  # the wait would end only for the call to be made again here
            raise ValueError("Forked: `until` needs `lost`")
        self._function, self._arguments = function, arguments
        self._until, self._lost = until, lost
        self._outcome: tuple[str, object] | None = None
        self._wanted = fork and (always or _allowed["forks"]) and hasattr(os, "fork")
        self._pid, self._reader = _started(self._function, arguments) if self._wanted else (None, None)

    @property
    def forked(self) -> bool:
        """Whether the call is being made in a copy (else it is made when `result` is asked for)."""
        return self._pid is not None

    def result(self) -> T:
        """The call's result, or what it raised, raised here."""
        if self._outcome is None:
            self._outcome = self._answer() if self._pid is not None else None
            if self._outcome is None and self._wanted and self._lost is not None:
                self._outcome = "returned", self._lost()
            elif self._outcome is None:
                self._outcome = _outcome(self._function, self._arguments)
        kind, value = self._outcome
        if kind == "raised":
            raise value
        return value

    def _answer(self) -> tuple[str, object] | None:
        """The copy's outcome; None where it died (killed, out of memory), its answer does not unpickle, or it had not
        answered by `until`."""
        try:
            data = _read_all(self._reader, self._until)
        finally:  # ended: done, past `until`, or the wait interrupted
            self.cancel()
        try:
            kind, value, trace = pickle.loads(data)
        except (EOFError, pickle.UnpicklingError, AttributeError, ImportError, TypeError, ValueError):
            return None
        if kind == "raised" and trace:
            value.__cause__ = ForkedError(trace)
        return kind, value

    def cancel(self) -> None:
        """End the copy, if it still runs; its result is not wanted."""
        if self._pid is not None:
            try:
                os.kill(self._pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._ended()

    def _ended(self) -> None:
        pid, reader = self._pid, self._reader
        self._pid = self._reader = None
        os.close(reader)
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:  # reaped already (a host that ignores SIGCHLD)
            pass

    def __enter__(self) -> Forked[T]:
        return self

    def __exit__(self, *exc_info) -> None:
        self.cancel()


def _outcome(function: Callable[..., object], arguments: tuple) -> tuple[str, object]:
    """The call made here: ("returned", its result) or ("raised", what it raised)."""
    try:
        with gc_paused():
            return "returned", function(*arguments)
    except Exception as error:  # noqa: BLE001 - raised again by `result`, as a copy's is
        return "raised", error


def _started(function: Callable[..., object], arguments: tuple) -> tuple[int | None, int | None]:
    """(the copy's pid, the end its answer is read from); (None, None) where the system refuses a pipe or a fork."""
    try:
        reader, writer = os.pipe()
    except OSError:
        return None, None
    pid = None
    try:
        pid = os.fork()
        if pid == 0:
            _answer(function, arguments, reader, writer)
        os.close(writer)
        return pid, reader
    except OSError:
        os.close(reader)
        os.close(writer)
        return None, None
    except BaseException:  # an interrupt between the fork and here: the copy ended, nothing left open
        if pid:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        for end in (reader, writer):
            try:
                os.close(end)
            except OSError:
                pass
        raise


def _answer(function: Callable[..., object], arguments: tuple, reader: int, writer: int) -> NoReturn:
    """In the copy: make the call, write its pickled outcome, and end at once (`os._exit`: no atexit hook nor flush
    of streams another thread of the parent may have held at the fork). Interrupts are the parent's to take and a
    termination ends the copy (the CLI's main thread blocks both: `cli.signals`); nothing is written to a stream."""
    try:
        os.close(reader)
        _here["copy"] = True
        gc.disable()  # the copy is short-lived and its garbage dies with it
        warnings.simplefilter("ignore")
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            outcome = ("returned", function(*arguments), "")
        except MemoryError:
            raise
        except Exception as error:  # noqa: BLE001 - raised again in the parent
            outcome = ("raised", error, traceback.format_exc())
        payload = pickle.dumps(outcome)
        view = memoryview(payload)
        while view:
            view = view[os.write(writer, view):]
    finally:
        os._exit(0)


def _read_all(reader: int, until: float | None = None) -> bytes:
    """Everything the copy writes, until it ends; past `until`, only an answer it wrote whole by then (the caller may
    have come to wait late, as a round's second solve is waited for after its first), else b"". A wait that looks up
    every `_POLL_SECONDS` so that an interrupt handed to this thread is taken (and the copy ended by the caller's
    context)."""
    parts = []
    while True:
        left = float("inf") if until is None else until - time.perf_counter()
        ready, _, _ = select.select([reader], [], [], min(max(left, 0.0), _POLL_SECONDS))
        if not ready:
            if left <= 0:
                return b""
            continue
        chunk = os.read(reader, _READ)
        if not chunk:
            return b"".join(parts)
        parts.append(chunk)
