"""Issue 21, "never lose work, never mislead, round two": each case the issue found, kept from coming back.

Outputs are checked before any work (none may be an input or another output), a failed write exits 2 naming the
file with nothing left, explore turns any plan's failure into a row, `--json` prints one object whatever happens,
and the budgets are never said to be met, or unmeetable, when they were not proven so. The cases of the command's own
machinery (one-line errors, interrupts and signals, progress, tables) are in test_common.py, test_signals.py and
test_program.py; benchmarks/battery.py runs the signal cases at many moments of every command.
"""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
import time

import pytest
from reference import PYTHON, REFERENCE, error_line, run, snapshot

from ipuplan.workbench import explore as explore_module


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--dump-model", "{plan}"], ("--dump-model", "is an input")),
        (["--dump-model", "{old}"], ("--dump-model", "already exists", "--force")),
        (["--dump-model", "{folder}/missing/m.pbtxt"], ("--dump-model", "does not exist")),
        (["--dump-model", "{folder}"], ("--dump-model", "is a directory")),
        (["--report", "{out}"], ("named by both -o and --report",)),
        (["--report", "{plan}"], ("--report", "is an input")),
        (["--dump-model", "{folder}/r.html", "--report", "{folder}/./r.html"], ("named by both --report and --dump",)),
        (["--pin-file", "{folder}/missing.json"], ("cannot read the pin file",)),
        (["--solver", "greedy", "--dump-model", "{folder}/m.pbtxt"], ("only the cpsat solver",)),
    ],
)
def test_every_output_is_checked_before_any_work(plan, extra, words):
    """Items 1 and 2: --dump-model replaced the input, overwrote files, or wrote nothing with exit 0; two
    outputs of one run could be one file (the plan replaced by the report)."""
    folder = plan.parent
    (folder / "old.json").write_text("old")
    before = snapshot(folder)
    names = {"plan": plan, "old": folder / "old.json", "folder": folder, "out": folder / "o.json"}
    arguments = [word.format(**names) for word in extra]
    code, stdout, stderr = run("optimize", str(plan), "-o", str(folder / "o.json"), *arguments)
    line = error_line(stderr)
    assert code == 2 and stdout == "" and all(word in line for word in words), line
    assert "load" not in stderr  # refused before the plan was read
    assert snapshot(folder) == before


def test_report_and_png_are_two_files(plan):
    code, _, stderr = run("report", str(plan), "-o", str(plan.parent / "r.html"), "--png", str(plan.parent / "r.html"))
    assert code == 2 and "named by both -o and --png" in error_line(stderr)
    assert snapshot(plan.parent) == {"plan.json": REFERENCE.read_bytes()}


def test_explore_into_an_input_file_is_refused(plan):
    code, _, stderr = run("explore", str(plan), "-o", str(plan), "--json")
    assert code == 2 and "not a directory" in error_line(stderr)
    assert snapshot(plan.parent) == {"plan.json": REFERENCE.read_bytes()}


def test_the_dump_is_written_whole_beside_the_plan(plan):
    dump = plan.parent / "model.pbtxt"
    code, _, _ = run("optimize", str(plan), "-o", str(plan.parent / "o.json"), "--dump-model", str(dump),
                     "--workers", "1")
    assert code == 0 and dump.read_text().startswith("variables {") and "objective" in dump.read_text()
    assert sorted(snapshot(plan.parent)) == ["model.pbtxt", "o.json", "plan.json"]


@pytest.mark.parametrize(("what", "limit"), [("-o", 150_000), ("--dump-model", 60_000)])
def test_a_write_stopped_by_the_file_size_limit_names_the_file_and_leaves_nothing(plan, what, limit):
    """Item 3: `ulimit -f` (or a full disk) was 'internal error: OSError', exit 70, the file not named; the dump,
    which the solver writes, was left truncated with exit 0. The plan is 165 kB; the dump (109 kB) is checked
    whole before anything is written."""
    folder = plan.parent
    outputs = {"-o": folder / "o.json", "--dump-model": folder / "m.pbtxt"}
    arguments = [word for option, path in outputs.items() for word in (option, str(path))]

    def limited():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    process = subprocess.run([*PYTHON, "optimize", str(plan), *arguments, "--workers", "1", "--json"],
                             capture_output=True, text=True, preexec_fn=limited, check=False)
    line = error_line(process.stderr)
    assert process.returncode == 2 and line.startswith(f"error: {outputs[what]}: cannot write: File too large"), line
    assert json.loads(process.stdout)["status"] == "error"  # one object
    assert snapshot(folder) == {"plan.json": REFERENCE.read_bytes()}


