"""A self-contained HTML report of a plan (inline SVG, no scripts, no network), and a PNG.

The timeline shows standard and interleaved usage per step (scratch included, and also
drawn on its own), the budget lines and the peak step; the anatomy lists what is live at
the peak step, with bytes, the kernel family it belongs to, and whether the optimiser may move
it (and why not); the families table lists each family as one unit with its kernels and members. Optional
sections: why the budgets cannot be met (`explanation_html`), where a best-effort plan exceeds
them (`shortfall_html`), and the peak / exchange trade-off curve (`sweep_html`).
"""

from __future__ import annotations

import html
import io
from dataclasses import dataclass
from itertools import pairwise

from ipuplan.errors import IpuplanError
from ipuplan.facts.check import LiveValue, live_values
from ipuplan.facts.estimate import Estimate
from ipuplan.facts.plan_facts import PlanFacts
from ipuplan.plan.budgets import Budgets
from ipuplan.plan.format import Plan
from ipuplan.plan.outputs import write_atomically
from ipuplan.report.text import FamilyUnit, family_units, unit_of
from ipuplan.space.types import CandidateSpace

WIDTH, HEIGHT, MARGIN = 960, 360, 60
COLOURS = {"standard": "#1f77b4", "interleaved": "#ff7f0e", "total": "#2ca02c", "scratch": "#9467bd",
           "against": "#d62728", "budget": "#555555"}


@dataclass(frozen=True)
class Series:
    label: str
    points: tuple[int, ...]
    colour: str
    dashed: bool = False


def timeline_series(plan: Plan, result: Estimate) -> list[Series]:
    scratch = tuple(s.scratch.standard + s.scratch.interleaved for s in plan.steps)
    total = tuple(a + b for a, b in zip(result.standard, result.interleaved))
    return [
        Series("standard", result.standard, COLOURS["standard"]),
        Series("interleaved", result.interleaved, COLOURS["interleaved"]),
        Series("standard + interleaved", total, COLOURS["total"]),
        Series("scratch", scratch, COLOURS["scratch"]),
    ]


def budget_lines(budgets: Budgets) -> list[tuple[str, int]]:
    return [(limit.name, limit.bytes) for limit in budgets.limits]


