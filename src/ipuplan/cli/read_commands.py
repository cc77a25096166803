"""The commands that read plans and write nothing: `check`, `show`, `graph`, `diff`."""

from __future__ import annotations

import textwrap
import time
from pathlib import Path
from typing import Annotated

import typer

from ipuplan.cli.common import RUN, PlanPath, Progress, app, one_line_errors, print_table, stdout
from ipuplan.facts.check import check
from ipuplan.facts.dataflow import dataflow
from ipuplan.facts.plan_exchange import plan_exchange
from ipuplan.facts.plan_facts import plan_facts
from ipuplan.plan.format import load_plan
from ipuplan.replan.against import against
from ipuplan.report.diff import diff_lines, diff_plans
from ipuplan.report.text import (
    check_summary,
    contributors_table,
    graph_lines,
    show_summary,
    summary_table,
)
from ipuplan.space.scopes import Scope


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
    with Progress(quiet=as_json, name="check").ticking():
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
    with Progress(quiet=as_json, name="show").ticking():
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
    with Progress(quiet=False, name="graph").ticking():
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


@app.command("diff")
@one_line_errors
def diff_command(
    old: Annotated[Path, typer.Argument(help="The first plan (e.g. the compiler's).", show_default=False)],
    new: Annotated[Path, typer.Argument(help="The second plan (e.g. ipuplan's).", show_default=False)],
) -> None:
    """Per changed value: partitions, strides, class and bytes; per changed operation: its text; the peak change."""
    with Progress(quiet=False, name="diff").ticking():
        lines = diff_lines(diff_plans(load_plan(old), load_plan(new)))
    for line in lines:
        typer.echo(line)
