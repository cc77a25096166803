"""What every command shares: the typer app, the run's record of what it said and wrote (`RUN`), the signals of a
command run as the program (`Command`), one-line errors, progress on stderr, tables, the optimise options as typer
options, and the report pages."""

from __future__ import annotations

import _thread
import functools
import inspect
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, get_args, get_origin

import typer
from pydantic import BeforeValidator
from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from ipuplan.cli.signals import SIGNALS, TAKER, outside_a_command
from ipuplan.errors import IpuplanError, PlanError
from ipuplan.plan.outputs import WRITING, write_atomically
from ipuplan.replan.options import OptimizeOptions
from ipuplan.replan.pins import read_pin_file
from ipuplan.report.html import (
    explanation_html,
    inserted_html,
    render_html,
    shortfall_html,
)
from ipuplan.report.text import (
    explanation_lines,
)

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: whole option names at any width, and [extras] hints kept
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 80},
    help="Re-plan the tensor layouts of an IPU memory plan with CP-SAT.",
)


class _Console(Console):
    def on_broken_pipe(self) -> None:
        """The reader went away: rich would exit 1 (check's mismatches); one_line_errors exits as for `print`."""
        self.quiet = True
        raise BrokenPipeError(32, "Broken pipe")


stdout = _Console(highlight=False, width=None if sys.stdout.isatty() else 80)
GRACE = 0.5
"""Seconds the main thread has to unwind after a signal before the signal thread ends the process itself."""
TICK = 2.0
"""Most seconds a long phase stays silent on stderr."""


class Terminated(BaseException):
    """SIGTERM, raised in the main thread as Ctrl-C raises KeyboardInterrupt (so `except Exception` passes it)."""


def _raise_terminated(signum, frame) -> None:
    raise Terminated


class _Run:
    """What one command has said and written, shared by the main thread, the progress ticker and the signal
    thread: the final JSON object or interrupt line is said once, and the files written are named."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.reset("", as_json=False)

    def reset(self, command: str, *, as_json: bool, source: str | None = None) -> None:
        self.command, self.as_json, self.source = command, as_json, source
        self.said = self.interrupt_said = False
        self.written: list[str] = []
        self.cleanups: list = []
        self.kept: list = []
        """What the command built, held until the next command or the program's end (`program.exit_now` frees
        nothing): freeing a large run's objects one by one took 0.44 s at 50k values."""

    def say_json(self, summary: dict) -> None:
        """The run's one JSON object on stdout (once: whatever comes later is not printed)."""
        with self.lock:
            if self.said:
                return
            self.said = True
            sys.stdout.write(json.dumps(summary, indent=2) + "\n")
            sys.stdout.flush()

    def fail(self, message: str, status: str, **extra) -> None:
        """One error line on stderr and, with --json, the failure as the run's object."""
        with self.lock:
            if self.as_json:
                where = {} if self.source is None else {"input": self.source}
                self.say_json({**where, "status": status, "error": message.removeprefix("error: "), **extra})
            typer.echo(message, err=True)

    def interrupted(self, signum: int) -> int:
        """The line (and object) of an interrupted run: what was written before, and that nothing half-written is
        left; the exit code 128 + signal."""
        with self.lock:
            if self.interrupt_said:
                return 128 + signum
            self.interrupt_said = True
            if self.command == "explore_command":
                done = "plans finished before are written, nothing half-written is left"
            elif self.written:
                done = f"wrote {', '.join(self.written)} before; nothing half-written is left"
            else:
                done = "nothing written"
            self.fail(f"interrupted: {done}", "interrupted", signal=signal.Signals(signum).name)
        return 128 + signum


RUN = _Run()


@contextmanager
def recorded(path: Path) -> Iterator[None]:
    """A write of `path` and its record as written (the interrupt line names it), as one: an interrupt lands before
    both or after both (the signal thread waits for WRITING)."""
    with WRITING:
        yield
        RUN.written.append(str(path))


