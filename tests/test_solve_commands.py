from __future__ import annotations

import json
import subprocess
import sys

import pytest
from reference import REFERENCE
from typer.testing import CliRunner

from ipuplan import load_plan
from ipuplan.cli import app
from ipuplan.facts.dataflow import dataflow
from ipuplan.report.text import graph_lines

runner = CliRunner()


def test_check_consistent_plan():
    result = runner.invoke(app, ["check", str(REFERENCE)])
    assert result.exit_code == 0
    assert "consistent: 176 values, 116 steps" in result.stdout


def test_check_names_mismatches(tmp_path):
    raw = json.loads(REFERENCE.read_text())
    raw["timeline"]["values"][20]["bytes"] += 1
    raw["timeline"]["steps"][47]["usage"]["interleaved"] -= 32
    raw["total_peak_step"] = 5
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(raw, separators=(",", ":")))
    result = runner.invoke(app, ["check", str(bad)])
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert f"{bad}: value 20 (vit.encoder.layer0.mlp.up.weight): bytes is 30721, expected 30720" in lines
    assert f"{bad}: step 47: usage.interleaved is 286816, expected 286848" in lines
    assert f"{bad}: plan: total_peak_step is 5, expected 47" in lines


def test_show_lists_peak_and_contributors():
    result = runner.invoke(app, ["show", str(REFERENCE)])
    assert result.exit_code == 0
    assert "367,216 B" in result.stdout and "at step 47" in result.stdout
    assert "vit.encoder.layer0.mlp.up.weight" in result.stdout


def test_graph_prints_every_step():
    result = runner.invoke(app, ["graph", str(REFERENCE)])
    assert result.exit_code == 0
    plan = load_plan(REFERENCE)
    lines = list(graph_lines(plan, dataflow(plan)))
    # off a terminal each line is folded within 80 columns, no word lost or cut (issue 21)
    assert max(map(len, result.stdout.splitlines())) <= 80 < max(map(len, lines))
    assert result.stdout.split() == " ".join(lines).split()
    assert lines[11].split()[-3:] == ["51", "->", "136"]
    assert sum(1 for line in lines if line.startswith("ambiguous:")) == 0
    assert lines[27].split()[-3:] == ["144", "->", "145"]  # a copy that crops padded key columns
    assert ("gemm family at step 12: left 64 (from 63), right 136 (from 51), partials 137 read at step 13 (Sum) "
            "into 65") in lines
    assert "element-wise family: Add at step 107; Gelu at step 108: members 40, 125, 126, 127" in lines
    assert ("element-wise family: Add at step 74: members 34, 106, 107, held: Sum at step 73: value 106 written by a "
            "kernel outside the family") in lines


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (REFERENCE.read_text()[:9000], "invalid JSON"),
        ('{"version": 1}', "scope: missing field"),
        (REFERENCE.read_text().replace('"partitions: 36', '"partitions: 36')
         .replace("partitions: 36,", "partitions: -36,", 1), "malformed layout"),
    ],
)
def test_bad_input_is_one_line_exit_2_without_traceback(tmp_path, content, expected):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    process = subprocess.run(
        [sys.executable, "-m", "ipuplan.cli", "check", str(bad)], capture_output=True, text=True, check=False
    )
    assert process.returncode == 2
    assert process.stdout == ""
    assert len(process.stderr.splitlines()) == 1
    assert process.stderr.startswith(f"error: {bad}: ") and expected in process.stderr
    assert "Traceback" not in process.stderr


