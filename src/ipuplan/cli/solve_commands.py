"""The commands that solve: `optimize`, `sweep` and `iopddl` (the solver's import is paid only when one runs)."""

from __future__ import annotations

import json
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from ipuplan.cli.common import (
    RUN,
    Force,
    PlanPath,
    Progress,
    ReportFile,
    app,
    inputs_of,
    one_line_errors,
    output_path,
    print_table,
    report_failure,
    report_page,
    size_of,
    takes_optimize_options,
    write_failure_report,
    write_output,
)
from ipuplan.errors import InfeasibleBudget, NoSolutionInTime, OutputError, PlanError
from ipuplan.facts import price_store
from ipuplan.plan.format import load_plan, plan_bytes
from ipuplan.plan.outputs import captured_file, require_outputs
from ipuplan.replan.options import OptimizeOptions
from ipuplan.report.html import (
    render_html,
    sweep_html,
)
from ipuplan.report.text import (
    explanation_lines,
    frozen_lines,
    inserted_lines,
    optimize_summary,
    optimize_table,
    shortfall_lines,
    sweep_table,
)
from ipuplan.solvers import Backend, SolveStatus


@app.command("optimize")
@one_line_errors
@takes_optimize_options
def optimize_command(
    plan_path: PlanPath,
    options: OptimizeOptions,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", parser=output_path, help="Where to write the rewritten plan.")
    ] = None,
    in_place: Annotated[bool, typer.Option(help="Overwrite the input plan with the result (instead of -o).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object (the result, or the error).")] = False,
    force: Force = False,
    dump_model: Annotated[Path | None, typer.Option(
        parser=output_path, help="Write the CP-SAT model (text proto) here, for debugging.")] = None,
    report: ReportFile = None,
) -> None:
    """Minimise the peak per-tile usage, then the exact exchange at that peak (or, with --objective fit, the exact
    exchange while meeting the budgets) and write the rewritten plan (exit 3 if the budgets cannot be met; with
    --best-effort the least-bad plan is written). The summary gives the exact exchange of the input and of the written
    plan."""
    target = _target(plan_path, output, in_place)
    require_outputs({"-o": target, "--report": report, "--dump-model": dump_model},
                    inputs=inputs_of(plan_path, options), force=force, in_place=in_place)
    if dump_model is not None and options.solver != Backend.CPSAT:
        raise PlanError(f"only the cpsat solver has a model to dump, not {options.solver.value}", source="--dump-model")
    progress = Progress(quiet=as_json)
    prices_before = price_store.counts()
    with progress.ticking(), _dump_capture(dump_model) as capture:
        try:
            result = _optimize(plan_path, options, progress, capture)
            RUN.kept.append(result)
        except InfeasibleBudget as error:
            report_failure(error, report, as_json)
            raise
        unmet = not result.after.fits_budget and not result.best_effort
        if unmet:
            write_failure_report(result, report)
            raise InfeasibleBudget(_unmet(result))
        progress.phase("write", f"{target}")
        _write_results(result, target, capture, dump_model, report)
    if as_json:
        RUN.say_json({**optimize_summary(result, str(plan_path), str(target)), "phase_seconds": progress.timed(),
                      "exchange_prices": _prices_since(prices_before)})
    else:
        _print_result(result, target)
    if result.best_effort and not result.after.fits_budget:
        typer.echo(f"does not fit: {result.explanation.line}; the least-bad plan is written to {target}", err=True)
        raise typer.Exit(3)


def _prices_since(before: dict[str, int]) -> dict:
    """The exact exchange's prices this run read from the store kept across runs and kept in it, and its folder
    (None: `IPUPLAN_CACHE_DIR=off`): a run that read its prices is not a first run."""
    folder = price_store.store_directory()
    return {**{name: count - before[name] for name, count in price_store.counts().items()},
            "store": None if folder is None else str(folder)}


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


def _optimize(plan_path: Path, options: OptimizeOptions, progress: Progress, capture):
    """Load and optimise: the result (nothing is written here)."""
    progress.phase("load", f"{plan_path} ({size_of(plan_path)})")
    plan = load_plan(plan_path)
    from ipuplan.replan import pipeline as optimizer  # the solver's import is paid only by the commands that solve

    try:
        return optimizer.optimize(plan, options, progress=None if progress.quiet else progress.solver,
                                  on_phase=progress.phase, dump_model=None if capture is None else str(capture.path),
                                  started=progress.started)
    except PlanError as error:
        raise error.at(source=str(plan_path)) from None


def _write_results(result, target: Path, capture, dump_model: Path | None, report: Path | None) -> None:
    """The plan, then the model dump and the report: each whole or not at all. The dump is read first: a truncated
    one stops the run before anything is written."""
    try:
        dump = None if capture is None else capture.content
    except OSError as error:
        raise OutputError(dump_model, error.strerror) from None
    write_output(target, plan_bytes(result.plan))
    if dump is not None:
        write_output(dump_model, dump)
    elif capture is not None:
        typer.echo(f"note: the solver built no model (nothing was left to decide): {dump_model} not written", err=True)
    if report is not None:
        write_output(report, report_page(result.facts, result.prepared.space, result.explanation, result.shortfall,
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
        "--report", parser=output_path, help="Also write the HTML report here, with the plot of the front.")] = None,
    force: Force = False,
) -> None:
    """The trade-off of peak against exchange bytes (the Pareto front under the budgets): a handful of points that
    span it, from the smallest peak to the least exchange, and how much exchange each KiB of memory costs.
    --time-limit is the whole sweep's; --objective and --best-effort do not apply."""
    require_outputs({"--report": report}, inputs=inputs_of(plan_path, options), force=force)
    from ipuplan.replan.sweep import sweep  # the solver's import is paid only by the commands that solve

    progress = Progress(quiet=as_json)
    with progress.ticking():
        try:
            progress.phase("load", f"{plan_path} ({size_of(plan_path)})")
            plan = load_plan(plan_path)
            progress.phase("sweep", f"up to {points} points, each {min_step:g}% below the last, "
                                    f"{options.time_limit:g} s in all")
            front = sweep(plan, options, max_points=points, min_step=min_step / 100,
                          on_point=lambda point: _print_point(progress, point))
        except InfeasibleBudget as error:
            report_failure(error, report, as_json)
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


def _print_point(progress: Progress, point) -> None:
    progress.line(f"  point  peak {point.peak:>12,}  exchange {point.exchange_bytes:>16,}  {point.seconds:6.2f} s")


@app.command("iopddl")
@one_line_errors
def iopddl_command(
    instance_path: Annotated[Path, typer.Argument(
        metavar="INSTANCE", help="An IOPDDL contest instance (JSON, gzip or plain).", show_default=False)],
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", parser=output_path, show_default=False,
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

    with Progress(quiet=as_json, name="read").ticking() as progress:
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
