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


SETTLED = 120
"""A per-point time limit far beyond what the reference plan's first two points take to prove (on one worker: some
0.5 s for the walk's solve, 2 s for the exact one; 4 s under two busy loops on two cores): each solve ends by its
proof, so what comes back is the same on every run and under any load. (With one worker CP-SAT stops at its
deterministic limit, but also at a wall limit of as many seconds, and some shares of the limit are what the clock
leaves: a limit the solves need up to, such as 1 s, gave 8 points on an idle machine, 3 or 1 on a busy one.) The
solves end early, so the test takes the seconds of the proofs, not of the limit."""


def test_the_exact_front_keeps_only_points_no_smaller_peak_beats(reference_plan):
    """The walk repeats peaks and an exact solve may land below the peak it was given: the front's peaks rise and its
    exact exchange falls, strictly, so that each KiB's price is defined (it divided by zero on equal peaks). Two points
    settled by their proofs (`SETTLED`): the count does not hang on the machine's load."""
    front = sweep(reference_plan, workers=1, scope="kernels", time_limit=SETTLED, max_points=2)
    peaks, exact = [p.peak for p in front.points], [p.exchange_bytes for p in front.points]
    assert len(peaks) == 2, front.points
    assert peaks == sorted(set(peaks)) and exact == sorted(set(exact), reverse=True)
    assert front.points[0].exchange_per_kib is None
    assert all(p.exchange_per_kib is not None and p.exchange_per_kib > 0 for p in front.points[1:])


def test_a_sweep_without_the_exact_exchange_walks_by_the_proxy(reference_plan):
    front = sweep(reference_plan, workers=1, scope="kernels", max_points=3, exact_exchange="never")
    assert front.points and front.points[0].model_exchange_bytes != front.points[0].exchange_bytes  # the proxy's


def test_a_sweep_in_scope_program_gathers_and_each_point_is_its_written_plans(reference_plan):
    """Scope program through the sweep: its first point is the optimiser's (113,080 with 14 copies inserted), each
    point's model exchange is its written plan's, copies' moves included (`SETTLED`: proofs, not the clock)."""
    front = sweep(reference_plan, workers=1, scope="program", time_limit=SETTLED, max_points=2)
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
