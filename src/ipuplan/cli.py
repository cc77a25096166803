"""The `ipuplan` command: a thin typer layer over the library.

Exit codes: 0 success, 1 `check` found mismatches, 2 bad input (or a bad output path), 3 the budgets
cannot be met, 4 `explore` finished but some plans failed, 70 internal error (IPUPLAN_DEBUG=1 shows
the traceback), 130 interrupted (Ctrl-C; nothing half-written is left).
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Annotated, get_args, get_origin

import typer
from rich.console import Console

from ipuplan.errors import IpuplanError, PlanError
from ipuplan.facts.check import check
from ipuplan.facts.dataflow import dataflow
from ipuplan.facts.estimate import estimate
from ipuplan.facts.plan_facts import plan_facts
from ipuplan.plan.format import load_plan, write_plan
from ipuplan.plan.outputs import require_writable, write_atomically
from ipuplan.replan.options import OptimizeOptions
from ipuplan.report.diff import diff_lines, diff_plans
from ipuplan.report.html import (
    explanation_html,
    render_html,
    render_png,
    require_matplotlib,
    shortfall_html,
    sweep_html,
)
from ipuplan.report.text import (
    contributors_table,
    explanation_lines,
    explore_table,
    frozen_lines,
    graph_lines,
    optimize_summary,
    optimize_table,
    shortfall_lines,
    summary_table,
    sweep_table,
)
from ipuplan.space.scopes import Scope, candidate_space
from ipuplan.workbench.synth import repeat_layers, unroll, with_budget_factor, with_scope

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
stdout = Console(highlight=False, width=None if sys.stdout.isatty() else 160)


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


PlanPath = Annotated[Path, typer.Argument(metavar="PLAN", help="Plan JSON file written by the compiler.", show_default=False)]
Force = Annotated[bool, typer.Option(help="Overwrite outputs that exist.")]
OutputFile = Annotated[Path, typer.Option("--output", "-o", parser=_output_path, help="Where to write the result.")]


def _bound(field, name: str):
    return next((getattr(m, name) for m in field.metadata if hasattr(m, name)), None)


def _option_parameter(name: str, field) -> inspect.Parameter:
    """One `OptimizeOptions` field as a typer option: its type, bounds, default and help. A tuple field is a
    repeatable option (typer collects a list; the options model makes it a tuple again)."""
    metavar = (field.json_schema_extra or {}).get("metavar")
    option = typer.Option(help=field.description, min=_bound(field, "ge"), max=_bound(field, "le"), metavar=metavar)
    annotation, default = field.annotation, field.default
    if get_origin(annotation) is tuple:
        annotation, default = list[get_args(annotation)[0]], []
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=Annotated[annotation, option])


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


INTERRUPTED = {"explore_command": "plans finished before are written, nothing half-written is left"}


def one_line_errors(command):
    """Library errors become one line on stderr and their exit code; nothing else leaks a traceback."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except IpuplanError as error:
            typer.echo(f"error: {error}", err=True)
            raise typer.Exit(error.exit_code) from None
        except KeyboardInterrupt:
            typer.echo(f"interrupted: {INTERRUPTED.get(command.__name__, 'nothing written')}", err=True)
            raise typer.Exit(130) from None
        except (typer.Exit, typer.Abort):
            raise
        except Exception as error:
            if os.environ.get("IPUPLAN_DEBUG"):
                raise
            typer.echo(f"internal error: {type(error).__name__}: {error} (IPUPLAN_DEBUG=1 shows more)", err=True)
            raise typer.Exit(70) from None

    return wrapper


@app.command("check")
@one_line_errors
def check_command(plan_path: PlanPath) -> None:
    """Recompute every derived field and report each mismatch (exit 1 if any)."""
    started = time.perf_counter()
    plan = load_plan(plan_path)
    mismatches = check(plan)
    for mismatch in mismatches:
        typer.echo(f"{plan_path}: {mismatch}")
    elapsed = time.perf_counter() - started
    if mismatches:
        typer.echo(f"{plan_path}: {len(mismatches)} mismatches ({elapsed:.2f} s)", err=True)
        raise typer.Exit(1)
    typer.echo(f"{plan_path}: consistent: {len(plan.values)} values, {len(plan.steps)} steps checked ({elapsed:.2f} s)")


