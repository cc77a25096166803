"""Issue 35, item 4: nothing ipuplan reads or builds is unbounded. A plan file past the input limit is refused by its
size, unread; a device is refused and a pipe never waits forever; `synth` and every optimise run are sized before
they start (the estimate: test_replan_size.py), and refused in one line (exit 2) past the memory limit."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from reference import REFERENCE
from typer.testing import CliRunner

import ipuplan.plan.format as plan_format
from ipuplan import PlanError, load_plan
from ipuplan.cli import app
from ipuplan.workbench import synth
from ipuplan.workbench.synth import repeat_layers, unroll

runner = CliRunner()


def _sparse(path: Path, size: int) -> Path:
    """A file that says it holds `size` bytes and takes no disk (zeros, as /dev/zero would give)."""
    with open(path, "wb") as file:
        file.truncate(size)
    return path


def _bytes_read(monkeypatch) -> list[int]:
    """Every read the loader makes, by its size."""
    sizes, read = [], os.read

    def counted(descriptor: int, count: int) -> bytes:
        data = read(descriptor, count)
        sizes.append(len(data))
        return data

    monkeypatch.setattr(plan_format.os, "read", counted)
    return sizes


def _within(seconds: float, function, *args):
    """`function(*args)`'s result or exception, failing the test if it takes longer than `seconds` (it may block:
    a daemon thread, so a hang fails the test instead of holding the run)."""
    outcome = {}

    def run() -> None:
        try:
            outcome["result"] = function(*args)
        except BaseException as error:  # noqa: BLE001 (handed to the test)
            outcome["error"] = error

    worker = threading.Thread(target=run, daemon=True)
    started = time.monotonic()
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"still running after {seconds} s"
    return outcome, time.monotonic() - started


def test_a_file_past_the_limit_is_refused_by_its_size_before_a_byte_is_read(tmp_path, monkeypatch):
    big = _sparse(tmp_path / "plan.json", (1 << 20) + 1)
    sizes = _bytes_read(monkeypatch)
    monkeypatch.setenv("IPUPLAN_MAX_INPUT_BYTES", "1M")
    with pytest.raises(PlanError) as refused:
        load_plan(big)
    assert str(refused.value) == f"{big}: larger than the 1 MiB input limit (set IPUPLAN_MAX_INPUT_BYTES to read more)"
    assert sizes == []
    monkeypatch.delenv("IPUPLAN_MAX_INPUT_BYTES")
    with pytest.raises(PlanError, match="larger than the 1 KiB input limit"):
        load_plan(big, max_bytes=1024)


def test_the_default_limit_refuses_a_gibibyte_and_one_byte(tmp_path, monkeypatch):
    monkeypatch.delenv("IPUPLAN_MAX_INPUT_BYTES", raising=False)
    big = _sparse(tmp_path / "plan.json", (1 << 30) + 1)
    with pytest.raises(PlanError, match="larger than the 1 GiB input limit"):
        load_plan(big)


def test_a_plan_of_exactly_the_limit_loads(reference_plan):
    size = REFERENCE.stat().st_size
    assert load_plan(REFERENCE, max_bytes=size) == reference_plan
    with pytest.raises(PlanError, match="input limit"):
        load_plan(REFERENCE, max_bytes=size - 1)


def test_a_limit_that_is_no_size_names_the_variable(monkeypatch):
    monkeypatch.setenv("IPUPLAN_MAX_INPUT_BYTES", "lots")
    with pytest.raises(PlanError, match="^IPUPLAN_MAX_INPUT_BYTES: 'lots' is not a size"):
        load_plan(REFERENCE)


def test_the_cli_refuses_a_file_past_the_limit_in_one_line(tmp_path):
    big = _sparse(tmp_path / "plan.json", 4097)
    for command in (["check", str(big)], ["optimize", str(big), "-o", str(tmp_path / "out.json")]):
        result = runner.invoke(app, command, env={"IPUPLAN_MAX_INPUT_BYTES": "4K"})
        assert result.exit_code == 2, result.output
        errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        assert errors == [f"error: {big}: larger than the 4 KiB input limit (set IPUPLAN_MAX_INPUT_BYTES to read more)"]
    assert not (tmp_path / "out.json").exists()


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_dev_zero_is_refused_at_once():
    outcome, seconds = _within(5, load_plan, "/dev/zero")
    assert seconds < 1
    assert str(outcome["error"]) == ("/dev/zero: not a plan file: a character device "
                                     "(ipuplan reads regular files and pipes)")
    result = runner.invoke(app, ["check", "/dev/zero"])
    assert result.exit_code == 2 and "not a plan file: a character device" in result.stderr


def test_a_fifo_with_no_writer_is_refused_at_once(tmp_path):
    fifo = tmp_path / "plan.json"
    os.mkfifo(fifo)
    outcome, seconds = _within(4, load_plan, fifo)
    assert seconds < 1
    assert str(outcome["error"]) == f"{fifo}: nothing to read: the pipe has no writer, or its writer sent nothing"


def _write_into(fifo: Path, data: bytes, then_wait: float = 0.0) -> threading.Thread:
    """A writer for `fifo`, open before the reader comes, that sends `data` in two parts, then holds the pipe open
    for `then_wait` seconds. Opened read-write, so the open returns at once; so the writer is also a reader, and
    what a refusing reader leaves unread must fit the pipe's buffer (64 KiB) for the writer not to block."""
    opened = threading.Event()

    def write() -> None:
        descriptor = os.open(fifo, os.O_RDWR)
        opened.set()
        try:
            os.write(descriptor, data[:16])
            time.sleep(0.05)
            view = memoryview(data)[16:]
            while view:
                view = view[os.write(descriptor, view[: 1 << 16]):]
            time.sleep(then_wait)
        finally:
            os.close(descriptor)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    opened.wait(5)
    return writer


