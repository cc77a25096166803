"""The program: `main` runs the typer app with usage errors as one line, and hands signals to the command."""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

import typer

from ipuplan.cli import read_commands, solve_commands, workbench_commands  # noqa: F401 - their commands join the app
from ipuplan.cli.common import RUN, Command, Terminated, app, settle
from ipuplan.plan.forked import allow_forks

try:  # newer typer carries its own copy of click, whose errors are the ones raised
    from typer._click import exceptions as click_errors
except ImportError:
    from click import exceptions as click_errors


def main(args: list[str] | None = None) -> int:
    """The `ipuplan` entry point: a usage error is one line on stderr too (exit 2), not a help box. Without
    `args` this is the program (argv): it then takes SIGINT and SIGTERM itself (`Command`)."""
    command = Command() if args is None and threading.current_thread() is threading.main_thread() else None
    if command is not None:
        command.start()
        allow_forks()  # the program's other threads take no lock a forked check needs (`plan.forked`)
    try:  # an interrupt raises at the next Python call, wherever that is: every one until the last is in here
        code = _run(args)
        if command is not None:
            command.close()
            settle()
    except KeyboardInterrupt:
        code = RUN.interrupted(signal.SIGINT)
    except Terminated:
        code = RUN.interrupted(signal.SIGTERM)
    if command is not None:
        command.finished.set()  # the signal thread's one interrupt is spent: it ends nothing now
    return code


def _run(args: list[str] | None) -> int:
    arguments = args if args is not None else sys.argv[1:]
    RUN.reset("", as_json="--json" in arguments)
    try:
        code = app(args=args, prog_name="ipuplan", standalone_mode=False)
    except click_errors.UsageError as error:
        if getattr(click_errors, "NoArgsIsHelpError", ()) and isinstance(error, click_errors.NoArgsIsHelpError):
            typer.echo(error.ctx.get_help(), err=True)
        else:
            RUN.fail(f"error: {error.format_message()} (see: ipuplan {_command_of(error)}-h)", "error")
        code = 2
    except (getattr(click_errors, "Abort", KeyboardInterrupt), KeyboardInterrupt):
        code = RUN.interrupted(signal.SIGINT)
    except Terminated:
        code = RUN.interrupted(signal.SIGTERM)
    # typer >= 0.29 turns Ctrl-C outside a command (parsing its arguments) into a silent 130
    if code == 128 + signal.SIGINT:
        code = RUN.interrupted(signal.SIGINT)
    return code if isinstance(code, int) else 0


def entry_point() -> None:
    exit_now(main())


def exit_now(code: int) -> None:
    """End the program with `code`, its output flushed, without the interpreter's teardown: that frees every object a
    run built and every module one at a time (0.17 s after the reference plan's run, nobody waiting for it). Only
    the program itself ends so: every file is written and closed, every worker joined, before `main` returns."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader that went away, a stream closed: nothing left to tell
            pass
    os._exit(code)


def _command_of(error) -> str:
    name = error.ctx.info_name if error.ctx is not None and error.ctx.parent is not None else ""
    return f"{name} " if name else ""


PROGRAMS = tuple(f"{package}.__main__" for package in (__package__.partition(".")[0], __package__))
"""The modules that run the program: `python -m ipuplan` and `python -m ipuplan.cli`."""


def the_program() -> bool:
    """Whether this process is the `ipuplan` command (the script, `python -m ipuplan`, `python -m ipuplan.cli`), not
    a program that imports it: only then do signals stay with TAKER until `main` hands them to the command. (`-m
    ipuplan.cli` imports this package before its `__main__` is the main module: the interpreter's own argv says.)"""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    argv = getattr(sys, "orig_argv", [])
    module = argv[argv.index("-m") + 1] if "-m" in argv[:-1] else ""
    return (getattr(spec, "name", "") in PROGRAMS or f"{module}.__main__" in PROGRAMS
            or Path(sys.argv[0]).name == "ipuplan")
