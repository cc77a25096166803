"""The `ipuplan` command: a thin typer layer over the library.

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

import os
import signal
import sys

SIGNALS = (signal.SIGINT, signal.SIGTERM)
_MASK_BEFORE = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)  # first of all: from here a signal waits for TAKER

import threading  # after the block above, as every import that follows


def _quit_while_importing(signum: int) -> None:
    """Nothing is written while the command loads: say so in one line (and one JSON object) and go."""
    message = "interrupted: nothing written"
    if "--json" in sys.argv[1:]:
        import json

        os.write(1, (json.dumps({"status": "interrupted", "error": message}, indent=2) + "\n").encode())
    os.write(2, f"{message}\n".encode())
    os._exit(128 + signum)


def _outside_a_command(signum: int) -> None:
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
    signal.pthread_sigmask(signal.SIG_SETMASK, _MASK_BEFORE)

import _thread
import functools
import inspect
import json
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Annotated, get_args, get_origin

import typer
from pydantic import BeforeValidator
from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from ipuplan.errors import InfeasibleBudget, IpuplanError, NoSolutionInTime, OutputError, PlanError
from ipuplan.facts.check import check
from ipuplan.facts.dataflow import dataflow
from ipuplan.facts.estimate import estimate
from ipuplan.facts.plan_exchange import plan_exchange
from ipuplan.facts.plan_facts import plan_facts
from ipuplan.plan.format import dump_plan, load_plan
from ipuplan.plan.outputs import WRITING, captured_file, require_outputs, write_atomically
from ipuplan.replan.against import against
from ipuplan.replan.options import OptimizeOptions, byte_size
from ipuplan.replan.pins import read_pin_file
from ipuplan.replan.size import RunTooLarge
from ipuplan.report.diff import diff_lines, diff_plans
from ipuplan.report.html import (
    explanation_html,
    inserted_html,
    render_html,
    render_png,
    require_matplotlib,
    shortfall_html,
    sweep_html,
)
from ipuplan.report.text import (
    check_summary,
    contributors_table,
    explanation_lines,
    explore_table,
    frozen_lines,
    graph_lines,
    inserted_lines,
    optimize_summary,
    optimize_table,
    shortfall_lines,
    show_summary,
    summary_table,
    sweep_table,
)
from ipuplan.solvers import Backend, SolveStatus
from ipuplan.space.scopes import Scope
from ipuplan.workbench.synth import MAX_VALUES, repeat_layers, unroll, with_budget_factor, with_scope

try:  # newer typer carries its own copy of click, whose errors are the ones raised
    from typer._click import exceptions as click_errors
except ImportError:
    from click import exceptions as click_errors

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


class _Command:
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
            TAKER.on_signal = _outside_a_command


def _inside_ortools(thread: int | None) -> bool:
    """Whether `thread` is running OR-Tools (its solve, or a callback it made into Python): nothing is written
    there, and an exception raised there aborts the process."""
    frame = sys._current_frames().get(thread)
    while frame is not None:
        if frame.f_globals.get("__name__", "").startswith("ortools."):
            return True
        frame = frame.f_back
    return False


def _settle() -> None:
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


def _output_path(text: str) -> Path:
    if not text.strip():
        raise typer.BadParameter("the output path is empty")
    return Path(text)


def _version(value: bool) -> None:
    if value:
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
OutputFile = Annotated[Path, typer.Option("--output", "-o", parser=_output_path, help="Where to write the result.")]


def _bound(field, name: str):
    return next((getattr(m, name) for m in field.metadata if hasattr(m, name)), None)


def _option_parameter(name: str, field) -> inspect.Parameter:
    """One `OptimizeOptions` field as a typer option: its type, bounds, default and help. A tuple field is a
    repeatable option (typer collects a list; the options model makes it a tuple again); a field that reads text
    first (`--memory-limit 8G`) is parsed by the same function."""
    metavar = (field.json_schema_extra or {}).get("metavar")
    reader = next((m.func for m in field.metadata if isinstance(m, BeforeValidator)), None)
    if reader is not None:
        option = typer.Option(help=field.description, metavar=metavar, parser=_text_reader(reader))
    else:
        option = typer.Option(help=field.description, min=_bound(field, "ge"), max=_bound(field, "le"), metavar=metavar)
    annotation, default = field.annotation, field.default
    if get_origin(annotation) is tuple:
        annotation, default = list[get_args(annotation)[0]], []
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                             annotation=Annotated[annotation, option])


def _text_reader(reader):
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


class _Progress:
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
    def ticking(self) -> Iterator[_Progress]:
        if not self.quiet:
            threading.Thread(target=self._tick, name="ipuplan-progress", daemon=True).start()
        try:
            yield self
        finally:
            self.stopped.set()


@app.command("check")
@one_line_errors
def check_command(
    plan_path: PlanPath,
    against_path: Annotated[Path | None, typer.Option(
        "--against", metavar="ORIG", show_default=False,
        help="The plan PLAN was rewritten from: also report every way PLAN breaks the output contract "
             "relative to it (REPLAN.md).")] = None,
    scope: Annotated[Scope | None, typer.Option(
        show_default=False, help="The scope whose contract --against checks (default full; program: gathers "
                                 "may be inserted).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object: the mismatches and the plan's "
                                          "exact exchange (with --against: the contract's lines).")] = False,
) -> None:
    """Recompute every derived field and report each mismatch (exit 1 if any); with --against, every break of the
    output contract too."""
    if scope is not None and against_path is None:
        RUN.fail("error: --scope needs --against (see: ipuplan check -h)", "error")
        raise typer.Exit(2)
    started = time.perf_counter()
    with _Progress(quiet=as_json, name="check").ticking():
        plan = load_plan(plan_path)
        original = load_plan(against_path) if against_path is not None else None
        facts = plan_facts(plan)
        mismatches = check(plan, facts)
        chosen = (scope or Scope.FULL).value
        contract = None if original is None else against(original, plan, chosen, after_facts=facts)
        exchange = plan_exchange(plan, facts) if as_json else None
    if as_json:
        summary = check_summary(str(plan_path), plan, mismatches, exchange, time.perf_counter() - started)
        if contract is not None:
            summary.update(against=str(against_path), scope=chosen, contract=contract)
            summary["status"] = "mismatches" if contract else summary["status"]
        RUN.say_json(summary)
        raise typer.Exit(1 if mismatches or contract else 0)
    _print_check(plan_path, plan, mismatches if contract is None else contract, started,
                 "" if contract is None else f" against {against_path} (scope {chosen})")


def _print_check(plan_path: Path, plan, lines: list, started: float, against_what: str) -> None:
    """Each mismatch (or contract line) as `PLAN: line`, then their count on stderr (exit 1), or the consistent line.
    With --against the contract's lines hold the plain check's mismatches too (its rule `check`)."""
    for line in lines:
        typer.echo(f"{plan_path}: {line}")
    elapsed = time.perf_counter() - started
    if lines:
        what = "contract violations" if against_what else "mismatches"
        typer.echo(f"{plan_path}: {len(lines)} {what}{against_what} ({elapsed:.2f} s)", err=True)
        raise typer.Exit(1)
    typer.echo(f"{plan_path}: consistent: {len(plan.values)} values, {len(plan.steps)} steps checked{against_what} "
               f"({elapsed:.2f} s)")


@app.command("show")
@one_line_errors
def show_command(
    plan_path: PlanPath,
    top: Annotated[int, typer.Option(min=1, help="How many contributors to list.")] = 12,
    as_json: Annotated[bool, typer.Option(
        "--json", help="Print one JSON object: the same figures, as numbers.")] = False,
) -> None:
    """Scope, budgets, peaks with their steps, fit, the exact exchange, and the top contributors at the peak."""
    with _Progress(quiet=as_json, name="show").ticking():
        plan = load_plan(plan_path)
        facts = plan_facts(plan)
        exchange = plan_exchange(plan, facts)
    result = facts.estimate
    if as_json:
        RUN.say_json(show_summary(str(plan_path), plan, result, exchange, top))
        return
    print_table(summary_table(plan, result, exchange))
    print_table(contributors_table(plan, result, result.total_peak_step, top))


@app.command("graph")
@one_line_errors
def graph_command(plan_path: PlanPath) -> None:
    """The inferred dataflow: per step, reads -> writes (and what a loop boundary releases)."""
    with _Progress(quiet=False, name="graph").ticking():
        plan = load_plan(plan_path)
        lines = graph_lines(plan, dataflow(plan))
    for line in lines:
        typer.echo(line if stdout.is_terminal else _folded(line))


def _folded(line: str, width: int = 80) -> str:
    """A listing's line within `width` columns off a terminal: cut at spaces, the rest indented under it.

    >>> print(_folded("    61  src 24   Repeat 2 boundary  45 -> 97  [released 4, 5, 6, 7, 8, 9, 10]", 40))
        61  src 24   Repeat 2 boundary  45
          -> 97  [released 4, 5, 6, 7, 8, 9,
          10]
    """
    if len(line) <= width:
        return line
    indent = " " * (len(line) - len(line.lstrip()) + 2)
    return textwrap.fill(line, width, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False,
                         drop_whitespace=True, replace_whitespace=False)


ReportFile = Annotated[Path | None, typer.Option(
    "--report", parser=_output_path, help="Also write the HTML report here (with why the budgets cannot be met).")]


def _inputs(plan_path: Path, options: OptimizeOptions) -> tuple[Path, ...]:
    """The files a run reads: the plan and the pin file (read here, before any work, so a bad one costs none)."""
    if options.pin_file is None:
        return (plan_path,)
    read_pin_file(options.pin_file)
    return plan_path, options.pin_file


@app.command("optimize")
@one_line_errors
@takes_optimize_options
def optimize_command(
    plan_path: PlanPath,
    options: OptimizeOptions,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", parser=_output_path, help="Where to write the rewritten plan.")
    ] = None,
    in_place: Annotated[bool, typer.Option(help="Overwrite the input plan with the result (instead of -o).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object (the result, or the error).")] = False,
    force: Force = False,
    dump_model: Annotated[Path | None, typer.Option(
        parser=_output_path, help="Write the CP-SAT model (text proto) here, for debugging.")] = None,
    report: ReportFile = None,
) -> None:
    """Minimise the peak per-tile usage, then the exact exchange at that peak (or, with --objective fit, the exact
    exchange while meeting the budgets) and write the rewritten plan (exit 3 if the budgets cannot be met; with
    --best-effort the least-bad plan is written). The summary gives the exact exchange of the input and of the written
    plan."""
    target = _target(plan_path, output, in_place)
    require_outputs({"-o": target, "--report": report, "--dump-model": dump_model}, inputs=_inputs(plan_path, options),
                    force=force, in_place=in_place)
    if dump_model is not None and options.solver != Backend.CPSAT:
        raise PlanError(f"only the cpsat solver has a model to dump, not {options.solver.value}", source="--dump-model")
    progress = _Progress(quiet=as_json)
    with progress.ticking(), _dump_capture(dump_model) as capture:
        try:
            result = _optimize(plan_path, options, progress, capture)
        except InfeasibleBudget as error:
            _report_failure(error, report, as_json)
            raise
        unmet = not result.after.fits_budget and not result.best_effort
        if unmet:
            _write_failure_report(result, report)
            raise InfeasibleBudget(_unmet(result))
        progress.phase("write", f"{target}")
        _write_results(result, target, capture, dump_model, report)
    if as_json:
        RUN.say_json({**optimize_summary(result, str(plan_path), str(target)), "phase_seconds": progress.timed()})
    else:
        _print_result(result, target)
    if result.best_effort and not result.after.fits_budget:
        typer.echo(f"does not fit: {result.explanation.line}; the least-bad plan is written to {target}", err=True)
        raise typer.Exit(3)


def _target(plan_path: Path, output: Path | None, in_place: bool) -> Path:
    if (output is None) == (not in_place):
        raise PlanError("give -o OUTPUT, or --in-place to overwrite the input" if output is None
                        else "give either -o OUTPUT or --in-place, not both", source="optimize")
    return plan_path if in_place else output


@contextmanager
def _dump_capture(dump_model: Path | None):
    """Where the solver exports its model: collected, then written by `_write_results` (None: no dump asked)."""
    if dump_model is None:
        yield None
        return
    with captured_file(dump_model.name) as capture:
        RUN.cleanups.append(capture.discard)
        yield capture


def _optimize(plan_path: Path, options: OptimizeOptions, progress: _Progress, capture):
    """Load and optimise: the result (nothing is written here)."""
    progress.phase("load", f"{plan_path} ({_size(plan_path)})")
    plan = load_plan(plan_path)
    from ipuplan.replan import pipeline as optimizer  # the solver's import is paid only by the commands that solve

    try:
        return optimizer.optimize(plan, options, progress=None if progress.quiet else progress.solver,
                                  on_phase=progress.phase, dump_model=None if capture is None else str(capture.path))
    except PlanError as error:
        raise error.at(source=str(plan_path)) from None


def _write_results(result, target: Path, capture, dump_model: Path | None, report: Path | None) -> None:
    """The plan, then the model dump and the report: each whole or not at all. The dump is read first: a truncated
    one stops the run before anything is written."""
    try:
        dump = None if capture is None else capture.content
    except OSError as error:
        raise OutputError(dump_model, error.strerror) from None
    write_output(target, dump_plan(result.plan))
    if dump is not None:
        write_output(dump_model, dump)
    elif capture is not None:
        typer.echo(f"note: the solver built no model (nothing was left to decide): {dump_model} not written", err=True)
    if report is not None:
        write_output(report, _page(result.facts, result.prepared.space, result.explanation, result.shortfall,
                                   result.inserted))


def _unmet(result) -> str:
    """Why a plan that does not meet its budgets is not written (without --best-effort), honestly: the greedy
    baseline proves nothing, a time limit is not a proof."""
    options, solved = result.options, result.solve
    if options.solver == Backend.GREEDY:
        why = ("the greedy baseline's layout exceeds the budgets "
               "(it proves nothing: --solver cpsat says whether any fits)")
    elif solved.status.value == "no_solution":
        why = (f"no layout meeting the budgets was found within --time-limit {options.time_limit:g} s "
               "(a longer one may find one)")
    else:
        why = f"the best layout found exceeds the budgets ({result.note or solved.status.value})"
    return f"{why}; nothing written (--best-effort writes the least-bad plan)"


def _print_result(result, target: Path) -> None:
    print_table(optimize_table(result))
    typer.echo(f"left alone ({sum(len(g.members) for g in result.frozen)} values; --json lists each with its reason):")
    for line in frozen_lines(result):
        typer.echo(line)
    for line in inserted_lines(result):
        typer.echo(line)
    if result.explanation is not None:
        for line in explanation_lines(result.explanation):
            typer.echo(line)
    if result.shortfall:
        typer.echo(f"the plan exceeds its budgets at {len(result.shortfall)} budget-at-a-step limits:")
        for line in shortfall_lines(result):
            typer.echo(line)
    if result.note:
        typer.echo(f"note: {result.note}")
    typer.echo(f"wrote {target}")


def _page(facts, space, explanation, shortfall=(), inserted=()) -> str:
    """The HTML report of `facts.plan` with the run's candidate space, and the explanation, the shortfall and the
    inserted steps when there are any."""
    sections = (explanation_html(explanation, explanation_lines(explanation)),) if explanation is not None else ()
    sections += (shortfall_html(shortfall),) if shortfall else ()
    return render_html(facts, space, sections=sections + ((inserted_html(inserted),) if inserted else ()))


def _report_failure(error: IpuplanError, report: Path | None, as_json: bool) -> None:
    """Before the one error line: the explanation (indented on stderr; the JSON object carries it) and the report
    of the input under the budgets it was measured against, from the failed run's own facts."""
    explanation = getattr(error, "explanation", None)
    if explanation is None:
        return
    if report is not None:
        write_output(report, _page(error.prepared.facts, error.prepared.space, explanation))
    if not as_json:
        for line in explanation_lines(explanation):
            typer.echo(line if line.startswith("  ") else f"  {line}", err=True)


