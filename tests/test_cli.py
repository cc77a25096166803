from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from ipuplan.cli import app
from reference import REFERENCE

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
    lines = result.stdout.splitlines()
    assert lines[11].split()[-3:] == ["51", "->", "136"]
    assert sum(1 for line in lines if line.startswith("ambiguous:")) == 2


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (REFERENCE.read_text()[:9000], "invalid JSON"),
        ('{"version": 1}', "scope: missing field"),
        (REFERENCE.read_text().replace('"partitions: 36', '"partitions: 36').replace("partitions: 36,", "partitions: -36,", 1), "malformed layout"),
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