def write_output(path: Path, content: str | bytes) -> None:
    """Write one result atomically, and record it."""
    with recorded(path):
        write_atomically(path, content)


class Command:
    """The signals of one command run as the program: the first interrupts the main thread between two writes
    (it unwinds, and an explore batch ends its workers); inside OR-Tools, at a second signal, or when the main
    thread has not finished within GRACE seconds, the process is ended here, cleanly."""

    def __init__(self) -> None:
        self.finished = threading.Event()

    def start(self) -> None:
        signal.signal(signal.SIGTERM, _raise_terminated)
        signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
        TAKER.on_signal = self.on_signal

    def on_signal(self, signum: int) -> None:
        with WRITING:  # a write under way finishes first: the interrupt lands after it
            if self.finished.is_set():
                return
            if _inside_ortools(threading.main_thread().ident):
                self._end(signum)  # never raise inside the solver: it calls back into Python, and aborts on an error
            _thread.interrupt_main(signum)
        deadline = time.monotonic() + GRACE
        while not self.finished.is_set() and time.monotonic() < deadline:
            if signal.sigtimedwait(SIGNALS, 0.02) is not None:  # a second signal: no more waiting
                break
        if not self.finished.is_set():
            self._end(signum)

    def _end(self, signum: int) -> None:
        """Clean up, say what was written, and end the process (nothing is being written: WRITING is held)."""
        with WRITING, RUN.lock:
            for cleanup in RUN.cleanups:
                cleanup()
            code = RUN.interrupted(signum)
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)

    def close(self) -> None:
        """No interrupt after this (the check in `on_signal` is under the same lock)."""
        with WRITING:
            self.finished.set()
            TAKER.on_signal = outside_a_command


def _inside_ortools(thread: int | None) -> bool:
    """Whether `thread` is running OR-Tools (its solve, or a callback it made into Python): nothing is written
    there, and an exception raised there aborts the process."""
    frame = sys._current_frames().get(thread)
    while frame is not None:
        if frame.f_globals.get("__name__", "").startswith("ortools."):
            return True
        frame = frame.f_back
    return False


def settle() -> None:
    """A Python call: entering it raises an interrupt that is pending."""


def print_table(table: Table) -> None:
    """A table on stdout. Off a terminal (a log, a pipe) it keeps to 80 columns: without vertical rules, and when
    even so it is wider, as one block of `column: value` lines per row, so that no value is cut or split."""
    if stdout.is_terminal:
        stdout.print(table)
        return
    table.box, table.pad_edge, table.padding, table.collapse_padding = box.SIMPLE_HEAD, False, (0, 1), True
    if Measurement.get(stdout, stdout.options.update_width(10_000), table).maximum <= stdout.width:
        stdout.print(table)
        return
    headers = [str(column.header) for column in table.columns]
    width = max(map(len, headers))
    lines = [str(table.title or "")]
    for cells in zip(*(column._cells for column in table.columns)):  # rich keeps a table's cells per column
        lines += ["", *(f"  {header:<{width}}  {cell}" for header, cell in zip(headers, cells))]
    stdout.out("\n".join(lines), highlight=False)


def output_path(text: str) -> Path:
    if not text.strip():
        raise typer.BadParameter("the output path is empty")
    return Path(text)


