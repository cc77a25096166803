"""The sweep (`replan.sweep`): its first point is the optimiser's own solve, so a plan whose plain front model finds
nothing in the time limit still has one (issue 21, item 13: a 10,032-value plan gave none); a sweep that finds no
point says so as a time limit, not as a proof."""

from __future__ import annotations

import json

from reference import MODELS, REFERENCE
from typer.testing import CliRunner

from ipuplan import load_plan
from ipuplan.cli import app
from ipuplan.replan.options import OptimizeOptions
from ipuplan.replan.pipeline import prepare
from ipuplan.replan.sweep import sweep
from ipuplan.solvers import pareto_front

UNROLL3 = MODELS / "vit-so400m-unroll3.json"


def test_the_first_point_is_found_where_the_plain_front_model_finds_nothing():
    plan = load_plan(UNROLL3)
    options = OptimizeOptions(workers=1, time_limit=0.1)
    prepared = prepare(plan, options)
    plain, complete = pareto_front(prepared.problem, options.solver_settings(), 1)
    assert plain == [] and not complete  # what the sweep walked alone: nothing in 0.1 s
    front = sweep(plan, options, max_points=1)
    assert len(front.points) == 1 and front.points[0].peak < front.input_peak
    point = front.points[0]
    assert point.exchange_bytes == point.model_exchange_bytes  # its exact exchange, as every point's


def test_no_point_is_a_time_limit_in_json_not_a_proof(tmp_path, monkeypatch):
    import ipuplan.replan.sweep as module

    monkeypatch.setattr(module, "first_point", lambda *args: None)
    monkeypatch.setattr(module, "pareto_front", lambda *args, **kwargs: ([], False))
    result = CliRunner().invoke(app, ["sweep", str(REFERENCE), "--workers", "1", "--json"])
    assert result.exit_code == 3
    failure = json.loads(result.stdout)
    assert failure["status"] == "no_solution" and "not a proof" in failure["error"]


def test_the_front_spans_both_ends_its_peaks_rise_and_its_exchange_falls(reference_plan):
    """Issue 34: a handful of points from the smallest peak (optimize's) to the least exchange, each significant: its
    peaks rise and its exact exchange falls, strictly, so that each KiB's price is defined. With one worker every
    solve stops at its deterministic units, so the points do not hang on the machine's load."""
    front = sweep(reference_plan, workers=1, scope="kernels", max_points=5)
    peaks, exact = [p.peak for p in front.points], [p.exchange_bytes for p in front.points]
    assert len(peaks) == 5 and front.complete, front.points
    assert peaks == sorted(set(peaks)) and exact == sorted(set(exact), reverse=True)
    assert peaks[0] == 159_076 and peaks[-1] > 2 * peaks[0]  # the peak optimum, and the least exchange far above it
    assert front.points[0].exchange_per_kib is None
    assert all(p.exchange_per_kib is not None and p.exchange_per_kib > 0 for p in front.points[1:])
    assert all(p.exchange_bytes == p.model_exchange_bytes for p in front.points)


def test_a_point_is_kept_only_when_it_sends_a_share_less_or_rises_a_granule():
    """`--min-step` (a share of the exchange) or a standard granule of peak: the old walk's 6-byte steps are gone."""
    from ipuplan.replan.sweep import PEAK_STEP, significant
    from ipuplan.solvers import FrontPoint

    def point(peak, sent):
        return FrontPoint((), peak, sent, 0, True, 0.0)

    steps = [point(100_000 + 6 * k, 1_000_000 - k) for k in range(200)]  # what the old walk printed
    assert [p.peak for p in significant(steps, 0.01)] == [100_000]
    spread = [point(100_000 + PEAK_STEP * k, 1_000_000 - k) for k in range(5)]
    assert significant(spread, 0.01) == spread
    assert [p.peak for p in significant(spread, 0.01, peak_step=2 * PEAK_STEP)] == [100_000, 100_000 + 2 * PEAK_STEP,
                                                                                  100_000 + 4 * PEAK_STEP]


def test_a_sweep_without_the_exact_exchange_walks_by_the_proxy(reference_plan):
    front = sweep(reference_plan, workers=1, scope="kernels", max_points=3, exact_exchange="never")
    assert front.points and front.points[0].model_exchange_bytes != front.points[0].exchange_bytes  # the proxy's


def test_a_sweep_in_scope_program_gathers_and_each_point_is_its_written_plans(reference_plan):
    """Scope program through the sweep: its first point is the optimiser's (113,080 with 14 copies inserted), each
    point's model exchange is its written plan's, copies' moves included."""
    front = sweep(reference_plan, workers=1, scope="program", max_points=2)
    assert front.points[0].peak == 113_080 and len(front.points) == 2
    assert all(p.exchange_bytes == p.model_exchange_bytes for p in front.points)


def test_a_proxy_front_says_its_model_figures_are_not_the_plans(reference_plan):
    from ipuplan.report.text import sweep_table

    proxy = sweep(reference_plan, workers=1, scope="storage", max_points=1, exact_exchange="never")
    exact = sweep(reference_plan, workers=1, scope="storage", max_points=1)
    assert (proxy.model_exchange_exact, exact.model_exchange_exact) == (False, True)
    assert proxy.summary()["model_exchange_exact"] is False
    assert "proxy, not the plan's" in [c.header for c in sweep_table(proxy).columns][5]
    assert exact.points[0].model_exchange_bytes == exact.points[0].exchange_bytes