def _write_failure_report(result, report: Path | None) -> None:
    """The report of a run whose plan is not written: the input, under the run's budgets."""
    if report is not None:
        write_output(report, _page(result.prepared.facts, result.prepared.space, None))


def _size(path: Path) -> str:
    try:
        return f"{path.stat().st_size / 1e6:,.1f} MB"
    except OSError:
        return "unreadable"


@app.command("sweep")
@one_line_errors
@takes_optimize_options
def sweep_command(
    plan_path: PlanPath,
    options: OptimizeOptions,
    points: Annotated[int, typer.Option(min=1, max=1000, help="At most this many points of the front.")] = 8,
    min_step: Annotated[float, typer.Option(
        min=0.0, max=99.0, metavar="PERCENT",
        help="Keep a point only when it sends at least this much less than the point below it.")] = 1.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object (the front, or the error).")] = False,
    report: Annotated[Path | None, typer.Option(
        "--report", parser=_output_path, help="Also write the HTML report here, with the plot of the front.")] = None,
    force: Force = False,
) -> None:
    """The trade-off of peak against exchange bytes (the Pareto front under the budgets): a handful of points that
    span it, from the smallest peak to the least exchange, and how much exchange each KiB of memory costs.
    --time-limit is the whole sweep's; --objective and --best-effort do not apply."""
    require_outputs({"--report": report}, inputs=_inputs(plan_path, options), force=force)
    from ipuplan.replan.sweep import sweep  # the solver's import is paid only by the commands that solve

    progress = _Progress(quiet=as_json)
    with progress.ticking():
        try:
            progress.phase("load", f"{plan_path} ({_size(plan_path)})")
            plan = load_plan(plan_path)
            progress.phase("sweep", f"up to {points} points, each {min_step:g}% below the last, "
                                    f"{options.time_limit:g} s in all")
            front = sweep(plan, options, max_points=points, min_step=min_step / 100,
                          on_point=lambda point: _print_point(progress, point))
        except InfeasibleBudget as error:
            _report_failure(error, report, as_json)
            raise
        except PlanError as error:
            raise error.at(source=str(plan_path)) from None
        if not front.points:
            raise NoSolutionInTime(f"no point of the front was found within --time-limit {options.time_limit:g} s "
                                   "(a time limit, not a proof: a longer one, or ipuplan optimize, may find one)")
        if report is not None:
            write_output(report, render_html(front.prepared.facts, front.prepared.space, sections=(sweep_html(front),)))
    if as_json:
        RUN.say_json({"input": str(plan_path), "status": "ok", **front.summary()})
        return
    print_table(sweep_table(front))
    typer.echo(f"{len(front.points)} points in {front.seconds:.2f} s" + (f"; wrote {report}" if report else ""))