def _svg(series: list[Series], budgets: list[tuple[str, int]], peak_step: int, peak: int, steps: int) -> str:
    top = max([max(s.points, default=0) for s in series] + [b for _, b in budgets] + [1]) * 1.05
    span = max(steps - 1, 1)

    def x(step: float) -> float:
        return MARGIN + (WIDTH - 2 * MARGIN) * step / span

    def y(value: float) -> float:
        return HEIGHT - MARGIN + -(HEIGHT - 2 * MARGIN) * value / top

    parts = [(f'<svg id="timeline" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
             f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="per-step usage timeline">'),
             f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>']
    for fraction in (0, 0.25, 0.5, 0.75, 1.0):
        value = top * fraction
        parts.append(f'<line x1="{MARGIN}" x2="{WIDTH - MARGIN}" y1="{y(value):.1f}" y2="{y(value):.1f}" '
                     'stroke="#eee"/>')
        parts.append(f'<text x="{MARGIN - 6}" y="{y(value) + 4:.1f}" font-size="10" text-anchor="end">'
                     f'{value / 1024:,.0f} KiB</text>')
    for label, value in budgets:
        parts.append(f'<line class="budget" x1="{MARGIN}" x2="{WIDTH - MARGIN}" y1="{y(value):.1f}" '
                     f'y2="{y(value):.1f}" stroke="{COLOURS["budget"]}" stroke-dasharray="6 4">'
                     f'<title>{html.escape(label)}: {value:,} B</title></line>')
        parts.append(f'<text x="{WIDTH - MARGIN}" y="{y(value) - 3:.1f}" font-size="10" text-anchor="end" '
                     f'fill="{COLOURS["budget"]}">{html.escape(label)}</text>')
    for item in series:
        points = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(item.points))
        dash = ' stroke-dasharray="3 3"' if item.dashed else ""
        parts.append(f'<polyline class="series" data-label="{html.escape(item.label)}" fill="none" '
                     f'stroke="{item.colour}" stroke-width="1.6"{dash} points="{points}"/>')
    parts.append(f'<line id="peak-marker" x1="{x(peak_step):.1f}" x2="{x(peak_step):.1f}" y1="{MARGIN / 2}" '
                 f'y2="{HEIGHT - MARGIN}" stroke="black" stroke-width="1"/>')
    parts.append(f'<text x="{x(peak_step) + 4:.1f}" y="{MARGIN / 2 + 10}" font-size="11">'
                 f'peak {peak:,} B at step {peak_step}</text>')
    parts.append(f'<text x="{WIDTH / 2}" y="{HEIGHT - 20}" font-size="11" text-anchor="middle">step</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def _legend(series: list[Series]) -> str:
    items = "".join(
        f'<span class="key"><span class="swatch" style="background:{s.colour}"></span>{html.escape(s.label)}</span>'
        for s in series
    )
    return f'<div class="legend">{items}</div>'


def anatomy_rows(facts: PlanFacts, space: CandidateSpace, step_index: int) -> list[LiveValue]:
    """Every value live at the step, largest first, with its bytes and why `space` freezes it (if it does)."""
    return live_values(facts.plan, facts.estimate, step_index, space.reasons())


def against_series(other: Estimate, label: str) -> Series:
    return Series(f"against {label} (std + il)", tuple(a + b for a, b in zip(other.standard, other.interleaved)),
                  COLOURS["against"], True)


def render_html(facts: PlanFacts, space: CandidateSpace, against: Estimate | None = None, against_label: str = "",
                title: str = "", sections: tuple[str, ...] = ()) -> str:
    """The whole report page of `facts.plan` under `facts.budgets` as one string; `space` (the run's, or the
    scope the page is asked for) labels values free or frozen; `against` is overlaid; `sections` (HTML) follow
    the anatomy."""
    plan, result = facts.plan, facts.estimate
    series = timeline_series(plan, result)
    if against is not None:
        series.append(against_series(against, against_label))
    peak_step = result.total_peak_step
    svg = _svg(series, budget_lines(facts.budgets), peak_step, result.raw_peak, len(plan.steps))
    heading = html.escape(title or f"ipuplan report: {plan.scope}")
    units = family_units(facts)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{heading}</title>
<style>
body {{ font-family: sans-serif; margin: 24px; color: #222; }}
table {{ border-collapse: collapse; font-size: 13px; }} td, th {{ padding: 3px 8px; border-bottom: 1px solid #ddd; }}
td.n {{ text-align: right; font-variant-numeric: tabular-nums; }} \
td.free {{ color: #2a7a2a; }} td.frozen {{ color: #777; }}
.legend {{ margin: 6px 0 16px; font-size: 13px; }} .key {{ margin-right: 16px; }}
.swatch {{ display: inline-block; width: 12px; height: 12px; margin-right: 4px; vertical-align: middle; }}
</style></head>
<body>
<h1>{heading}</h1>
{_summary(facts)}
{_comparison(result, against, against_label)}
<h2>Usage per step</h2>
{svg}
{_legend(series)}
{_anatomy(facts, space, units) if plan.steps else ""}
{_families(facts, space, units)}
{"".join(sections)}</body></html>
"""


def _summary(facts: PlanFacts) -> str:
    plan, result = facts.plan, facts.estimate
    return (f"<p id=\"summary\">{len(plan.values)} values, {len(plan.steps)} steps. "
            f"Raw peak <b>{result.raw_peak:,} B</b> "
            f"per tile at\nstep <b id=\"peak-step\">{result.total_peak_step}</b>; "
            f"standard peak {result.peak.standard:,} B "
            f"(with exchange rows), interleaved peak\n{result.peak.interleaved:,} B, effective peak "
            f"{result.effective_peak_bytes:,} B of {facts.budgets.budget_bytes:,} B;\nfits budget: "
            f"<b>{'yes' if result.fits_budget else 'no'}</b>.</p>")


def _comparison(result: Estimate, against: Estimate | None, label: str) -> str:
    if against is None:
        return ""
    return (f"<p id='comparison'>against <b>{html.escape(label)}</b>: raw peak {against.raw_peak:,} B "
            f"at step {against.total_peak_step} ({result.raw_peak - against.raw_peak:+,} B here)</p>")


def _anatomy(facts: PlanFacts, space: CandidateSpace, units: tuple[FamilyUnit, ...]) -> str:
    """The peak step's live values, each with its family and free or frozen (and why) in `space`."""
    step_index = facts.estimate.total_peak_step
    step = facts.plan.steps[step_index]
    rows = anatomy_rows(facts, space, step_index)
    family = unit_of(units)
    body = "\n".join(
        f"<tr><td>{row.value_id}</td><td>{html.escape(row.name)}</td><td>{row.memory_class}</td>"
        f"<td class='n'>{row.bytes:,}</td>"
        f"<td>{html.escape(family[row.value_id].label if row.value_id in family else '')}"
        f"</td><td class='{'free' if row.frozen is None else 'frozen'}'>{html.escape(row.state)}</td></tr>"
        for row in rows
    )
    return (f"<h2>Anatomy of the peak step {step_index}: {html.escape(step.operation)}</h2>\n"
            f"<p>{len(rows)} live values and {step.scratch.standard + step.scratch.interleaved:,} B of scratch; free "
            "values are those the optimiser may re-lay out in scope "
            f"<b id='scope'>{html.escape(space.scope)}</b>.</p>\n"
            "<table id=\"anatomy\"><thead><tr><th>value</th><th>name</th><th>class</th><th>bytes</th><th>family</th>"
            f"<th>optimiser</th></tr></thead>\n<tbody>\n{body}\n</tbody></table>")


def _families(facts: PlanFacts, space: CandidateSpace, units: tuple[FamilyUnit, ...]) -> str:
    """Each kernel family as one unit: its kernels, its members with their bytes, and whether `space` frees it."""
    if not units:
        return ""
    rows = [(unit.label, ", ".join(map(str, unit.members)), sum(facts.estimate.values[m].bytes for m in unit.members),
             unit_state(unit, space)) for unit in units]
    return (f"<h2>Kernel families</h2>\n<p>{len(units)} families, each re-laid out as one unit (its members take "
            f"one split together) where scope {html.escape(space.scope)} frees it.</p>\n"
            + _table("families", ("family", "members", "member bytes", "optimiser"), rows))


def unit_state(unit: FamilyUnit, space: CandidateSpace) -> str:
    """`free as one unit` when `space` has the family as one free group, else why a member is held."""
    if any(group.kind == unit.space_kind and unit.members[0] in group.members for group in space.free):
        return "free as one unit"
    reasons = space.reasons()
    frozen = [reasons[m] for m in unit.members if reasons.get(m) is not None]
    return f"frozen: {frozen[0]}" if frozen else "not re-split as a family in this scope (its members free apart)"


def _table(table_id: str, headers: tuple[str, ...], rows: list[tuple]) -> str:
    """A table whose int cells are right-aligned with thousands separators, and other cells escaped."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "\n".join("<tr>" + "".join(f"<td class='n'>{cell:,}</td>"
                                      if isinstance(cell, int) and not isinstance(cell, bool)
                                      else f"<td>{html.escape(str(cell))}</td>" for cell in row) + "</tr>"
                     for row in rows)
    return f"<table id='{table_id}'><thead><tr>{head}</tr></thead><tbody>\n{body}\n</tbody></table>\n"


def explanation_html(explanation, words: list[str]) -> str:
    """Why the budgets cannot be met: the conflict's rows, the frozen values that hold each, and `words`
    (the same plain words the CLI prints)."""
    steps = [(s.step, s.operation, s.budget, s.budget_bytes, s.needs, s.fixed_bytes, s.scratch,
              f"{s.free_values} (at least {s.free_least_bytes:,} B)") for s in explanation.steps]
    holders = [(s.step, h.value_id, h.name, h.memory_class, h.bytes, h.frozen) for s in explanation.steps
               for h in s.holders]
    items = "".join(f"<li>{html.escape(line.strip())}</li>" for line in words)
    return (f"<h2>Why the budgets cannot be met</h2>\n<p id='conflict-line'>{html.escape(explanation.line)}</p>\n"
            + _table("conflict", ("step", "operation", "budget", "budget bytes", "needs at least", "frozen bytes",
                                  "of which scratch", "free values"), steps)
            + "<h3>Frozen values holding each step</h3>\n"
            + _table("holders", ("step", "value", "name", "class", "bytes", "why frozen"), holders)
            + f"<ul id='explanation'>{items}</ul>\n")


def inserted_html(inserted) -> str:
    """The steps and values scope `program` inserted, which the compiler must honour."""
    rows = [(g.step, g.parameter, g.value, g.reading_step, g.name) for g in inserted]
    return ("<h2>Inserted steps and values (scope program)</h2>\n<p>Each inserted <code>Copy</code> gathers a "
            "parameter stored sharded into the layout its reading step needs; the compiler must honour them.</p>\n"
            + _table("inserted", ("inserted step", "copy of value", "into value", "for step", "name"), rows))


def shortfall_html(shortfall) -> str:
    """Where a plan (a best-effort one) exceeds its budgets."""
    rows = [(s.step, s.budget, s.bytes, s.limit, s.over) for s in shortfall]
    return ("<h2>Where the plan exceeds its budgets</h2>\n"
            + _table("shortfall", ("step", "budget", "bytes", "limit", "over"), rows))


def sweep_html(sweep) -> str:
    """The peak / exchange front as a plot and a table: how much exchange each KiB of memory costs."""
    rows = [(p.peak, p.exchange_bytes, p.exchange_added,
             "-" if p.exchange_per_kib is None else f"{p.exchange_per_kib:,.0f}",
             p.model_exchange_bytes, p.changed_values) for p in sweep.points]
    return (f"<h2>How much exchange does each KiB of memory cost</h2>\n<p>{len(sweep.points)} Pareto points of scope "
            f"{html.escape(sweep.scope)}, walked by the exact exchange (docs/EXCHANGE.md, priced pairwise in the "
            "model): the smallest peak with less exchange than the point before, each the least exchange at its peak"
            f"{'' if sweep.complete else ' (cut short)'}. Exchange bytes are each point's plan's, computed again from "
            f"that plan; the input plan sends {sweep.input_exchange:,} B.</p>\n" + _front_svg(sweep.points)
            + _table("front", ("raw peak", "exchange bytes", "exchange added", "exchange per KiB saved",
                               "model's exchange", "values changed"), rows))


def _front_svg(points) -> str:
    """Exact exchange bytes against raw peak, as a staircase through the front's points."""
    if not points:
        return ""
    low, high = min(p.peak for p in points), max(p.peak for p in points)
    least, most = min(p.exchange_bytes for p in points), max(p.exchange_bytes for p in points)

    def x(peak: float) -> float:
        return MARGIN + (WIDTH - 2 * MARGIN) * (peak - low) / max(high - low, 1)

    def y(exchange: float) -> float:
        return HEIGHT - MARGIN - (HEIGHT - 2 * MARGIN) * (exchange - least) / max(most - least, 1)

    stairs = " ".join(f"{x(b.peak):.1f},{y(a.exchange_bytes):.1f} {x(b.peak):.1f},{y(b.exchange_bytes):.1f}"
                      for a, b in pairwise(points))
    dots = "".join(f'<circle class="point" cx="{x(p.peak):.1f}" cy="{y(p.exchange_bytes):.1f}" r="3" '
                   f'fill="{COLOURS["total"]}"><title>peak {p.peak:,} B, exchange {p.exchange_bytes:,} B</title>'
                   '</circle>'
                   for p in points)
    return (f'<svg id="front" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
            f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="exchange bytes against raw peak">'
            f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>'
            f'<polyline fill="none" stroke="{COLOURS["budget"]}" points="{x(points[0].peak):.1f},'
            f'{y(points[0].exchange_bytes):.1f} {stairs}"/>{dots}'
            f'<text x="{WIDTH / 2}" y="{HEIGHT - 20}" font-size="11" text-anchor="middle">raw peak per tile: '
            f'{low / 1024:,.1f} KiB to {high / 1024:,.1f} KiB</text>'
            f'<text x="14" y="{HEIGHT / 2}" font-size="11" transform="rotate(-90 14 {HEIGHT / 2})" '
            f'text-anchor="middle">exchange bytes: {least:,} to {most:,}</text></svg>\n')


def require_matplotlib() -> None:
    """Raise before any work when the PNG cannot be drawn."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise IpuplanError("--png needs matplotlib: pip install 'ipuplan[plot]'") from None


def render_png(facts: PlanFacts, path: str, against: Estimate | None = None, against_label: str = "") -> None:
    """The timeline of `facts.plan` as a static image (needs matplotlib: pip install 'ipuplan[plot]'), written
    atomically."""
    require_matplotlib()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plan, result = facts.plan, facts.estimate
    series = timeline_series(plan, result)
    if against is not None:
        series.append(against_series(against, against_label))
    figure, axis = plt.subplots(figsize=(10, 4))
    for item in series:
        axis.plot(item.points, color=item.colour, label=item.label, linestyle="--" if item.dashed else "-",
                  linewidth=1.2)
    for label, value in budget_lines(facts.budgets):
        axis.axhline(value, color=COLOURS["budget"], linestyle=":", linewidth=0.8)
        axis.annotate(label, (len(plan.steps) - 1, value), fontsize=7, ha="right", va="bottom")
    axis.axvline(result.total_peak_step, color="black", linewidth=0.8)
    axis.annotate(f"peak {result.raw_peak:,} B at step {result.total_peak_step}",
                  (result.total_peak_step, result.raw_peak), fontsize=8, xytext=(4, 4), textcoords="offset points")
    axis.set_xlabel("step")
    axis.set_ylabel("bytes per tile")
    axis.set_title(f"{plan.scope}: usage per step")
    axis.legend(fontsize=7, loc="upper left")
    figure.tight_layout()
    image = io.BytesIO()
    figure.savefig(image, format="png", dpi=110)
    plt.close(figure)
    write_atomically(path, image.getvalue())