@app.command("show")
@one_line_errors
def show_command(
    plan_path: PlanPath,
    top: Annotated[int, typer.Option(min=1, help="How many contributors to list.")] = 12,
) -> None:
    """Scope, budgets, peaks with their steps, fit, and the top contributors at the peak."""
    plan = load_plan(plan_path)
    result = estimate(plan)
    stdout.print(summary_table(plan, result))
    if plan.steps:
        stdout.print(contributors_table(plan, result, result.total_peak_step, top))


@app.command("graph")
@one_line_errors
def graph_command(plan_path: PlanPath) -> None:
    """The inferred dataflow: per step, reads -> writes (and what a loop boundary releases)."""
    plan = load_plan(plan_path)
    for line in graph_lines(plan, dataflow(plan)):
        typer.echo(line)


ReportFile = Annotated[Path | None, typer.Option(
    "--report", parser=_output_path, help="Also write the HTML report here (with why the budgets cannot be met).")]


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
    dump_model: Annotated[Path | None, typer.Option(help="Write the CP-SAT model (text proto) here, for debugging.")] = None,
    report: ReportFile = None,
) -> None:
    """Minimise the peak per-tile usage (or, with --objective fit, the exchange that meets the budgets) and write
    the rewritten plan (exit 3 if the budgets cannot be met; with --best-effort the least-bad plan is written)."""
    try:
        if report is not None:
            require_writable(report, inputs=(plan_path,), force=force)
        result, target = _optimize(plan_path, options, output, in_place, force, dump_model, quiet=as_json)
    except IpuplanError as error:
        _report_failure(error, plan_path, report, as_json)
        raise
    if report is not None:
        write_atomically(report, _page(result.facts, result.prepared.space, result.explanation, result.shortfall))
    if as_json:
        typer.echo(json.dumps(optimize_summary(result, str(plan_path), str(target)), indent=2))
    else:
        _print_result(result, target)
    if result.best_effort and not result.after.fits_budget:
        typer.echo(f"does not fit: {result.explanation.line}; the least-bad plan is written to {target}", err=True)
        raise typer.Exit(3)
    if not result.after.fits_budget:
        # A plan over its budgets is never a success, even when the solver only ran out of time.
        typer.echo(f"does not fit: {result.note or 'the plan exceeds its budgets'}; written to {target}", err=True)
        raise typer.Exit(3)


def _print_result(result, target: Path) -> None:
    stdout.print(optimize_table(result))
    typer.echo(f"left alone ({sum(len(g.members) for g in result.frozen)} values; --json lists each with its reason):")
    for line in frozen_lines(result):
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


def _page(facts, space, explanation, shortfall=()) -> str:
    """The HTML report of `facts.plan` with the run's candidate space, and the explanation and the shortfall when
    there are any."""
    sections = (explanation_html(explanation, explanation_lines(explanation)),) if explanation is not None else ()
    return render_html(facts, space, sections=sections + ((shortfall_html(shortfall),) if shortfall else ()))


def _report_failure(error: IpuplanError, plan_path: Path, report: Path | None, as_json: bool) -> None:
    """Before the one error line: the explanation (indented on stderr, or in the JSON object, and in the report
    of the input under the budgets it was measured against, from the failed run's own facts)."""
    explanation = getattr(error, "explanation", None)
    if explanation is not None and report is not None:
        write_atomically(report, _page(error.prepared.facts, error.prepared.space, explanation))
    if as_json:
        failure = {"input": str(plan_path), "status": _failure(error), "error": str(error)}
        if explanation is not None:
            failure["explanation"] = explanation.summary()
        typer.echo(json.dumps(failure, indent=2))
    elif explanation is not None:
        for line in explanation_lines(explanation):
            typer.echo(line if line.startswith("  ") else f"  {line}", err=True)


def _failure(error: IpuplanError) -> str:
    return "infeasible" if error.exit_code == 3 else "error"


def _optimize(plan_path: Path, options: OptimizeOptions, output: Path | None, in_place: bool, force: bool,
              dump_model: Path | None, quiet: bool):
    """Check the output path, load, optimise, write: the result and where it went."""
    started = time.perf_counter()
    if (output is None) == (not in_place):
        raise PlanError("give -o OUTPUT, or --in-place to overwrite the input" if output is None
                        else "give either -o OUTPUT or --in-place, not both", source="optimize")
    target = plan_path if in_place else output
    require_writable(target, inputs=(plan_path,), force=force, in_place=in_place)
    phase = None if quiet else _phase_printer(started)
    if phase is not None:
        phase("load", f"{plan_path} ({_size(plan_path)})")
    plan = load_plan(plan_path)
    from ipuplan.replan import pipeline as optimizer  # the solver's import is paid only by the commands that solve

    try:
        result = optimizer.optimize(plan, options, progress=None if quiet else _print_progress, on_phase=phase,
                                    dump_model=None if dump_model is None else str(dump_model))
    except PlanError as error:
        raise error.at(source=str(plan_path)) from None
    write_plan(result.plan, target)
    return result, target


