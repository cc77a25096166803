"""Plans and check results as text: rich tables for people, plain lines for pipes.

The kernel families of a plan as units, the way the report, `diff` and `graph` show them (`family_units`): each
Gemm family, attention product and element-wise family (REPLAN.md, levels 2 and 4) with its kernels and members,
recognised from the plan's dataflow (`facts/*_families.py`), not from a run, so that a diff of any two plans or a
report of any plan names the same units. An element-wise family that a rule holds (`ElementwiseFamily.hold`)
never changes as one and is not a unit. A value in two units (a Gemm's result that an element-wise family also
reads) belongs to the first: Gemm families, then attention products, then element-wise families.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from rich.table import Table

from ipuplan.facts.check import live_values
from ipuplan.facts.dataflow import Dataflow
from ipuplan.facts.elementwise_families import recognise_elementwise
from ipuplan.facts.estimate import Estimate
from ipuplan.facts.plan_exchange import PlanExchange
from ipuplan.facts.plan_facts import PlanFacts
from ipuplan.model.objective import Objective
from ipuplan.plan.format import Plan
from ipuplan.space import scopes


@dataclass(frozen=True)
class FamilyUnit:
    """A family re-laid out as one unit: its kind, its kernel steps (step, operation kind) and its members."""

    kind: str
    kernels: tuple[tuple[int, str], ...]
    members: tuple[int, ...]
    space_kind: str = ""
    """The kind of free group (`FreeGroup.kind`) that re-lays out this family as one unit."""

    @property
    def steps(self) -> frozenset[int]:
        return frozenset(step for step, _ in self.kernels)

    @property
    def label(self) -> str:
        """`element-wise family: Add at steps 5, 6; Gelu at step 108`."""
        return f"{self.kind} family: {kernel_words(self.kernels)}"


def kernel_words(kernels: Iterable[tuple[int, str]]) -> str:
    """Kernels grouped by operation kind, in order of first step.

    >>> kernel_words([(5, "Add"), (6, "Add"), (108, "Gelu")])
    'Add at steps 5, 6; Gelu at step 108'
    """
    by_kind: dict[str, list[int]] = {}
    for step, kind in sorted(kernels):
        by_kind.setdefault(kind, []).append(step)
    return "; ".join(f"{kind} at step{'s' if len(steps) > 1 else ''} {', '.join(map(str, steps))}"
                     for kind, steps in by_kind.items())


def family_units(facts: PlanFacts) -> tuple[FamilyUnit, ...]:
    """Every family a freedom level re-lays out as one unit (`Level.families`: Gemm families, attention products,
    element-wise families not held), in registry order, each member in one unit only."""
    found = [FamilyUnit(level.unit, kernels, members, level.kind)
             for level in scopes.LEVELS if level.families is not None for kernels, members in level.families(facts)]
    claimed: set[int] = set()
    units = []
    for unit in found:
        members = tuple(m for m in unit.members if m not in claimed)
        claimed.update(members)
        units.append(FamilyUnit(unit.kind, unit.kernels, members, unit.space_kind))
    return tuple(units)


def unit_of(units: Iterable[FamilyUnit]) -> dict[int, FamilyUnit]:
    """Member -> its unit."""
    return {m: unit for unit in units for m in unit.members}


def _kib(count: int) -> str:
    return f"{count:,} B ({count / 1024:,.1f} KiB)"


def summary_table(plan: Plan, result: Estimate, exchange: PlanExchange | None = None) -> Table:
    """Scope, budgets, peaks with their steps, whether the plan fits, and (given) its exact exchange."""
    table = Table(title=f"plan {plan.scope}: {len(plan.values)} values, {len(plan.steps)} steps", show_header=False)
    table.add_column("what")
    table.add_column("value", justify="right")
    rows = [
        ("budget per tile", _kib(plan.budget_bytes)),
        ("interleaved budget", _kib(plan.interleaved_budget_bytes)),
        ("support reserve", _kib(plan.support_reserve_bytes)),
        ("raw peak (std + il)", f"{_kib(result.raw_peak)} at step {result.total_peak_step}"),
        ("peak total (+ exchange rows)", _kib(result.peak.total)),
        ("peak standard (+ exchange rows)", f"{_kib(result.peak.standard)} at step {result.standard_peak_step}"),
        ("peak interleaved", f"{_kib(result.peak.interleaved)} at step {result.interleaved_peak_step}"),
        ("effective peak", _kib(result.effective_peak_bytes)),
        ("standard overflow", _kib(result.standard_contiguous_overflow_bytes)),
        ("fits budget", "yes" if result.fits_budget else "NO"),
        *([] if exchange is None else exchange_rows(exchange)),
    ]
    for row in rows:
        table.add_row(*row)
    return table


def exchange_rows(exchange: PlanExchange) -> list[tuple[str, str]]:
    """The plan's exact exchange (docs/EXCHANGE.md): the total, its movers and reductions, and what is unpriced."""
    return [
        ("exchange (movers + reductions)", f"{exchange.total:,} B"),
        ("  movers send", f"{exchange.movers:,} B"),
        ("  reductions send", f"{exchange.reductions:,} B"),
        ("exchange unpriced", unpriced_words(exchange)),
        *([] if not exchange.other_readings else [("views read factor-inner", other_reading_words(exchange))]),
    ]