def test_a_plan_from_a_fifo_loads(tmp_path, reference_plan):
    fifo = tmp_path / "plan.json"
    os.mkfifo(fifo)
    writer = _write_into(fifo, REFERENCE.read_bytes())
    outcome, _ = _within(4, load_plan, fifo)
    writer.join(4)
    assert outcome["result"] == reference_plan


def test_a_fifo_past_the_limit_is_refused_having_read_at_most_the_limit(tmp_path, monkeypatch):
    fifo = tmp_path / "plan.json"
    os.mkfifo(fifo)
    sizes = _bytes_read(monkeypatch)
    _write_into(fifo, REFERENCE.read_bytes()[:20_000], then_wait=1.0)
    outcome, _ = _within(4, lambda: load_plan(fifo, max_bytes=10_000))
    assert str(outcome["error"]) == (f"{fifo}: larger than the 9.77 KiB input limit "
                                     "(set IPUPLAN_MAX_INPUT_BYTES to read more)")
    assert sum(sizes) == 10_001


def test_a_fifo_whose_writer_stalls_is_given_up(tmp_path, monkeypatch):
    monkeypatch.setattr(plan_format, "PIPE_WAIT_SECONDS", 0.3)
    fifo = tmp_path / "plan.json"
    os.mkfifo(fifo)
    _write_into(fifo, b'{"version"', then_wait=3.0)
    outcome, seconds = _within(4, load_plan, fifo)
    assert str(outcome["error"]) == f"{fifo}: the pipe sent nothing for 0.3 s (its writer stalled)"
    assert seconds < 2


def test_bad_json_through_a_pipe_keeps_its_location(tmp_path):
    fifo = tmp_path / "plan.json"
    os.mkfifo(fifo)
    _write_into(fifo, b'{"version": 1,\n  "scope": }')
    outcome, _ = _within(4, load_plan, fifo)
    assert str(outcome["error"]) == f"{fifo}: line 2 column 12 (byte 26): invalid JSON: Expecting value"


def test_a_directory_is_refused_as_before(tmp_path):
    with pytest.raises(PlanError, match="cannot read: Is a directory"):
        load_plan(tmp_path)


def test_synth_refuses_a_plan_past_the_memory_limit_before_building_it(tmp_path):
    out = tmp_path / "huge.json"
    started = time.monotonic()
    result = runner.invoke(app, ["synth", str(REFERENCE), "-o", str(out), "--unroll", "5000", "--memory-limit", "1G"])
    assert time.monotonic() - started < 5
    assert result.exit_code == 2 and not out.exists()
    assert result.stderr.strip().splitlines()[-1] == (
        "error: --unroll 5000: 5000 unrolled copies would make a plan of ~880,000 values and ~27,457,678 live entries "
        "(~6.89 GiB to make); the limit is 1 GiB")
    result = runner.invoke(app, ["synth", str(REFERENCE), "-o", str(out), "--layers", "30000", "--memory-limit", "1G"])
    assert result.exit_code == 2 and "error: --layers 30000: 30000 layers would make a plan of ~360,152 values" in (
        result.stderr)


def test_synth_counts_the_plan_it_will_make(reference_plan, monkeypatch):
    asked = []
    monkeypatch.setattr(synth, "require_synth_fits", lambda request, *counts: asked.append(counts[:3]))
    for derive, count in ((unroll, 4), (repeat_layers, 7)):
        made = derive(reference_plan, count)
        assert asked.pop() == (len(made.values), len(made.steps), sum(len(step.live) for step in made.steps))


def test_optimize_and_sweep_refuse_a_tiny_memory_limit_in_one_line(tmp_path):
    out = tmp_path / "out.json"
    for command in (["optimize", str(REFERENCE), "-o", str(out)], ["sweep", str(REFERENCE), "--points", "2"]):
        result = runner.invoke(app, [*command, "--memory-limit", "1M"])
        assert result.exit_code == 2, result.output
        errors = [line for line in result.stderr.splitlines() if not line.startswith("  ")]
        assert errors == [(f"error: {REFERENCE}: the run would need about 550 MiB (176 values, 116 steps, 3,170 "
                           "live entries); --memory-limit is 1 MiB")]
    assert not out.exists()
    result = runner.invoke(app, ["optimize", str(REFERENCE), "-o", str(out), "--memory-limit", "lots"])
    assert result.exit_code == 2 and "'lots' is not a size" in result.stderr
