"""The `ipuplan` command: a thin typer layer over the library, one module per kind of command (`read_commands`,
`solve_commands`, `workbench_commands`) over what they share (`common`), started by `program.main`.

Exit codes: 0 success, 1 `check` found mismatches, 2 bad input (or a bad output path), 3 the budgets
cannot be met, 4 `explore` finished but some plans failed, 70 internal error (IPUPLAN_DEBUG=1 shows
the traceback), 130 interrupted (Ctrl-C; nothing half-written is left). A SIGTERM ends a run the way
Ctrl-C does, with exit code 143; a reader that stops reading (`| head`) ends it quietly, with 141.

Signals: one thread takes SIGINT and SIGTERM for the whole process (`_SignalTaker`). While this module
imports (nothing is written yet) either ends the process at once with one line. Run as the program
(`main()` without arguments), a command's main thread is interrupted between two writes, never inside
one, and unwinds (an explore batch ends its workers); inside OR-Tools (which writes nothing, and aborts
when a callback raises), or when it has not finished within `GRACE` seconds, the process is ended by the
signal thread, which says what was written and cleans up.
"""

from __future__ import annotations

from ipuplan.cli import signals  # first of all: the signals are blocked before any other import
from ipuplan.cli.common import app, write_output
from ipuplan.cli.program import click_errors, entry_point, main, the_program
from ipuplan.plan.outputs import write_atomically

if not the_program():  # imported by another program (a test, a notebook): its signals are its own again
    signals.release()

__all__ = ["app", "click_errors", "entry_point", "main", "write_atomically", "write_output"]
