"""A pure call made in a forked copy of this process while this one goes on: on a 2-core machine a large plan's
re-check (1.4 s at 50k values) runs beside the figures the run reports of it. The copy shares every object
copy-on-write, so only the result is pickled. Where no fork is wanted or possible, or the copy dies or its answer
cannot be read, the call is made here when its result is asked for: the result is the same either way.
"""

from __future__ import annotations

import os
import pickle
import signal
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")

_READ = 1 << 16


class Forked(Generic[T]):
    """`function(*arguments)`, made in a forked copy when `fork` (and the system forks); `result` waits for it.
    A context manager: leaving it before the result was read ends the copy."""

    def __init__(self, function: Callable[..., T], *arguments, fork: bool = True) -> None:
        self._function, self._arguments = function, arguments
        self._pid, self._reader = _started(self._call) if fork and hasattr(os, "fork") else (None, None)

    def _call(self) -> T:
        return self._function(*self._arguments)

    @property
    def forked(self) -> bool:
        """Whether the call is being made in a copy (else it is made when `result` is asked for)."""
        return self._pid is not None

    def result(self) -> T:
        """The call's result, or what it raised, raised here."""
        if self._pid is None:
            return self._call()
        data = _read_all(self._reader)
        self._ended()
        try:
            kind, value = pickle.loads(data)
        except (EOFError, pickle.UnpicklingError, AttributeError, ImportError, TypeError, ValueError):
            # the copy died (killed, out of memory) or its answer does not unpickle
            return self._call()
        if kind == "raised":
            raise value
        return value

    def cancel(self) -> None:
        """End the copy, if it still runs; its result is not wanted."""
        if self._pid is not None:
            try:
                os.kill(self._pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._ended()

    def _ended(self) -> None:
        os.close(self._reader)
        os.waitpid(self._pid, 0)
        self._pid = self._reader = None

    def __enter__(self) -> Forked[T]:
        return self

    def __exit__(self, *exc_info) -> None:
        self.cancel()


def _started(call: Callable[[], object]) -> tuple[int | None, int | None]:
    """(the copy's pid, the end its answer is read from); (None, None) where the system refuses a fork."""
    reader, writer = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(reader)
        os.close(writer)
        return None, None
    if pid:
        os.close(writer)
        return pid, reader
    _answer(call, reader, writer)  # never returns


def _answer(call: Callable[[], object], reader: int, writer: int) -> None:
    """In the copy: make the call, write its pickled outcome, and end at once (`os._exit`: no atexit hook nor flush
    of streams another thread of the parent may have held at the fork). Interrupts are the parent's to take."""
    try:
        os.close(reader)
        try:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        except ValueError:  # a fork made off the main thread keeps its handlers
            pass
        try:
            outcome = ("returned", call())
        except BaseException as error:  # noqa: BLE001 - every outcome goes back to the parent
            outcome = ("raised", error)
        try:
            payload = pickle.dumps(outcome)
        except Exception:  # noqa: BLE001 - an outcome that does not pickle is made again by the parent
            payload = b""
        view = memoryview(payload)
        while view:
            view = view[os.write(writer, view):]
    finally:
        os._exit(0)


def _read_all(reader: int) -> bytes:
    parts = []
    while chunk := os.read(reader, _READ):
        parts.append(chunk)
    return b"".join(parts)
