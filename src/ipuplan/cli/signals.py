"""The process's signals, taken before anything else loads: SIGINT and SIGTERM are blocked in the main thread from
this module's first lines, and one thread (`TAKER`) takes them. While the command loads (nothing is written yet)
either ends the process at once with one line; `program.main` then hands them to the command (`common.Command`)."""

from __future__ import annotations

import os
import signal
import sys

SIGNALS = (signal.SIGINT, signal.SIGTERM)
MASK_BEFORE = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)  # first of all: from here a signal waits for TAKER

import threading  # after the block above, as every import that follows


def _quit_while_importing(signum: int) -> None:
    """Nothing is written while the command loads: say so in one line (and one JSON object) and go."""
    message = "interrupted: nothing written"
    if "--json" in sys.argv[1:]:
        import json

        os.write(1, (json.dumps({"status": "interrupted", "error": message}, indent=2) + "\n").encode())
    os.write(2, f"{message}\n".encode())
    os._exit(128 + signum)


def outside_a_command(signum: int) -> None:
    """A signal after the command finished (its exit code is decided) or in a process that only imported this."""


class _SignalTaker:
    """The process's one taker of SIGINT and SIGTERM. They are blocked in the main thread from the first lines of
    this module, so every thread started later inherits the block (OpenBLAS's at numpy's import, CP-SAT's, whose
    own SIGINT handler would absorb Ctrl-C) and this thread takes them with sigwait, handing each to `on_signal`."""

    def __init__(self) -> None:
        self.on_signal = _quit_while_importing

    def start(self) -> None:
        threading.Thread(target=self._take, name="ipuplan-signals", daemon=True).start()

    def _take(self) -> None:
        while True:
            signum = signal.sigwait(SIGNALS)
            self.on_signal(signum)  # looked up after the wait: the handler of the moment the signal came


TAKER = _SignalTaker()
if threading.current_thread() is threading.main_thread():
    TAKER.start()  # the imports below take most of a second, and write nothing
else:
    signal.pthread_sigmask(signal.SIG_SETMASK, MASK_BEFORE)


def release() -> None:
    """Give the signals back to the program that imported this (a test, a notebook): it is not the command."""
    TAKER.on_signal = outside_a_command
    signal.pthread_sigmask(signal.SIG_SETMASK, MASK_BEFORE)