def other_reading_words(exchange: PlanExchange, most: int = 3) -> str:
    """The view steps whose bytes depend on how the compiler reads `AxisFactorView` (docs/EXCHANGE.md), and the
    total read factor-inner."""
    other = exchange.other_readings
    more = f" and {len(other) - most} more" if len(other) > most else ""
    shown = ", ".join(str(o.step) for o in other[:most]) + more
    return f"{exchange.inner_total:,} B (steps {shown} send other bytes)"


def unpriced_words(exchange: PlanExchange, most: int = 3) -> str:
    """`nothing`, or how many steps the exchange leaves out and why (the first `most`)."""
    if not exchange.unpriced:
        return "nothing"
    shown = "; ".join(f"step {u.step}: {u.reason}" for u in exchange.unpriced[:most])
    more = f"; and {len(exchange.unpriced) - most} more" if len(exchange.unpriced) > most else ""
    return f"{len(exchange.unpriced)} steps ({shown}{more})"


def check_summary(source: str, plan: Plan, mismatches, exchange: PlanExchange, seconds: float) -> dict:
    """The machine-readable result `ipuplan check --json` prints: each mismatch, and the plan's exact exchange."""
    return {
        "input": source,
        "status": "mismatches" if mismatches else "consistent",
        "values": len(plan.values),
        "steps": len(plan.steps),
        "mismatches": [{"kind": m.kind.value, "where": m.where, "field": m.field, "stored": _plain(m.stored),
                        "expected": _plain(m.expected), "rule": m.rule, "text": str(m)} for m in mismatches],
        "exchange": exchange_summary(exchange),
        "seconds": round(seconds, 3),
    }


def _plain(number: object) -> object:
    """A mismatch's stored or expected figure as JSON holds it (other objects as their text)."""
    return number if number is None or isinstance(number, (bool, int, float, str)) else str(number)


def exchange_summary(exchange: PlanExchange) -> dict:
    """The exact exchange as `--json` carries it: total, movers, reductions, and each unpriced step with why."""
    return {"total": exchange.total, "movers": exchange.movers, "reductions": exchange.reductions,
            "unpriced": [{"step": u.step, "reason": u.reason} for u in exchange.unpriced],
            "inner_total": exchange.inner_total,
            "other_readings": [{"step": o.step, "bytes": o.bytes, "inner_bytes": o.inner_bytes}
                               for o in exchange.other_readings]}


def show_summary(source: str, plan: Plan, result: Estimate, exchange: PlanExchange, top: int) -> dict:
    """The machine-readable result `ipuplan show --json` prints: what its two tables show, as numbers."""
    step = plan.steps[result.total_peak_step]
    return {
        "input": source, "plan_scope": plan.scope, "values": len(plan.values), "steps": len(plan.steps),
        "budget_bytes": plan.budget_bytes, "interleaved_budget_bytes": plan.interleaved_budget_bytes,
        "support_reserve_bytes": plan.support_reserve_bytes, "raw_peak": result.raw_peak,
        "total_peak_step": result.total_peak_step, "peak": dict(result.peak),
        "standard_peak_step": result.standard_peak_step, "interleaved_peak_step": result.interleaved_peak_step,
        "effective_peak_bytes": result.effective_peak_bytes,
        "standard_contiguous_overflow_bytes": result.standard_contiguous_overflow_bytes,
        "fits_budget": result.fits_budget, "exchange": exchange_summary(exchange),
        "contributors": [{"value": v.value_id, "name": v.name, "class": v.memory_class, "bytes": v.bytes}
                         for v in live_values(plan, result, result.total_peak_step)[:top]],
        "peak_step_scratch": {"standard": step.scratch.standard, "interleaved": step.scratch.interleaved},
    }