def _version(value: bool) -> None:
    if value:
        from importlib import metadata  # 40 ms that only --version needs

        typer.echo(f"ipuplan {metadata.version('ipuplan')}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Re-plan the tensor layouts of an IPU memory plan with CP-SAT."""


PlanPath = Annotated[Path, typer.Argument(metavar="PLAN", help="Plan JSON file written by the compiler.",
                                          show_default=False)]
Force = Annotated[bool, typer.Option(help="Overwrite outputs that exist.")]
OutputFile = Annotated[Path, typer.Option("--output", "-o", parser=output_path, help="Where to write the result.")]


def _bound(field, name: str):
    return next((getattr(m, name) for m in field.metadata if hasattr(m, name)), None)


def _option_parameter(name: str, field) -> inspect.Parameter:
    """One `OptimizeOptions` field as a typer option: its type, bounds, default and help. A tuple field is a
    repeatable option (typer collects a list; the options model makes it a tuple again); a field that reads text
    first (`--memory-limit 8G`) is parsed by the same function."""
    metavar = (field.json_schema_extra or {}).get("metavar")
    reader = next((m.func for m in field.metadata if isinstance(m, BeforeValidator)), None)
    if reader is not None:
        option = typer.Option(help=field.description, metavar=metavar, parser=text_reader(reader))
    else:
        option = typer.Option(help=field.description, min=_bound(field, "ge"), max=_bound(field, "le"), metavar=metavar)
    annotation, default = field.annotation, field.default
    if get_origin(annotation) is tuple:
        annotation, default = list[get_args(annotation)[0]], []
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                             annotation=Annotated[annotation, option])


def text_reader(reader):
    """A typer parser from a field's reader of text: its ValueError is a usage error (exit 2)."""

    def read(text: str) -> int:
        try:
            return reader(text)
        except ValueError as error:
            raise typer.BadParameter(str(error)) from None

    return read


OPTION_PARAMETERS = [_option_parameter(name, field) for name, field in OptimizeOptions.model_fields.items()]


def takes_optimize_options(command):
    """Give `command` every `OptimizeOptions` field as a CLI option, collected into its `options` argument."""
    own = [p for p in inspect.signature(command, eval_str=True).parameters.values() if p.name != "options"]

    @functools.wraps(command)
    def wrapper(**values):
        chosen = {p.name: values.pop(p.name) for p in OPTION_PARAMETERS}
        return command(**values, options=OptimizeOptions(**chosen))

    keyword_only = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own]
    wrapper.__signature__ = inspect.Signature([*keyword_only, *OPTION_PARAMETERS])
    return wrapper