def _print_point(progress: _Progress, point) -> None:
    progress.line(f"  point  peak {point.peak:>12,}  exchange {point.exchange_bytes:>16,}  {point.seconds:6.2f} s")


@app.command("synth")
@one_line_errors
def synth_command(
    plan_path: PlanPath,
    output: OutputFile,
    layers: Annotated[int | None, typer.Option(
        min=1, help=f"Run the repeated block N times (a plan of at most {MAX_VALUES:,} values).")] = None,
    unroll_copies: Annotated[int | None, typer.Option(
        "--unroll", min=1, help=f"The program K times in a row (a plan of at most {MAX_VALUES:,} values).")] = None,
    budget_factor: Annotated[float | None, typer.Option(min=0.01, max=100.0, help="Scale the budgets.")] = None,
    scope: Annotated[str | None, typer.Option(help="Scope name to write into the plan.")] = None,
    memory_limit: Annotated[int | None, typer.Option(
        metavar="SIZE", parser=_text_reader(byte_size),
        help="Refuse a plan whose making would need more memory (bytes, or 8G, 512M; default 75% of the "
             "machine's).")] = None,
    force: Force = False,
) -> None:
    """Derive a consistent plan from a real one: more layers, unrolled copies, other budgets."""
    require_outputs({"-o": output}, inputs=(plan_path,), force=force)
    with _Progress(quiet=False).ticking() as progress:
        progress.phase("load", f"{plan_path} ({_size(plan_path)})")
        plan = load_plan(plan_path)
        progress.phase("derive", "the plan asked for")
        if layers is not None:
            plan = _sized(repeat_layers, plan, layers, memory_limit, "--layers")
        if unroll_copies is not None:
            plan = _sized(unroll, plan, unroll_copies, memory_limit, "--unroll")
        if budget_factor is not None:
            plan = with_budget_factor(plan, budget_factor)
        if scope is not None:
            plan = with_scope(plan, scope)
        result = estimate(plan)
        progress.phase("write", str(output))
        write_output(output, dump_plan(plan))
    typer.echo(
        f"wrote {output}: {len(plan.values)} values, {len(plan.steps)} steps, raw peak {result.raw_peak:,}, "
        f"fits {'yes' if result.fits_budget else 'no'}"
    )