def contributors_table(plan: Plan, result: Estimate, step_index: int, top: int = 12) -> Table:
    """The largest live values (and scratch) at one step."""
    step = plan.steps[step_index]
    table = Table(title=f"top contributors at step {step_index} ({step.parsed_operation.kind})")
    for name, justify in (("value", "right"), ("name", "left"), ("class", "left"), ("bytes", "right"),
                          ("share", "right")):
        table.add_column(name, justify=justify)
    total = result.standard[step_index] + result.interleaved[step_index]
    live = live_values(plan, result, step_index)
    for value in live[:top]:
        table.add_row(str(value.value_id), value.name, value.memory_class, f"{value.bytes:,}",
                      f"{value.bytes / max(total, 1):.1%}")
    scratch = step.scratch.standard + step.scratch.interleaved
    if scratch:
        table.add_row("-", "scratch", "", f"{scratch:,}", f"{scratch / max(total, 1):.1%}")
    if len(live) > top:
        rest = sum(value.bytes for value in live[top:])
        table.add_row("-", f"{len(live) - top} more values", "", f"{rest:,}", f"{rest / max(total, 1):.1%}")
    return table


def graph_lines(plan: Plan, flow: Dataflow) -> Iterable[str]:
    """One line per step: `index source operation: reads -> writes [released ...]`; then each Gemm family and each
    element-wise family (with what holds it, if anything), and every ambiguity."""
    for step, step_flow in zip(plan.steps, flow.steps):
        reads = ", ".join(map(str, step_flow.reads)) or "-"
        writes = ", ".join(map(str, step_flow.writes)) or "-"
        line = f"{step.index:>5}  src {step.source:<4} {step.operation[:48]:<48}  {reads} -> {writes}"
        if step_flow.releases:
            line += f"  [released {', '.join(map(str, step_flow.releases))}]"
        yield line
    for family in flow.families:
        reader = ("-" if family.sum_step is None
                  else f"{family.sum_step} ({plan.steps[family.sum_step].parsed_operation.kind})")
        yield (
            f"gemm family at step {family.gemm_step}: left {family.left} (from {_or_dash(family.left_source)}), "
            f"right {family.right} (from {_or_dash(family.right_source)}), partials {_or_dash(family.partials)} "
            f"read at step {reader} into {_or_dash(family.sum_result)}"
        )
    for found in recognise_elementwise(plan, flow):
        held = "" if found.hold is None else f", held: {found.hold}"
        yield (f"element-wise family: {kernel_words((k.step, k.operation) for k in found.kernels)}: members "
               f"{', '.join(map(str, found.members))}{held}")
    for ambiguity in flow.ambiguities:
        yield f"ambiguous: {ambiguity}"


def _or_dash(value: int | None) -> str:
    return "-" if value is None else str(value)


def optimize_table(result) -> Table:
    """Before/after: peaks per class, fit, what changed, and how the solver did."""
    before, after, solved = result.before, result.after, result.solve
    table = Table(title=f"ipuplan optimize ({result.plan.scope})")
    for name in ("", "input", "ipuplan"):
        table.add_column(name, justify="right" if name else "left")
    rows = [
        ("objective", "", result.options.objective.value + (" (best effort)" if result.best_effort else "")),
        ("raw peak (std + il)", f"{before.raw_peak:,}", f"{after.raw_peak:,}"),
        ("exchange bytes (movers + reductions)", f"{result.exchange_before:,}", f"{result.exchange_after:,}"),
        ("peak total (+ exchange rows)", f"{before.peak.total:,}", f"{after.peak.total:,}"),
        ("standard peak", f"{before.peak.standard:,}", f"{after.peak.standard:,}"),
        ("interleaved peak", f"{before.peak.interleaved:,}", f"{after.peak.interleaved:,}"),
        ("effective peak", f"{before.effective_peak_bytes:,}", f"{after.effective_peak_bytes:,}"),
        ("fits budget", _yes(before.fits_budget), _yes(after.fits_budget)),
        ("values changed", "", f"{len(result.changes)}"),
        ("exchange bytes added", "", f"{result.exchange_bytes_added:+,}"),
        *_unpriced_row(result),
        *_other_reading_row(result),
        *_proxy_row(result),
        ("solver status", "", f"{solved.status.value} for scope {result.options.scope.value}"),
        *_bound_rows(solved),
        ("free groups / candidates", "", f"{result.free_groups} / {result.candidates}"),
        ("steps in model / total", "", f"{solved.steps_kept} / {solved.steps_total}"),
        ("model variables / constraints", "", f"{solved.variables:,} / {solved.constraints:,}"),
        ("build / solve / first solution", "", (f"{solved.build_seconds:.2f} s / {solved.solve_seconds:.2f} s / "
         f"{_seconds(solved.first_solution_seconds)}")),
    ]
    for row in rows:
        table.add_row(*row)
    return table


