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
