"""The commands that read plans and write nothing (`cli.read_commands`): `check` says consistent or names each
mismatch (exit 1), `show` lists the peak and its contributors (and as JSON the plan's own figures), `graph` prints
every step within 80 columns off a terminal, `diff` one line per change."""

from __future__ import annotations

import json

from reference import REFERENCE
from typer.testing import CliRunner

from ipuplan import load_plan, write_plan
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


def test_show_json_carries_the_plans_own_figures():
    result = runner.invoke(app, ["show", str(REFERENCE), "--json", "--top", "3"])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    raw = json.loads(REFERENCE.read_text())
    assert ((shown["raw_peak"], shown["total_peak_step"], shown["peak"])
            == (367_216, raw["total_peak_step"], raw["peak"]))
    assert (shown["fits_budget"], shown["effective_peak_bytes"]) == (raw["fits_budget"], raw["effective_peak_bytes"])
    assert shown["exchange"]["total"] == 699_219_304 and len(shown["contributors"]) == 3


def test_diff_cli(tmp_path, storage_result):
    better = tmp_path / "better.json"
    write_plan(storage_result.plan, better)
    result = CliRunner().invoke(app, ["diff", str(REFERENCE), str(better)])
    assert result.exit_code == 0
    assert len(result.stdout.splitlines()) == 16  # 14 values (no family in storage), the peak, the exchange