def _sized(derive, plan, count: int, memory_limit: int | None, option: str):
    """`derive(plan, count)`, its refusal by size naming the option that asked for it."""
    try:
        return derive(plan, count, memory_limit)
    except RunTooLarge as error:
        raise error.at(source=f"{option} {count}") from None


@app.command("explore")
@one_line_errors
@takes_optimize_options
def explore_command(
    plans: Annotated[list[Path], typer.Argument(help="Plan files or directories of plans.", show_default=False)],
    output: Annotated[Path, typer.Option(
        "--output", "-o", parser=_output_path, help="Directory for the rewritten plans and summaries.")],
    options: OptimizeOptions,
    jobs: Annotated[int, typer.Option(min=1, help="Plans optimised at once (solver workers x jobs <= cores).")] = 1,
    force: Annotated[bool, typer.Option(help="Redo plans whose outputs are up to date.")] = False,
    executor: Annotated[str, typer.Option(help="local (processes) or ray (needs ipuplan[ray]).")] = "local",
    address: Annotated[str | None, typer.Option(help="Ray cluster address (default: start a local instance).")] = None,
    as_json: Annotated[bool, typer.Option(
        "--json", help="Print one JSON object: the ranked rows (or the error).")] = False,
) -> None:
    """Optimise every plan, write each to OUTPUT, rank them; exit 4 if some plans failed (see their rows)."""
    started = time.perf_counter()
    from ipuplan.workbench.explore import explore, summary_rows

    if options.pin_file is not None:
        read_pin_file(options.pin_file)
    progress = _Progress(quiet=as_json, name="explore")
    with progress.ticking():
        rows = explore(plans, output, options, jobs=jobs, force=force, executor=executor, address=address,
                       on_row=lambda row: _print_row_done(progress, row))
    failed = not all(row.succeeded for row in rows)
    seconds = time.perf_counter() - started
    if as_json:
        RUN.say_json({"status": "some_failed" if failed else "ok", "output": str(output), "plans": len(rows),
                      "seconds": round(seconds, 3), "rows": summary_rows(rows)})
    else:
        print_table(explore_table(rows))
        for rank, row in enumerate(rows, 1):
            if row.error:
                where = "" if row.error.startswith(row.input) else f"{row.input}: "
                typer.echo(f"  #{rank} {where}{row.error}")
        typer.echo(f"{len(rows)} plans in {seconds:.2f} s; summaries in {output}")
    if failed:
        raise typer.Exit(4)