def _unpriced_row(result) -> list[tuple[str, str, str]]:
    """Steps the exact exchange leaves out (none on the plans of models/), when there are any."""
    before, after = result.input_exchange, result.output_exchange
    if not before.unpriced and not after.unpriced:
        return []
    return [("exchange unpriced steps", f"{len(before.unpriced)}", f"{len(after.unpriced)}")]


def _other_reading_row(result) -> list[tuple[str, str, str]]:
    """The exchange with every view read factor-inner, where some view step's bytes depend on the reading (never in
    a plan the exact stage chose, unless the input's own views do: docs/EXCHANGE.md)."""
    before, after = result.input_exchange, result.output_exchange
    if not before.other_readings and not after.other_readings:
        return []
    return [("  views read factor-inner", f"{before.inner_total:,}", f"{after.inner_total:,}")]


def _proxy_row(result) -> list[tuple[str, str, str]]:
    """The optimiser's proxy, where it chose by it (no exact stage ran: best effort, no fitting plan, `--exact-exchange
    never` or `auto` left it out)."""
    if result.exact:
        return []
    return [("model's exchange proxy", f"{result.model_exchange_before:,}", f"{result.model_exchange_after:,}")]


def _bound_rows(solved) -> list[tuple[str, str, str]]:
    """The bound and gap of the peak (objective `peak`), and of the exchange where the model bounds it."""
    rows = [] if solved.objective == Objective.FIT else [("bound / gap", "", f"{solved.bound:,} / "
                                                                            + f"{_percent(solved.peak_gap)}")]
    if solved.exchange_bound is not None:
        rows.append(("exchange bound / gap", "", f"{solved.exchange_bound:,} / {_percent(solved.exchange_gap)}"))
    return rows


def shortfall_lines(result, most: int = 12) -> list[str]:
    """Where a best-effort plan exceeds its budgets, worst first."""
    worst = sorted(result.shortfall, key=lambda s: (-s.over, s.step, s.budget))
    lines = [f"  step {s.step}: {s.budget} {s.bytes:,} B of {s.limit:,} B ({s.over:,} B over)" for s in worst[:most]]
    if len(worst) > most:
        lines.append(f"  and {len(worst) - most} more (--json lists each)")
    return lines


def explanation_lines(explanation, holders: int = 6) -> list[str]:
    """The explanation in plain words, one fact a line (the CLI prints them; the report shows the same)."""
    proven = "proven minimal: dropping any one lets the rest be met" if explanation.minimal else "not proven minimal"
    count = len(explanation.steps)
    if count:
        lines = [(f"why the budgets cannot be met (scope {explanation.scope}; {count} budget-at-a-step "
                  f"limit{'s' if count != 1 else ''} no layout meets together, {proven}):")]
    else:
        lines = [f"why the budgets cannot be met (scope {explanation.scope}): no minimal conflict was found in time"]
    while_others = "while the others hold" if count > 1 else "in every layout"
    for step in explanation.steps:
        lines += _step_lines(step, holders, while_others)
    for item in explanation.raises:
        if item.least is not None:
            fits = f"{item.least:,} B would fit ({item.options})"
        else:
            fits = ("raising it alone is not enough" if item.enough_alone is False
                    else "the least that fits was not found in time")
        lines.append(f"  {item.budget} (now {item.bytes:,} B): {fits}")
    if explanation.lowest_peak is not None:
        within = f" within the {' and the '.join(explanation.lowest_within)}" if explanation.lowest_within else ""
        lines.append(f"  the lowest raw peak any layout reaches{within}: {explanation.lowest_peak:,} B")
    for freedom in explanation.freedoms:
        verdict = {True: "the budgets can be met", False: "still does not fit",
                   None: "not decided in time"}[freedom.fits]
        lines.append(f"  with {freedom.options}: {verdict}")
    return lines


