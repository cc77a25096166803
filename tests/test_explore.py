from __future__ import annotations

import csv
import json
import shutil

import pytest
from reference import MODELS, REFERENCE
from typer.testing import CliRunner

from ipuplan import load_plan
from ipuplan.cli import app
from ipuplan.errors import PlanError
from ipuplan.facts.check import check
from ipuplan.workbench.explore import ExecutorMissing, explore, job_layout

runner = CliRunner()


@pytest.fixture()
def inputs(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    shutil.copy(REFERENCE, folder / "a.json")
    shutil.copy(MODELS / "vit-so400m-6layers.json", folder / "b.json")
    (folder / "broken.json").write_text(REFERENCE.read_text()[:3000])
    return folder


def test_explore_ranks_writes_and_reports_failures(inputs, tmp_path):
    out = tmp_path / "out"
    rows = explore([inputs], out, time_limit=5)
    assert [r.scope for r in rows] == ["finalist-5", "finalist-5-6layers", "broken"]
    assert [r.status for r in rows] == ["optimal", "optimal", "error"]
    assert "invalid JSON" in rows[2].error
    assert rows[0].optimized_peak < rows[0].input_peak
    for row in rows[:2]:
        assert check(load_plan(row.output)) == []
    summary = json.loads((out / "summary.json").read_text())
    assert [r["rank"] for r in summary["rows"]] == [1, 2, 3]
    with (out / "summary.csv").open() as handle:
        table = list(csv.DictReader(handle))
    assert table[0]["scope"] == "finalist-5" and table[2]["status"] == "error"


def test_up_to_date_outputs_are_skipped_until_forced_or_changed(inputs, tmp_path):
    out = tmp_path / "out"
    explore([inputs / "a.json"], out, time_limit=5)
    again = explore([inputs / "a.json"], out, time_limit=5)
    assert again[0].skipped and again[0].status == "optimal"
    assert not explore([inputs / "a.json"], out, time_limit=5, force=True)[0].skipped
    assert not explore([inputs / "a.json"], out, time_limit=6)[0].skipped  # other settings
    (inputs / "a.json").write_text(REFERENCE.read_text().replace('"finalist-5"', '"finalist-5b"'))
    changed = explore([inputs / "a.json"], out, time_limit=6)[0]
    assert not changed.skipped and changed.scope == "finalist-5b"


def test_infeasible_plan_is_a_row_not_a_stop(inputs, tmp_path):
    rows = explore([inputs / "a.json", inputs / "b.json"], tmp_path / "out", budget=120_000,
                   interleaved_budget=60_000, time_limit=5)
    assert {r.status for r in rows} == {"infeasible"}
    assert all("cannot be met at step" in r.error and r.input_peak for r in rows)


def test_two_jobs_give_the_same_rows(inputs, tmp_path):
    one = explore([inputs], tmp_path / "one", jobs=1, time_limit=5)
    two = explore([inputs], tmp_path / "two", jobs=2, time_limit=5)
    assert [(r.scope, r.optimized_peak, r.status) for r in one] == [(r.scope, r.optimized_peak, r.status) for r in two]


def test_jobs_respect_cores():
    assert job_layout(4, 2) == (2, 1)
    assert job_layout(1, 8) == (1, 8)


def test_refuses_to_write_over_inputs(inputs):
    with pytest.raises(PlanError, match="outputs would overwrite"):
        explore([inputs], inputs)


def test_missing_ray_says_how_to_install(inputs, tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_ray(name, *args, **kwargs):
        if name == "ray":
            raise ImportError("no ray")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    with pytest.raises(ExecutorMissing, match=r"pip install 'ipuplan\[ray\]'"):
        explore([inputs / "a.json"], tmp_path / "out", executor="ray")


def test_ray_executor_on_a_local_instance(inputs, tmp_path):
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        rows = explore([inputs], tmp_path / "out", executor="ray", time_limit=5)
    finally:
        ray.shutdown()
    assert [r.status for r in rows] == ["optimal", "optimal", "error"]
    assert check(load_plan(rows[0].output)) == []


def test_explore_cli(inputs, tmp_path):
    result = runner.invoke(app, ["explore", str(inputs), "-o", str(tmp_path / "out"), "--jobs", "2"])
    assert result.exit_code == 4  # broken.json failed; the others were written
    assert "finalist-5-6layers" in result.stdout and "invalid JSON" in result.stdout
    good = runner.invoke(app, ["explore", str(inputs / "a.json"), "-o", str(tmp_path / "out2"), "--json"])
    assert good.exit_code == 0
    summary = json.loads(good.stdout)  # one object, whatever happens
    assert summary["status"] == "ok" and summary["rows"][0]["status"] == "optimal"