@app.command("report")
@one_line_errors
def report_command(
    plan_path: PlanPath,
    output: OutputFile,
    against: Annotated[Path | None, typer.Option(help="A second plan whose timeline is overlaid.")] = None,
    png: Annotated[Path | None, typer.Option(
        parser=_output_path, help="Also write the timeline as a PNG (needs ipuplan[plot]).")] = None,
    scope: Annotated[Scope, typer.Option(
        help="The scope whose free and frozen values the anatomy shows.")] = Scope.FULL,
    force: Force = False,
) -> None:
    """An HTML page: usage timeline with budgets and the peak, and the anatomy of the peak step."""
    require_outputs({"-o": output, "--png": png}, inputs=(plan_path, *([against] if against else [])), force=force)
    if png is not None:
        require_matplotlib()
    with _Progress(quiet=False).ticking() as progress:
        progress.phase("load", f"{plan_path} ({_size(plan_path)})")
        from ipuplan.replan.pipeline import prepared_space  # as `optimize` does: the solver's import only when used

        facts = plan_facts(load_plan(plan_path))
        _, space = prepared_space(facts, OptimizeOptions(scope=scope))  # a run's own front half, without the problem
        other = estimate(load_plan(against)) if against is not None else None
        label = str(against) if against is not None else ""
        progress.phase("render", str(output))
        write_output(output, render_html(facts, space, other, label))
        if png is not None:
            with recorded(png):
                render_png(facts, str(png), other, label)
    typer.echo(f"wrote {output}")
    if png is not None:
        typer.echo(f"wrote {png}")


