"""The workbench's commands (`cli.workbench_commands`): `synth` writes a derived plan (refused in one line when too
large), `explore` runs a batch (exit 4 when some plan failed, `--json` one object), `report` writes the HTML page
(and a PNG), marking free what the scope it names may move."""

from __future__ import annotations

import json

import pytest
from reference import REFERENCE, anatomy_marks, expected_marks
from typer.testing import CliRunner

from ipuplan import load_plan, write_plan
from ipuplan.cli import app
from ipuplan.facts.check import check
from ipuplan.replan.pipeline import optimize

runner = CliRunner()


def test_synth_cli(tmp_path):
    out = tmp_path / "deep.json"
    result = runner.invoke(app, ["synth", str(REFERENCE), "-o", str(out), "--layers", "4", "--budget-factor", "2"])
    assert result.exit_code == 0, result.output
    assert "200 values, 116 steps" in result.stdout
    assert check(load_plan(out)) == []


def test_synth_cli_refuses_a_plan_too_large_in_one_line(tmp_path):
    out = tmp_path / "huge.json"
    result = runner.invoke(app, ["synth", str(REFERENCE), "-o", str(out), "--unroll", "6000"])
    assert result.exit_code == 2 and not out.exists()
    assert result.stderr.strip().splitlines()[-1].endswith("6000 unrolled copies would make a plan of "
                                                           "1,056,000 values; synth makes at most 1,000,000")


def test_explore_cli(inputs, tmp_path):
    result = runner.invoke(app, ["explore", str(inputs), "-o", str(tmp_path / "out"), "--jobs", "2"])
    assert result.exit_code == 4  # broken.json failed; the others were written
    assert "finalist-5-6layers" in result.stdout and "invalid JSON" in result.stdout
    good = runner.invoke(app, ["explore", str(inputs / "a.json"), "-o", str(tmp_path / "out2"), "--json"])
    assert good.exit_code == 0
    summary = json.loads(good.stdout)  # one object, whatever happens
    assert summary["status"] == "ok" and summary["rows"][0]["status"] == "optimal"


def test_report_cli_with_against_and_png(tmp_path, reference_plan):
    better = tmp_path / "better.json"
    write_plan(optimize(reference_plan, workers=1, time_limit=5, scope="storage").plan, better)
    page, png = tmp_path / "r.html", tmp_path / "r.png"
    result = runner.invoke(app, ["report", str(REFERENCE), "--against", str(better), "-o", str(page), "--png",
                                 str(png)])
    assert result.exit_code == 0, result.output
    text = page.read_text()
    assert "against" in text and "176,740 B" in text and text.count('class="series"') == 5
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    again = runner.invoke(app, ["report", str(REFERENCE), "-o", str(page)])
    assert again.exit_code == 2 and "--force" in again.stderr


@pytest.mark.parametrize(("scope", "free"), [("storage", 9), ("kernels", 17), ("full", 43)])
def test_report_command_marks_the_scope_it_names(tmp_path, facts, spaces, scope, free):
    page = tmp_path / "r.html"
    assert runner.invoke(app, ["report", str(REFERENCE), "-o", str(page), "--scope", scope]).exit_code == 0
    text = page.read_text()
    step, marks = anatomy_marks(text)
    assert step == 47 and marks == expected_marks(facts, spaces[scope], 47)
    assert list(marks.values()).count("free") == free and f"scope <b id='scope'>{scope}</b>" in text