def _step_lines(step, holders: int, while_others: str) -> list[str]:
    lines = [(f"  step {step.step} ({step.operation}), {step.budget} {step.budget_bytes:,} B: needs at least "
              f"{step.needs:,} B {while_others}; {step.fixed_bytes:,} B frozen (scratch {step.scratch:,} B), "
              f"{step.free_values} free values take at least {step.free_least_bytes:,} B")]
    for holder in step.holders[:holders]:
        lines.append(f"    value {holder.value_id} {holder.name}: {holder.bytes:,} B {holder.memory_class}, "
                     f"frozen: {holder.frozen}")
    if len(step.holders) > holders:
        rest = step.holders[holders:]
        lines.append(f"    and {len(rest)} more frozen values, {sum(h.bytes for h in rest):,} B")
    return lines


def inserted_lines(result) -> list[str]:
    """The steps and values the written plan inserted (scope `program`), which the compiler must honour."""
    if not result.inserted:
        return []
    head = (f"inserted {len(result.inserted)} Copy steps and values (scope program): the compiler must honour them "
            "(each gathers a parameter stored sharded into the layout its reading step needs)")
    return [head, *(f"  {g} ({g.name})" for g in result.inserted)]


def frozen_lines(result) -> list[str]:
    """What the optimiser left alone, grouped by reason, largest groups first."""
    counts: dict[str, int] = {}
    for group in result.frozen:
        kind = group.reason.group_label
        counts[kind] = counts.get(kind, 0) + len(group.members)
    return [f"  {count:>5} values: {kind}" for kind, count in sorted(counts.items(), key=lambda item: -item[1])]


def _yes(flag: bool) -> str:
    return "yes" if flag else "NO"


def _percent(fraction: float | None) -> str:
    return "-" if fraction is None else f"{fraction:.2%}"


def _seconds(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.2f} s"


def optimize_summary(result, source: str, output: str | None) -> dict:
    """The machine-readable summary `ipuplan optimize --json` prints."""
    solved = result.solve
    return {
        "input": source,
        "output": output,
        "plan_scope": result.plan.scope,  # the plan's own name; not "scope", which beside freedom_scope misled
        "status": solved.status.value,
        "freedom_scope": result.options.scope.value,
        "status_in_words": f"{solved.status.value} for scope {result.options.scope.value}",
        "solver": result.options.solver.value,
        "note": result.note,
        "mandatory_seconds_estimate": None if result.prepared.size is None else round(
            result.prepared.size.mandatory_seconds, 1),
        "input_raw_peak": result.before.raw_peak,
        "raw_peak": result.after.raw_peak,
        "bound": solved.bound,
        "gap": solved.gap,
        "input_peak_total": result.before.peak.total,
        "peak_total": result.after.peak.total,
        "standard_peak": result.after.peak.standard,
        "interleaved_peak": result.after.peak.interleaved,
        "fits_before": result.before.fits_budget,
        "fits_after": result.after.fits_budget,
        "values_changed": len(result.changes),
        "changed_value_ids": [c.value_id for c in result.changes],
        "objective": result.options.objective.value,
        **_exchange_fields(result),
        "fits_budget": result.after.fits_budget,
        "best_effort": result.best_effort,
        "shortfall": [{"step": s.step, "budget": s.budget, "bytes": s.bytes, "limit": s.limit, "over": s.over}
                      for s in result.shortfall],
        "explanation": None if result.explanation is None else result.explanation.summary(),
        "pinned": {"layout": sorted(result.pins.layout), "class": sorted(result.pins.memory_class)},
        "model_fingerprint": result.model_fingerprint,
        "solution_fingerprint": result.solution_fingerprint,
        "inserted": [{"step": g.step, "value": g.value, "parameter": g.parameter, "reading_step": g.reading_step,
                      "name": g.name} for g in result.inserted],
        "frozen_groups": len(result.frozen),
        "frozen": [{"values": list(g.members), "rule": g.reason.kind.name.lower(), "reason": str(g.reason)}
                   for g in result.frozen],
        "free_groups": result.free_groups,
        "candidates": result.candidates,
        "variables": solved.variables,
        "constraints": solved.constraints,
        "steps_kept": solved.steps_kept,
        "steps_total": solved.steps_total,
        "candidates_dropped": solved.candidates_dropped,
        "model_entries_before": solved.entries_before,
        "model_entries": solved.entries,
        "terms_merged": solved.terms_merged,
        "bound_windows": solved.windows,
        "build_seconds": round(solved.build_seconds, 4),
        "solve_seconds": round(solved.solve_seconds, 4),
        "first_solution_seconds": (None if solved.first_solution_seconds is None
                                   else round(solved.first_solution_seconds, 4)),
        # how much search the run got, the same figure for the same work on any machine (issue 36)
        "search": {"deterministic_units": round(solved.search_units, 3), "workers": result.options.solver_settings()
                   .workers, "deterministic": result.options.deterministic, "time_limit": result.options.time_limit},
        "budgets": {
            "budget_bytes": result.budgets.budget_bytes,
            "interleaved_budget_bytes": result.budgets.interleaved_budget_bytes,
            "support_reserve_bytes": result.budgets.support_reserve_bytes,
        },
    }