@app.command("diff")
@one_line_errors
def diff_command(
    old: Annotated[Path, typer.Argument(help="The first plan (e.g. the compiler's).", show_default=False)],
    new: Annotated[Path, typer.Argument(help="The second plan (e.g. ipuplan's).", show_default=False)],
) -> None:
    """Per changed value: partitions, strides, class and bytes; per changed operation: its text; the peak change."""
    with _Progress(quiet=False, name="diff").ticking():
        lines = diff_lines(diff_plans(load_plan(old), load_plan(new)))
    for line in lines:
        typer.echo(line)


@app.command("iopddl")
@one_line_errors
def iopddl_command(
    instance_path: Annotated[Path, typer.Argument(
        metavar="INSTANCE", help="An IOPDDL contest instance (JSON, gzip or plain).", show_default=False)],
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", parser=_output_path, show_default=False,
        help="Where to write the solution (a JSON list of strategy indices).")] = None,
    time_limit: Annotated[float, typer.Option(
        min=1.0, max=86400.0, help="Seconds for the whole run, reading included (the contest's timeout).")] = 60.0,
    workers: Annotated[int | None, typer.Option(min=1, max=256, help="Solver workers (default: the cores).")] = None,
    seed: Annotated[int, typer.Option(help="Solver seed.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the run's figures as one JSON object.")] = False,
    force: Force = False,
) -> None:
    """Solve an instance of the IOPDDL contest (XLA auto-sharding) with ipuplan's core: the least cost whose usage
    stays within the limit, scored by the contest's own definition (exit 3, nothing written, when no valid solution
    was found)."""
    started = time.perf_counter()
    require_outputs({"-o": output} if output is not None else {}, inputs=(instance_path,), force=force)
    from ipuplan.workbench.iopddl import read_instance, solve_instance  # the solver's import, only here

    with _Progress(quiet=as_json, name="read").ticking() as progress:
        progress.phase("read", str(instance_path))
        instance = read_instance(instance_path)
        run = solve_instance(instance, time_limit, started=started, workers=workers, seed=seed,
                             on_phase=progress.phase)
        if run.solved and output is not None:
            progress.phase("write", str(output))
            write_output(output, json.dumps(list(run.choice)) + "\n")
    summary = {**run.summary(), "output": None if output is None else str(output)}
    if not run.solved:
        scored = run.evaluation
        why = (f"usage {scored.peak_usage:,} at time {scored.peak_time}, over the limit {instance.usage_limit:,}"
               if not scored.valid else f"{scored.forbidden} forbidden costs")
        what = ("no solution meets the usage limit (proven)" if run.result.status == SolveStatus.INFEASIBLE
                else f"no valid solution within --time-limit {time_limit:g} s")
        RUN.fail(f"{what} (the choice kept has {why}); nothing written", "no solution", **summary)
        raise typer.Exit(3)
    if as_json:
        RUN.say_json({**summary, "status": "solved"})
        return
    typer.echo(f"{instance.name}: cost {run.evaluation.cost:,} (valid: peak usage {run.evaluation.peak_usage:,} of "
               f"{'no limit' if instance.usage_limit is None else format(instance.usage_limit, ',')}), "
               f"{run.result.status.value}; first solution "
               f"{'-' if run.first_solution_seconds is None else format(run.first_solution_seconds, '.1f') + ' s'}, "
               f"wall {time.perf_counter() - started:.1f} s" + ("" if output is None else f"; wrote {output}"))