def test_optimize_writes_a_checked_plan_and_json_summary(tmp_path):
    out = tmp_path / "better.json"
    result = runner.invoke(app, ["optimize", str(REFERENCE), "-o", str(out), "--workers", "1", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["input_raw_peak"] == 367_216
    assert summary["raw_peak"] == summary["bound"] <= 200_000
    assert summary["status"] == "optimal"
    assert runner.invoke(app, ["check", str(out)]).exit_code == 0
    # each stage's seconds, in the order the run took them
    assert list(summary["phase_seconds"]) == ["load", "analyse", "candidates", "problem", "solve", "exact exchange",
                                              "rewrite", "write"]
    # the plan's own name and the freedoms' scope under two names, no bare "scope" that could mean either
    assert (summary["plan_scope"], summary["freedom_scope"], "scope" in summary) == ("finalist-5", "full", False)


def test_optimize_table_and_progress(tmp_path):
    result = runner.invoke(app, ["optimize", str(REFERENCE), "-o", str(tmp_path / "o.json")])
    assert result.exit_code == 0
    assert "raw peak (std + il)" in result.stdout and "optimal" in result.stdout
    assert "objective" in result.stderr and "bound" in result.stderr


def test_optimize_never_overwrites_without_force(tmp_path):
    out = tmp_path / "o.json"
    out.write_text("precious")
    result = runner.invoke(app, ["optimize", str(REFERENCE), "-o", str(out)])
    assert result.exit_code == 2
    assert "already exists" in result.stderr
    assert out.read_text() == "precious"


def test_optimize_infeasible_exit_3_writes_nothing(tmp_path):
    out = tmp_path / "o.json"
    args = ["optimize", str(REFERENCE), "-o", str(out), "--budget", "200000", "--interleaved-budget", "100000",
            "--scope", "kernels"]
    result = runner.invoke(app, args)
    assert result.exit_code == 3
    assert "cannot be met at step" in result.stderr and "lowest raw peak" in result.stderr
    assert not out.exists()


def test_optimize_flags_reach_the_library(tmp_path, monkeypatch):
    seen = {}
    from ipuplan.errors import IpuplanError
    from ipuplan.replan import pipeline as optimizer

    def fake_optimize(plan, options, **kwargs):
        seen.update(dict(options))
        raise IpuplanError("stop here")

    monkeypatch.setattr(optimizer, "optimize", fake_optimize)
    args = ["optimize", str(REFERENCE), "-o", str(tmp_path / "o.json"), "--time-limit", "3.5", "--workers", "1",
            "--seed", "7", "--budget", "500000", "--interleaved-budget", "300000", "--support-reserve", "1000",
            "--solver", "greedy"]
    assert runner.invoke(app, args).exit_code == 2
    assert seen["time_limit"] == 3.5 and seen["workers"] == 1
    assert ((seen["seed"], seen["budget"], seen["interleaved_budget"], seen["support_reserve"])
            == (7, 500000, 300000, 1000))
    assert (seen["scope"].value, seen["solver"].value) == ("full", "greedy")  # full: the default scope


def test_unknown_scope_is_a_clear_error(tmp_path):
    result = runner.invoke(app, ["optimize", str(REFERENCE), "-o", str(tmp_path / "o.json"), "--scope", "everything"])
    assert result.exit_code == 2
    assert "everything" in result.stderr and "storage" in result.stderr


def test_dump_model_writes_the_cp_sat_model(tmp_path):
    model = tmp_path / "model.pbtxt"
    result = runner.invoke(app, ["optimize", str(REFERENCE), "-o", str(tmp_path / "o.json"), "--dump-model",
                                 str(model)])
    assert result.exit_code == 0
    text = model.read_text()
    assert "variables" in text and "objective" in text
    assert "model variables / constraints" in result.stdout


def test_optimize_says_what_it_left_alone_and_why(tmp_path):
    table = runner.invoke(app, ["optimize", str(REFERENCE), "-o", str(tmp_path / "a.json"), "--scope", "storage"])
    assert "left alone (" in table.stdout and "values: read by Gemm" in table.stdout
    as_json = runner.invoke(app, ["optimize", str(REFERENCE), "-o", str(tmp_path / "b.json"), "--json",
                                  "--scope", "kernels"])
    frozen = json.loads(as_json.stdout)["frozen"]
    reasons = {v: entry["reason"] for entry in frozen for v in entry["values"]}
    assert reasons[4].startswith(("may be read by", "involved in an ambiguity"))
    assert 8 not in reasons  # a resident weight the optimiser is free to move


@pytest.mark.parametrize(
    ("change", "extra", "words"),
    [
        (lambda raw: raw.update(budget_bytes=0), [], ("bad.json: budget_bytes:", "(support_reserve_bytes)",
                                                      "(budget_bytes)")),
        (lambda raw: None, ["--budget", "0"], ("error: --budget:", "(support_reserve_bytes)", "(--budget)")),
        (lambda raw: raw.update(interleaved_budget_bytes=10**9), [], ("bad.json: budget_bytes:",
                                                                      "(interleaved_budget_bytes)")),
    ],
)
def test_a_budget_problem_names_the_file_and_field_or_the_option(tmp_path, change, extra, words):
    """Issue 21, item 12: `budget_bytes: 0` was 'support reserve 49,152 exceeds the budget 0', naming nothing."""
    raw = json.loads(REFERENCE.read_text())
    change(raw)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(raw))
    result = runner.invoke(app, ["optimize", str(bad), "-o", str(tmp_path / "o.json"), *extra])
    errors = [line for line in result.stderr.splitlines() if not line.startswith("  ")]  # not the progress lines
    assert result.exit_code == 2 and len(errors) == 1
    assert all(word in errors[0] for word in words), result.stderr


def test_show_json_carries_the_plans_own_figures():
    result = runner.invoke(app, ["show", str(REFERENCE), "--json", "--top", "3"])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    raw = json.loads(REFERENCE.read_text())
    assert ((shown["raw_peak"], shown["total_peak_step"], shown["peak"])
            == (367_216, raw["total_peak_step"], raw["peak"]))
    assert (shown["fits_budget"], shown["effective_peak_bytes"]) == (raw["fits_budget"], raw["effective_peak_bytes"])
    assert shown["exchange"]["total"] == 699_219_304 and len(shown["contributors"]) == 3