def one_line_errors(command):
    """Library errors become one line on stderr (and, with --json, one object) and their exit code; an interrupt
    says what was written; nothing else leaks a traceback."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        source = kwargs.get("plan_path")
        RUN.reset(command.__name__, as_json=kwargs.get("as_json", False),
                  source=None if source is None else str(source))
        try:
            return command(*args, **kwargs)
        except IpuplanError as error:
            if isinstance(error, PlanError):  # one the library raised about "<plan>": the file the command read
                error = error.at(source=" / ".join(str(kwargs[k]) for k in ("plan_path", "old", "new") if k in kwargs))
            explanation = getattr(error, "explanation", None)
            extra = {} if explanation is None else {"explanation": explanation.summary()}
            RUN.fail(f"error: {error}{_also_written(error)}", getattr(error, "status", "error"), **extra)
            raise typer.Exit(error.exit_code) from None
        except KeyboardInterrupt:
            raise typer.Exit(RUN.interrupted(signal.SIGINT)) from None
        except Terminated:
            raise typer.Exit(RUN.interrupted(signal.SIGTERM)) from None
        except (typer.Exit, typer.Abort):
            raise
        except BrokenPipeError:  # the reader went away (`| head`): nothing more to say, nor anyone to say it to
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise typer.Exit(128 + signal.SIGPIPE) from None
        except Exception as error:
            if os.environ.get("IPUPLAN_DEBUG"):
                raise
            RUN.fail(f"internal error: {type(error).__name__}: {error} (IPUPLAN_DEBUG=1 shows more)", "error")
            raise typer.Exit(70) from None

    return wrapper


def _also_written(error: IpuplanError) -> str:
    """After a failed write, the outputs of the run written before it (complete: each was written whole)."""
    return f"; {', '.join(RUN.written)} written before" if RUN.written and error.exit_code == 2 else ""


class Progress:
    """Progress on stderr: each phase as it starts, the solver's improvements, and a line at least every TICK
    seconds while a phase runs long (from a daemon thread, which stops with the command)."""

    def __init__(self, quiet: bool, name: str = "load") -> None:
        self.quiet = quiet
        self.started = self.last = self.began = time.perf_counter()
        self.name = name
        self.stopped = threading.Event()
        self.seconds: dict[str, float] = {}
        """Per phase, the seconds it ran (a phase ends when the next begins; `timed` ends the last)."""

    def line(self, text: str) -> None:
        if self.quiet:
            return
        with RUN.lock:
            typer.echo(text, err=True)
            self.last = time.perf_counter()

    def phase(self, name: str, detail: str) -> None:
        self.timed()
        self.name = name
        self.line(f"  {name:<10} {detail}  ({time.perf_counter() - self.started:.2f} s)")

    def timed(self) -> dict[str, float]:
        """The seconds of each phase so far, the current one ended now (`--json`'s `phase_seconds`)."""
        now = time.perf_counter()
        self.seconds[self.name] = round(self.seconds.get(self.name, 0.0) + now - self.began, 4)
        self.began = now
        return dict(self.seconds)

    def solver(self, phase: str, objective: int, bound: int, elapsed: float) -> None:
        gap = (objective - bound) / objective if objective else 0.0
        self.line(f"  {phase:<8} objective {objective:>14,}  bound {bound:>14,}  gap {gap:6.2%}  {elapsed:7.2f} s")

    def _tick(self) -> None:
        # looked at every TICK / 8, said after TICK - TICK / 8 of silence: no gap passes TICK
        while not self.stopped.wait(TICK / 8):
            if time.perf_counter() - self.last >= TICK - TICK / 8:
                self.line(f"  {self.name:<10} still running  ({time.perf_counter() - self.started:.2f} s)")

    @contextmanager
    def ticking(self) -> Iterator[Progress]:
        if not self.quiet:
            threading.Thread(target=self._tick, name="ipuplan-progress", daemon=True).start()
        try:
            yield self
        finally:
            self.stopped.set()


ReportFile = Annotated[Path | None, typer.Option(
    "--report", parser=output_path, help="Also write the HTML report here (with why the budgets cannot be met).")]


def inputs_of(plan_path: Path, options: OptimizeOptions) -> tuple[Path, ...]:
    """The files a run reads: the plan and the pin file (read here, before any work, so a bad one costs none)."""
    if options.pin_file is None:
        return (plan_path,)
    read_pin_file(options.pin_file)
    return plan_path, options.pin_file


def report_page(facts, space, explanation, shortfall=(), inserted=()) -> str:
    """The HTML report of `facts.plan` with the run's candidate space, and the explanation, the shortfall and the
    inserted steps when there are any."""
    sections = (explanation_html(explanation, explanation_lines(explanation)),) if explanation is not None else ()
    sections += (shortfall_html(shortfall),) if shortfall else ()
    return render_html(facts, space, sections=sections + ((inserted_html(inserted),) if inserted else ()))


def report_failure(error: IpuplanError, report: Path | None, as_json: bool) -> None:
    """Before the one error line: the explanation (indented on stderr; the JSON object carries it) and the report
    of the input under the budgets it was measured against, from the failed run's own facts."""
    explanation = getattr(error, "explanation", None)
    if explanation is None:
        return
    if report is not None:
        write_output(report, report_page(error.prepared.facts, error.prepared.space, explanation))
    if not as_json:
        for line in explanation_lines(explanation):
            typer.echo(line if line.startswith("  ") else f"  {line}", err=True)


def write_failure_report(result, report: Path | None) -> None:
    """The report of a run whose plan is not written: the input, under the run's budgets."""
    if report is not None:
        write_output(report, report_page(result.prepared.facts, result.prepared.space, None))


def size_of(path: Path) -> str:
    try:
        return f"{path.stat().st_size / 1e6:,.1f} MB"
    except OSError:
        return "unreadable"