def _print_row_done(progress: _Progress, row) -> None:
    what = "up to date" if row.skipped else row.status
    progress.line(f"  {row.input}: {what} ({row.seconds:.2f} s)")


def main(args: list[str] | None = None) -> int:
    """The `ipuplan` entry point: a usage error is one line on stderr too (exit 2), not a help box. Without
    `args` this is the program (argv): it then takes SIGINT and SIGTERM itself (`_Command`)."""
    command = _Command() if args is None and threading.current_thread() is threading.main_thread() else None
    if command is not None:
        command.start()
    try:  # an interrupt raises at the next Python call, wherever that is: every one until the last is in here
        code = _run(args)
        if command is not None:
            command.close()
            _settle()
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
    sys.exit(main())


def _command_of(error) -> str:
    name = error.ctx.info_name if error.ctx is not None and error.ctx.parent is not None else ""
    return f"{name} " if name else ""


def _the_program() -> bool:
    """Whether this process is the `ipuplan` command (the script, `python -m ipuplan`, or this module run), not a
    program that imports it: only then do signals stay with TAKER until `main` hands them to the command."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return (__name__ == "__main__" or getattr(spec, "name", "") == f"{__package__}.__main__"
            or Path(sys.argv[0]).name == "ipuplan")


if not _the_program():  # imported by another program (a test, a notebook): its signals are its own again
    TAKER.on_signal = _outside_a_command
    signal.pthread_sigmask(signal.SIG_SETMASK, _MASK_BEFORE)

if __name__ == "__main__":
    sys.exit(main())
