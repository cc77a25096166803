from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run_example(folder: Path, *args: str) -> str:
    """The pipeline example, its temporary folder (where it writes the plan) `folder`: the suite leaves no file in
    the machine's."""
    process = subprocess.run(
        [sys.executable, str(EXAMPLES / "pipeline.py"), *args], capture_output=True, text=True, check=True,
        env={**os.environ, "TMPDIR": str(folder)},
    )
    return process.stdout


def test_pipeline_example_replans_the_reference_plan(tmp_path):
    out = run_example(tmp_path)
    assert "raw peak 367,216 -> 136,712 bytes per tile (optimal" in out
    written = tmp_path / "vit-so400m-finalist-5.replanned.json"
    assert f"wrote {written}" in out and written.exists()


def test_pipeline_example_reports_a_budget_that_cannot_fit(tmp_path):
    out = run_example(tmp_path, "--budget", "180000", "--interleaved-budget", "100000")  # 130,848 less the reserve
    assert "does not fit: the " in out and "cannot be met at step" in out and "136,712 bytes" in out


def test_rank_finalists_example_keeps_the_best_fitting_scope():
    process = subprocess.run(
        [sys.executable, str(EXAMPLES / "rank_finalists.py")], capture_output=True, text=True, check=True
    )
    lines = process.stdout.splitlines()
    assert lines[0] == "1. finalist-5-tight: optimal, raw peak 136,712"  # ties keep the input order
    assert lines[3] == "4. finalist-5-6layers-chip: optimal, raw peak 215,112"  # fits the real chip with scope full
    assert lines[-1] == "keep: finalist-5-tight (136,712 bytes per tile)"