def _exchange_fields(result) -> dict:
    """The exact exchange of the input and of the written plan (docs/EXCHANGE.md), and the model's figures (the same
    exact exchange where `model_exchange_exact`, else the optimiser's proxy)."""
    return {
        "exchange_bytes_before": result.exchange_before,
        "exchange_bytes_after": result.exchange_after,
        "exchange_bytes_added": result.exchange_bytes_added,
        "exchange": {"input": exchange_summary(result.input_exchange),
                     "output": exchange_summary(result.output_exchange)},
        "model_exchange_bytes_before": result.model_exchange_before,
        "model_exchange_bytes_after": result.model_exchange_after,
        "model_exchange_bound": result.solve.exchange_bound,
        "model_exchange_exact": result.exact,
    }


def sweep_table(sweep) -> Table:
    """The peak / exchange front, smallest peak first: each point's exact exchange (its plan's, and the model's) and
    what each KiB of peak saved costs in it."""
    end = "to the least exchange" if sweep.complete else "cut short (--points or time)"
    table = Table(title=f"ipuplan sweep ({sweep.scope}): {len(sweep.points)} points, {end}")
    model = "model's exchange" if sweep.model_exchange_exact else "model's exchange (proxy, not the plan's)"
    for name in ("#", "raw peak", "exchange bytes", "exchange added", "exchange per KiB saved", model,
                 "values changed", "proven"):
        table.add_column(name, justify="right")
    for index, point in enumerate(sweep.points, 1):
        per_kib = "-" if point.exchange_per_kib is None else f"{point.exchange_per_kib:,.0f}"
        table.add_row(str(index), f"{point.peak:,}", f"{point.exchange_bytes:,}", f"{point.exchange_added:+,}",
                      per_kib, f"{point.model_exchange_bytes:,}", str(point.changed_values), _yes(point.proven).lower())
    return table


def explore_table(rows) -> Table:
    """The ranked exploration: best optimised peak first, failures last with their reason."""
    table = Table(title="ipuplan explore: ranked by optimised raw peak")
    headers = ("#", "file", "scope", "input peak", "optimised", "reduction", "fits before", "fits after", "status",
               "gap", "time")
    for name in headers:
        table.add_column(name, justify="left" if name in ("file", "scope", "status") else "right")
    for rank, row in enumerate(rows, 1):
        status = row.status + (" (up to date)" if row.skipped else "")
        table.add_row(
            str(rank),
            Path(row.input).name,
            row.scope,
            "-" if row.input_peak is None else f"{row.input_peak:,}",
            "-" if row.optimized_peak is None else f"{row.optimized_peak:,}",
            _percent(row.reduction),
            "-" if row.fits_before is None else _yes(row.fits_before),
            "-" if row.fits_after is None else _yes(row.fits_after),
            status,
            _percent(row.gap),
            f"{row.seconds:.2f} s",
        )
    return table
