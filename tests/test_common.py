"""What every command shares (`cli.common`): a library error is one line on stderr (with `--json`, one object) and
its exit code, an internal error too, budgets that cannot be met explained before that line; a failed write or an
interrupt says what was written before; Ctrl-C and SIGTERM during a command (`Command`) end it cleanly, its workers
with it; progress at least every TICK seconds; tables within 80 columns off a terminal; a reader that stops reading
ends the run quietly; every optimise option reaches the library."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from reference import CHIP6, PYTHON, REFERENCE, entries, error_line, run, snapshot
from typer.testing import CliRunner

from ipuplan.cli import app

runner = CliRunner()


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


def test_json_failures_print_one_object(tmp_path):
    code, stdout, _ = run("optimize", str(REFERENCE), "-o", str(tmp_path / "o.json"), "--json",
                          "--budget", "120000", "--interleaved-budget", "60000")
    summary = json.loads(stdout)
    assert code == 3 and summary["status"] == "infeasible" and "cannot be met" in summary["error"]
    code, stdout, _ = run("optimize", str(tmp_path / "missing.json"), "-o", str(tmp_path / "o.json"), "--json")
    assert code == 2 and json.loads(stdout)["status"] == "error"
    assert entries(tmp_path) == set()


def test_json_is_one_object_on_an_internal_error(plan, monkeypatch):
    """Item 6: --json printed nothing on the exit-70 paths."""
    from ipuplan.replan import pipeline

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(pipeline, "optimize", broken)
    code, stdout, stderr = run("optimize", str(plan), "-o", str(plan.parent / "o.json"), "--json")
    assert code == 70 and json.loads(stdout) == {"input": str(plan), "status": "error",
                                                  "error": ("internal error: RuntimeError: a bug "
                                                            "(IPUPLAN_DEBUG=1 shows more)")}
    assert error_line(stderr).startswith("internal error: RuntimeError")


def test_infeasible_cli_explains_on_stderr_in_json_and_in_the_report(tmp_path):
    page = tmp_path / "why.html"
    args = ["optimize", str(CHIP6), "-o", str(tmp_path / "o.json"), "--workers", "1", "--scope", "storage", "--report",
            str(page)]
    text = runner.invoke(app, args)
    assert text.exit_code == 3 and not (tmp_path / "o.json").exists()
    lines = text.stderr.splitlines()
    assert lines[-1].startswith("error: the standard budget") and all(line.startswith("  ") for line in lines[:-1])
    assert any("with --scope kernels: the budgets can be met" in line for line in lines)
    assert "Why the budgets cannot be met" in page.read_text() and "<table id='holders'>" in page.read_text()
    as_json = runner.invoke(app, [*args[:-2], "--json", "--force"])
    failure = json.loads(as_json.stdout)
    assert failure["status"] == "infeasible" and failure["explanation"]["minimal"]
    assert failure["explanation"]["steps"][0]["holders"][0]["frozen"]


def test_a_failed_write_after_another_names_both(plan, monkeypatch):
    """The outputs written before a failed one are whole, and the error line says they were written."""
    from ipuplan.cli import common
    from ipuplan.errors import OutputError

    real = common.write_atomically

    def full_at_the_report(path, content):
        if Path(path).suffix == ".html":
            raise OutputError(path, "No space left on device")
        real(path, content)

    monkeypatch.setattr(common, "write_atomically", full_at_the_report)
    report, out = plan.parent / "r.html", plan.parent / "o.json"
    code, _, stderr = run("optimize", str(plan), "-o", str(out), "--report", str(report), "--workers", "1")
    assert code == 2 and error_line(stderr) == (f"error: {report}: cannot write: No space left on device (nothing "
                                                f"written); {out} written before")
    assert sorted(snapshot(plan.parent)) == ["o.json", "plan.json"]


def test_an_interrupt_after_a_write_names_what_was_written(tmp_path, monkeypatch):
    """Item 7: synth said 'interrupted: nothing written' (130) while its complete output existed."""
    from ipuplan.cli import workbench_commands

    real = workbench_commands.write_output

    def written_then_interrupted(path, content):
        real(path, content)
        raise KeyboardInterrupt

    monkeypatch.setattr(workbench_commands, "write_output", written_then_interrupted)
    out = tmp_path / "s.json"
    code, _, stderr = run("synth", str(REFERENCE), "-o", str(out), "--unroll", "2")
    assert code == 130 and error_line(stderr) == f"interrupted: wrote {out} before; nothing half-written is left"
    assert json.loads(out.read_text())["timeline"]["steps"]


def test_ctrl_c_prints_one_line_exits_130_and_writes_nothing(tmp_path):
    plan = tmp_path / "big.json"
    assert run("synth", str(REFERENCE), "-o", str(plan), "--unroll", "12")[0] == 0
    out = tmp_path / "out.json"
    process = subprocess.Popen([*PYTHON, "optimize", str(plan), "-o", str(out), "--time-limit", "60"],
                               stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    first = process.stderr.readline()  # the first phase line: the command is under way
    process.send_signal(signal.SIGINT)
    rest = process.stderr.read()
    assert process.wait(timeout=60) == 130
    assert first.split()[0] == "load"
    assert rest.splitlines()[-1] == "interrupted: nothing written" and "Traceback" not in rest
    assert entries(tmp_path) == {"big.json"}


def _children(pid: int) -> set[int]:
    try:
        return {int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()}
    except OSError:
        return set()


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def test_sigterm_to_explore_ends_its_workers(tmp_path):
    """Item 8: SIGTERM to `explore --jobs 2` left both workers running, their parent gone."""
    folder = tmp_path / "plans"
    folder.mkdir()
    for name in ("a", "b"):
        shutil.copy(REFERENCE, folder / f"{name}.json")
    process = subprocess.Popen([*PYTHON, "explore", str(folder), "-o", str(tmp_path / "out"), "--jobs", "2", "--json",
                                "--time-limit", "60", "--scope", "kernels"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while len(_children(process.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    workers = _children(process.pid)
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=30)
    time.sleep(0.5)
    assert process.returncode == 143 and error_line(stderr).startswith("interrupted: "), stderr
    assert json.loads(stdout)["status"] == "interrupted"
    assert workers and not any(_alive(pid) for pid in workers)


def test_ctrl_c_inside_the_solver_is_not_absorbed(tmp_path):
    """Item 7: Ctrl-C in CP-SAT's solve was taken by CP-SAT, and the plan was written with exit 0."""
    plan = tmp_path / "big.json"
    assert run("synth", str(REFERENCE), "-o", str(plan), "--unroll", "6")[0] == 0
    out = tmp_path / "out.json"
    process = subprocess.Popen([*PYTHON, "optimize", str(plan), "-o", str(out), "--time-limit", "60", "--workers", "1",
                                "--scope", "storage"], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    for line in process.stderr:
        if line.split()[:1] == ["solve"]:
            break
    time.sleep(0.3)
    process.send_signal(signal.SIGINT)
    started = time.monotonic()
    rest = process.stderr.read()
    assert process.wait(timeout=30) == 130 and time.monotonic() - started < 5
    assert error_line(rest) == "interrupted: nothing written"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.json"]


def test_a_long_phase_is_never_silent_for_long(tmp_path, monkeypatch):
    """Progress at least every TICK seconds on long phases (here TICK is made short, and the solve is long enough)."""
    from ipuplan.cli import common

    monkeypatch.setattr(common, "TICK", 0.05)
    code, _, stderr = run("optimize", str(REFERENCE), "-o", str(tmp_path / "o.json"), "--workers", "1")
    assert code == 0 and "still running" in stderr


def test_tables_keep_to_80_columns_off_a_terminal(tmp_path):
    folder = tmp_path / "plans"
    folder.mkdir()
    shutil.copy(REFERENCE, folder / "vit-so400m-finalist-5-with-a-long-name.json")
    outputs = [run("show", str(REFERENCE))[1], run("explore", str(folder), "-o", str(tmp_path / "out"))[1],
               run("optimize", str(REFERENCE), "-o", str(tmp_path / "o.json"), "--workers", "1")[1],
               run("sweep", str(REFERENCE), "--workers", "1", "--points", "2")[1], run("graph", str(REFERENCE))[1]]
    for stdout in outputs:
        table = stdout.split("\nleft alone")[0].split("\n1 plans in")[0]  # the table, not the lines after it
        assert max(map(len, table.splitlines())) <= 80, table
    assert "vit-so400m-finalist-5-with-a-long-name.json" in outputs[1]  # whole, not cut short


@pytest.mark.parametrize("command", ["graph", "show"])
def test_a_reader_that_stops_reading_ends_the_run_quietly(tmp_path, command):
    """`ipuplan graph plan.json | head` was 'internal error: BrokenPipeError', exit 70 (show: exit 1, check's code)."""
    plan = tmp_path / "big.json"
    assert run("synth", str(REFERENCE), "-o", str(plan), "--unroll", "12")[0] == 0
    more = ["--top", "100000"] if command == "show" else []  # output past what a pipe holds (64 kB)
    process = subprocess.Popen([*PYTHON, command, str(plan), *more], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdout.readline()
    process.stdout.close()  # what `head -1` does once it has its line
    assert process.wait(timeout=60) == 141 and process.stderr.read() == b""


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
