"""The workbench's commands: `synth`, `explore`, `report`."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from ipuplan.cli.common import (
    RUN,
    Force,
    OutputFile,
    PlanPath,
    Progress,
    app,
    one_line_errors,
    output_path,
    print_table,
    recorded,
    size_of,
    takes_optimize_options,
    text_reader,
    write_output,
)
from ipuplan.facts.estimate import estimate
from ipuplan.facts.plan_facts import plan_facts
from ipuplan.plan.format import load_plan, plan_bytes
from ipuplan.plan.outputs import require_outputs
from ipuplan.replan.options import OptimizeOptions, byte_size
from ipuplan.replan.pins import read_pin_file
from ipuplan.replan.size import RunTooLarge
from ipuplan.report.html import (
    render_html,
    render_png,
    require_matplotlib,
)
from ipuplan.report.text import (
    explore_table,
)
from ipuplan.space.scopes import Scope
from ipuplan.workbench.synth import MAX_VALUES, repeat_layers, unroll, with_budget_factor, with_scope


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
        metavar="SIZE", parser=text_reader(byte_size),
        help="Refuse a plan whose making would need more memory (bytes, or 8G, 512M; default 75% of the "
             "machine's).")] = None,
    force: Force = False,
) -> None:
    """Derive a consistent plan from a real one: more layers, unrolled copies, other budgets."""
    require_outputs({"-o": output}, inputs=(plan_path,), force=force)
    with Progress(quiet=False).ticking() as progress:
        progress.phase("load", f"{plan_path} ({size_of(plan_path)})")
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
        write_output(output, plan_bytes(plan))
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
        "--output", "-o", parser=output_path, help="Directory for the rewritten plans and summaries.")],
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
    progress = Progress(quiet=as_json, name="explore")
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
        parser=output_path, help="Also write the timeline as a PNG (needs ipuplan[plot]).")] = None,
    scope: Annotated[Scope, typer.Option(
        help="The scope whose free and frozen values the anatomy shows.")] = Scope.FULL,
    force: Force = False,
) -> None:
    """An HTML page: usage timeline with budgets and the peak, and the anatomy of the peak step."""
    require_outputs({"-o": output, "--png": png}, inputs=(plan_path, *([against] if against else [])), force=force)
    if png is not None:
        require_matplotlib()
    with Progress(quiet=False).ticking() as progress:
        progress.phase("load", f"{plan_path} ({size_of(plan_path)})")
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


def _print_row_done(progress: Progress, row) -> None:
    what = "up to date" if row.skipped else row.status
    progress.line(f"  {row.input}: {what} ({row.seconds:.2f} s)")