def _size(path: Path) -> str:
    try:
        return f"{path.stat().st_size / 1e6:,.1f} MB"
    except OSError:
        return "unreadable"


def _phase_printer(started: float):
    def phase(name: str, detail: str) -> None:
        typer.echo(f"  {name:<10} {detail}  ({time.perf_counter() - started:.2f} s)", err=True)

    return phase


@app.command("sweep")
@one_line_errors
@takes_optimize_options
def sweep_command(
    plan_path: PlanPath,
    options: OptimizeOptions,
    points: Annotated[int, typer.Option(min=1, max=100_000, help="Stop after this many Pareto points.")] = 200,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object (the front, or the error).")] = False,
    report: Annotated[Path | None, typer.Option(
        "--report", parser=_output_path, help="Also write the HTML report here, with the plot of the front.")] = None,
    force: Force = False,
) -> None:
    """The trade-off of peak against exchange bytes (the Pareto front under the budgets): how much exchange each
    KiB of memory costs. --time-limit applies to each point; --objective and --best-effort do not apply."""
    from ipuplan.replan.sweep import sweep  # the solver's import is paid only by the commands that solve

    try:
        if report is not None:
            require_writable(report, inputs=(plan_path,), force=force)
        plan = load_plan(plan_path)
        front = sweep(plan, options, max_points=points, on_point=None if as_json else _print_point)
    except IpuplanError as error:
        _report_failure(error, plan_path, report, as_json)
        raise
    if report is not None:
        write_atomically(report, render_html(front.prepared.facts, front.prepared.space, sections=(sweep_html(front),)))
    if as_json:
        typer.echo(json.dumps({"input": str(plan_path), "status": "ok", **front.summary()}, indent=2))
        return
    stdout.print(sweep_table(front))
    typer.echo(f"{len(front.points)} points in {front.seconds:.2f} s" + (f"; wrote {report}" if report else ""))


def _print_point(point) -> None:
    typer.echo(f"  point  peak {point.peak:>12,}  exchange {point.exchange_bytes:>16,}  {point.seconds:6.2f} s", err=True)


@app.command("synth")
@one_line_errors
def synth_command(
    plan_path: PlanPath,
    output: OutputFile,
    layers: Annotated[int | None, typer.Option(min=1, max=1000, help="Run the repeated block N times.")] = None,
    unroll_copies: Annotated[int | None, typer.Option("--unroll", min=1, max=1000, help="The program K times in a row.")] = None,
    budget_factor: Annotated[float | None, typer.Option(min=0.01, max=100.0, help="Scale the budgets.")] = None,
    scope: Annotated[str | None, typer.Option(help="Scope name to write into the plan.")] = None,
    force: Force = False,
) -> None:
    """Derive a consistent plan from a real one: more layers, unrolled copies, other budgets."""
    require_writable(output, inputs=(plan_path,), force=force)
    plan = load_plan(plan_path)
    if layers is not None:
        plan = repeat_layers(plan, layers)
    if unroll_copies is not None:
        plan = unroll(plan, unroll_copies)
    if budget_factor is not None:
        plan = with_budget_factor(plan, budget_factor)
    if scope is not None:
        plan = with_scope(plan, scope)
    write_plan(plan, output)
    result = estimate(plan)
    typer.echo(
        f"wrote {output}: {len(plan.values)} values, {len(plan.steps)} steps, raw peak {result.raw_peak:,}, "
        f"fits {'yes' if result.fits_budget else 'no'}"
    )