def test_greedy_over_the_budgets_writes_nothing_and_says_it_proves_nothing(plan):
    """Item 10: the greedy baseline wrote the plan without --best-effort and said 'no solution within the time
    limit' though it had found one in 0.03 s."""
    code, stdout, stderr = run("optimize", str(plan), "-o", str(plan.parent / "o.json"), "--solver", "greedy",
                               "--budget", "120000", "--interleaved-budget", "60000", "--json")
    summary = json.loads(stdout)
    assert code == 3 and summary["status"] == "infeasible" and "greedy" in summary["error"]
    assert "time limit" not in error_line(stderr) and "nothing written" in error_line(stderr)
    assert snapshot(plan.parent) == {"plan.json": REFERENCE.read_bytes()}


def test_a_sweep_without_a_point_says_so(plan, monkeypatch):
    """Item 13: a sweep that found no point in time printed an empty table, exit 0."""
    from ipuplan.replan import sweep as sweep_module

    real = sweep_module.sweep

    def no_point(*args, **kwargs):
        found = real(*args, **kwargs)
        return type(found)(**{**vars(found), "points": (), "complete": False})

    monkeypatch.setattr(sweep_module, "sweep", no_point)
    code, stdout, stderr = run("sweep", str(plan), "--json", "--points", "1", "--workers", "1")
    assert code == 3 and "no point of the front was found within --time-limit" in error_line(stderr)
    assert json.loads(stdout)["status"] == "no_solution"  # a time limit, not a proof


def test_an_internal_error_in_one_plan_is_its_row(plan, tmp_path, monkeypatch):
    """Item 5: one plan's internal error ended the whole batch (exit 70, no summary)."""
    other = plan.parent / "other.json"
    shutil.copy(REFERENCE, other)
    real = explore_module.optimize

    def fails_on_other(loaded, options):
        if loaded.model == "other":
            raise ZeroDivisionError("a bug")
        return real(loaded, options)

    raw = json.loads(other.read_text())
    other.write_text(json.dumps({**raw, "model": "other"}))
    monkeypatch.setattr(explore_module, "optimize", fails_on_other)
    code, stdout, _ = run("explore", str(plan), str(other), "-o", str(tmp_path / "out"), "--json", "--workers", "1")
    summary = json.loads(stdout)
    assert code == 4 and summary["status"] == "some_failed"
    assert [row["status"] for row in summary["rows"]] == ["optimal", "error"]
    assert summary["rows"][1]["error"] == "internal error: ZeroDivisionError: a bug"
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["rows"][1]["status"] == "error"


def test_an_unreachable_ray_cluster_is_refused_at_once(plan, tmp_path):
    """Item 14: Ray retried an unreachable address for ever (600 s and on)."""
    pytest.importorskip("ray")
    started = time.perf_counter()
    code, stdout, stderr = run("explore", str(plan), "-o", str(tmp_path / "out"), "--executor", "ray",
                               "--address", "127.0.0.1:1", "--json")
    assert code == 2 and "cannot reach the Ray cluster at 127.0.0.1:1" in error_line(stderr)
    assert json.loads(stdout)["status"] == "error" and time.perf_counter() - started < 30


def test_unknown_keys_inside_peak_usage_and_scratch_are_kept(plan):
    """Item 9: unknown keys inside `peak` and a step's `usage` were dropped from the output."""
    raw = json.loads(plan.read_text())
    raw["peak"]["compiler_note"] = "kept"
    for step in raw["timeline"]["steps"]:
        step["usage"]["future"] = 1
        step["scratch"]["future"] = 2
    plan.write_text(json.dumps(raw, separators=(",", ":")))
    out = plan.parent / "o.json"
    assert run("optimize", str(plan), "-o", str(out), "--workers", "1", "--json")[0] == 0
    written = json.loads(out.read_text())
    assert written["peak"]["compiler_note"] == "kept"
    assert {(s["usage"]["future"], s["scratch"]["future"]) for s in written["timeline"]["steps"]} == {(1, 2)}
    assert written["peak"]["total"] < raw["peak"]["total"]  # the numbers are the rewritten plan's
    assert run("check", str(out))[0] == 0


def test_reject_padding_that_is_needed_is_a_mismatch(plan, reference_plan):
    """Item 11: value 36 reshaped to [1, 1, 1153] (block size 4, padding Reject) passed check."""
    from reference import with_value

    from ipuplan.plan.format import write_plan
    from ipuplan.replan.rewrite import with_derived_fields

    write_plan(with_derived_fields(with_value(reference_plan, 36, shape=[1, 1, 1153])), plan)
    code, stdout, _ = run("check", str(plan))
    assert code == 1 and "value 36" in stdout and "rejects padding" in stdout and "1153" in stdout
    code, _, stderr = run("optimize", str(plan), "-o", str(plan.parent / "o.json"))
    assert code == 2 and "rejects padding" in error_line(stderr)
