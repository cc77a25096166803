"""Never lose work, never mislead: output paths, writes that fail or are killed, unknown inputs kept verbatim or
refused, explore integrity."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time

import pytest
from reference import PYTHON, REFERENCE, entries, one_line_error, run, with_value, without_module

from ipuplan import load_plan, write_plan
from ipuplan.errors import OutputError
from ipuplan.facts.check import check
from ipuplan.plan.outputs import write_atomically
from ipuplan.replan.pipeline import optimize
from ipuplan.space.types import Freeze


@pytest.mark.parametrize(
    ("output", "words"),
    [
        ("missing/out.json", ("missing", "does not exist")),
        ("/proc/x.json", ("/proc", "cannot write")),
        ("", ("output path is empty",)),
    ],
)
def test_bad_output_path_is_refused_before_any_work(tmp_path, output, words):
    target = output if output.startswith("/") or not output else str(tmp_path / output)
    code, stdout, stderr = run("optimize", str(REFERENCE), "-o", target)
    assert code == 2 and stdout == ""
    one_line_error(stderr, *words)
    assert entries(tmp_path) == set()


def test_a_directory_is_no_output_even_with_force(tmp_path):
    code, _, stderr = run("optimize", str(REFERENCE), "-o", str(tmp_path), "--force")
    assert code == 2
    one_line_error(stderr, str(tmp_path), "is a directory")
    assert entries(tmp_path) == set()


def test_an_unknown_layout_order_is_kept_verbatim_and_frozen(reference_plan):
    layout = reference_plan.values[84].layout.replace("order: RowMajor", "order: SpiralMajor")
    plan = with_value(reference_plan, 84, layout=layout)
    result = optimize(plan, workers=1, time_limit=5)
    assert result.plan.values[84].layout == layout
    reason = next(g.reason for g in result.frozen if 84 in g.members)
    assert reason.kind is Freeze.UNKNOWN_LAYOUT and "SpiralMajor" in str(reason)
    assert check(result.plan) == []


QKV_WEIGHTS = (8, 9, 51)
"""Layer 0's and layer 1's qkv weights and their body argument: one layout group, which `check` requires to share
one layout (a plan changing one of them alone is malformed, refused)."""


def with_group_layout(plan, members, layout):
    for member in members:
        plan = with_value(plan, member, layout=layout)
    return plan


def test_an_unknown_padding_is_kept_verbatim_and_frozen(reference_plan):
    layout = reference_plan.values[8].layout.replace("padding: Zero", "padding: Mirror", 1)
    mutated = with_group_layout(reference_plan, QKV_WEIGHTS, layout)
    result = optimize(mutated, workers=1, time_limit=5, scope="storage")
    assert all(result.plan.values[m].layout == layout for m in QKV_WEIGHTS)
    assert next(g.reason for g in result.frozen if 8 in g.members).kind is Freeze.UNKNOWN_LAYOUT


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda raw: raw["timeline"]["steps"][3]["live"].append(raw["timeline"]["steps"][3]["live"][0]),
         ("timeline.steps[3].live", "listed twice")),
        (lambda raw: raw.update(version=2), ("version", "unsupported format version 2")),
    ],
)
def test_duplicate_live_ids_and_unknown_versions_are_refused(tmp_path, change, words):
    raw = json.loads(REFERENCE.read_text())
    change(raw)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(raw))
    for command in (["check", str(bad)], ["optimize", str(bad), "-o", str(tmp_path / "o.json")]):
        code, _, stderr = run(*command)
        assert code == 2
        one_line_error(stderr, str(bad), *words)
    assert entries(tmp_path) == {"bad.json"}


def test_phases_are_reported_in_order_before_the_work():
    process = subprocess.run([*PYTHON, "optimize", str(REFERENCE), "-o", "/dev/null", "--force", "--workers", "1"],
                             capture_output=True, text=True, check=False)
    phases = [line.split()[0] for line in process.stderr.splitlines() if line.startswith("  ")]
    assert phases[:5] == ["load", "analyse", "candidates", "problem", "solve"]


def test_a_kill_in_the_middle_of_a_write_leaves_no_file(tmp_path):
    target = tmp_path / "plan.json"
    writer = ("from ipuplan.plan.outputs import write_atomically; data = b'x' * 400_000_000; print('go', flush=True); "
              f"write_atomically({str(target)!r}, data)")
    process = subprocess.Popen([sys.executable, "-c", writer], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline() == "go\n"
    time.sleep(0.05)
    process.kill()
    process.wait()
    assert entries(tmp_path) in (set(), {"plan.json"})  # nothing, or the whole file: never a part, never a temp
    if target.exists():
        assert target.stat().st_size == 400_000_000


def test_a_failed_write_keeps_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "plan.json"
    target.write_text("old")

    def broken(descriptor, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", broken)
    with pytest.raises(OutputError, match=f"{target}: cannot write: No space left on device"):
        write_atomically(target, "new")
    assert target.read_text() == "old" and entries(tmp_path) == {"plan.json"}


def test_written_files_get_the_usual_permissions(tmp_path):
    write_atomically(tmp_path / "a.json", "{}")
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "a.json").stat().st_mode & 0o777 == 0o666 & ~umask


def test_explore_checks_each_output_before_skipping_it(tmp_path):
    folder = tmp_path / "plans"
    folder.mkdir()
    write_plan(load_plan(REFERENCE), folder / "a.json")
    out = tmp_path / "out"
    assert run("explore", str(folder), "-o", str(out), "--workers", "1")[0] == 0
    (out / "a.json").write_text("junk")
    code, stdout, _ = run("explore", str(folder), "-o", str(out), "--workers", "1")
    assert code == 0 and "up to date" not in stdout and "a.json" in stdout
    assert check(load_plan(out / "a.json")) == []
    code, stdout, _ = run("explore", str(folder), "-o", str(out), "--workers", "1")
    assert "up to date" in stdout
    stored = json.loads((out / "summary.json").read_text())["rows"][0]
    assert stored["output_sha256"] == hashlib.sha256((out / "a.json").read_bytes()).hexdigest()


def test_report_png_without_matplotlib_writes_nothing(tmp_path, monkeypatch):
    without_module(monkeypatch, "matplotlib")
    code, _, stderr = run("report", str(REFERENCE), "-o", str(tmp_path / "r.html"), "--png", str(tmp_path / "t.png"))
    assert code == 2
    one_line_error(stderr, "ipuplan[plot]")
    assert entries(tmp_path) == set()


def test_an_order_without_its_block_fields_is_no_crash(reference_plan):
    # found by the fuzz: `BlockMajor(Matrix { column_block: 16 })` lacks the row_block a re-split rewrites
    for members in (QKV_WEIGHTS, (146,)):
        layout = reference_plan.values[members[0]].layout
        start = layout.index("row_block")
        damaged = layout[:start] + layout[layout.index("column_block"):]
        result = optimize(with_group_layout(reference_plan, members, damaged), workers=1, time_limit=5)
        assert check(result.plan) == [] and result.after.raw_peak <= result.before.raw_peak