@app.command("explore")
@one_line_errors
@takes_optimize_options
def explore_command(
    plans: Annotated[list[Path], typer.Argument(help="Plan files or directories of plans.", show_default=False)],
    output: Annotated[Path, typer.Option("--output", "-o", help="Directory for the rewritten plans and summaries.")],
    options: OptimizeOptions,
    jobs: Annotated[int, typer.Option(min=1, help="Plans optimised at once (solver workers x jobs <= cores).")] = 1,
    force: Annotated[bool, typer.Option(help="Redo plans whose outputs are up to date.")] = False,
    executor: Annotated[str, typer.Option(help="local (processes) or ray (needs ipuplan[ray]).")] = "local",
    address: Annotated[str | None, typer.Option(help="Ray cluster address (default: start a local instance).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the ranked rows as JSON.")] = False,
) -> None:
    """Optimise every plan, write each to OUTPUT, rank them; exit 4 if some plans failed (see their rows)."""
    started = time.perf_counter()
    from ipuplan.workbench.explore import explore, summary_rows

    rows = explore(plans, output, options, jobs=jobs, force=force, executor=executor, address=address,
                   on_row=None if as_json else _print_row_done)
    if as_json:
        typer.echo(json.dumps(summary_rows(rows), indent=2))
    else:
        stdout.print(explore_table(rows))
        for rank, row in enumerate(rows, 1):
            if row.error:
                where = "" if row.error.startswith(row.input) else f"{row.input}: "
                typer.echo(f"  #{rank} {where}{row.error}")
        typer.echo(f"{len(rows)} plans in {time.perf_counter() - started:.2f} s; summaries in {output}")
    if not all(row.succeeded for row in rows):
        raise typer.Exit(4)


@app.command("report")
@one_line_errors
def report_command(
    plan_path: PlanPath,
    output: OutputFile,
    against: Annotated[Path | None, typer.Option(help="A second plan whose timeline is overlaid.")] = None,
    png: Annotated[Path | None, typer.Option(help="Also write the timeline as a PNG (needs ipuplan[plot]).")] = None,
    scope: Annotated[Scope, typer.Option(help="The scope whose free and frozen values the anatomy shows.")] = Scope.FULL,
    force: Force = False,
) -> None:
    """An HTML page: usage timeline with budgets and the peak, and the anatomy of the peak step."""
    for target in (output, png):
        if target is not None:
            require_writable(target, inputs=(plan_path, *([against] if against else [])), force=force)
    if png is not None:
        require_matplotlib()
    facts = plan_facts(load_plan(plan_path))
    other = estimate(load_plan(against)) if against is not None else None
    label = str(against) if against is not None else ""
    write_atomically(output, render_html(facts, candidate_space(facts, scope), other, label))
    typer.echo(f"wrote {output}")
    if png is not None:
        render_png(facts, str(png), other, label)
        typer.echo(f"wrote {png}")


@app.command("diff")
@one_line_errors
def diff_command(
    old: Annotated[Path, typer.Argument(help="The first plan (e.g. the compiler's).", show_default=False)],
    new: Annotated[Path, typer.Argument(help="The second plan (e.g. ipuplan's).", show_default=False)],
) -> None:
    """Per changed value: partitions, strides, class and bytes; per changed operation: its text; the peak change."""
    for line in diff_lines(diff_plans(load_plan(old), load_plan(new))):
        typer.echo(line)


def _print_row_done(row) -> None:
    what = "up to date" if row.skipped else row.status
    typer.echo(f"  {row.input}: {what} ({row.seconds:.2f} s)", err=True)


def _print_progress(phase: str, objective: int, bound: int, elapsed: float) -> None:
    gap = (objective - bound) / objective if objective else 0.0
    typer.echo(f"  {phase:<8} objective {objective:>14,}  bound {bound:>14,}  gap {gap:6.2%}  {elapsed:7.2f} s", err=True)


def main(args: list[str] | None = None) -> int:
    """The `ipuplan` entry point: a usage error is one line on stderr too (exit 2), not a help box."""
    try:
        code = app(args=args, prog_name="ipuplan", standalone_mode=False)
    except click_errors.UsageError as error:
        if getattr(click_errors, "NoArgsIsHelpError", ()) and isinstance(error, click_errors.NoArgsIsHelpError):
            typer.echo(error.ctx.get_help(), err=True)
        else:
            typer.echo(f"error: {error.format_message()} (see: ipuplan {_command_of(error)}-h)", err=True)
            if "--json" in (args if args is not None else sys.argv[1:]):  # the promise: one object, always
                typer.echo(json.dumps({"status": "error", "error": error.format_message()}, indent=2))
        code = 2
    except (getattr(click_errors, "Abort", KeyboardInterrupt), KeyboardInterrupt):
        typer.echo("interrupted: nothing written", err=True)
        code = 130
    return code if isinstance(code, int) else 0


def entry_point() -> None:
    sys.exit(main())


def _command_of(error) -> str:
    name = error.ctx.info_name if error.ctx is not None and error.ctx.parent is not None else ""
    return f"{name} " if name else ""


if __name__ == "__main__":
    sys.exit(main())
