from __future__ import annotations

import csv
import json
import multiprocessing
import os
import shutil
import signal
import socket
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from reference import REFERENCE, without_module
from typer.testing import CliRunner

from ipuplan import load_plan
from ipuplan.cli import app
from ipuplan.errors import PlanError
from ipuplan.facts.check import check
from ipuplan.workbench import explore as explore_module
from ipuplan.workbench.explore import ExecutorMissing, explore, job_layout

runner = CliRunner()


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
    without_module(monkeypatch, "ray")
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


def _with_model(source, target, model):
    target.write_text(json.dumps({**json.loads(source.read_text()), "model": model}))


def test_a_worker_that_dies_costs_only_its_own_plan(tmp_path, monkeypatch):
    """`--jobs 2`: one worker killed (SIGKILL) and one ending itself (os._exit) gave every plan a BrokenProcessPool
    row, the plans finished before and those not yet started too. Only the two plans get a row saying how their
    worker died; the others run (alongside, and after) and are written."""
    if multiprocessing.get_start_method() != "fork":
        pytest.skip("the dying hook reaches the workers by fork")
    folder = tmp_path / "in"
    folder.mkdir()
    for name in ("a", "c", "e"):
        shutil.copy(REFERENCE, folder / f"{name}.json")
    _with_model(REFERENCE, folder / "b-killed.json", "killed")
    _with_model(REFERENCE, folder / "d-exits.json", "exits")
    parent, real = os.getpid(), explore_module.optimize

    def dies_in_its_worker(plan, options):
        if os.getpid() != parent:  # never the test's own process
            if plan.model == "killed":
                os.kill(os.getpid(), signal.SIGKILL)
            if plan.model == "exits":
                os._exit(3)
        return real(plan, options)

    monkeypatch.setattr(explore_module, "optimize", dies_in_its_worker)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)  # two jobs, whatever this machine has
    seen = []
    rows = explore([folder], tmp_path / "out", jobs=2, time_limit=5, workers=1, on_row=seen.append)
    by_name = {Path(r.input).name: r for r in rows}
    assert len(seen) == 5 and sorted(by_name) == ["a.json", "b-killed.json", "c.json", "d-exits.json", "e.json"]
    for name in ("a.json", "c.json", "e.json"):
        assert by_name[name].status == "optimal", by_name[name].error
        assert check(load_plan(by_name[name].output)) == []
    assert by_name["b-killed.json"].status == "error" and "killed by SIGKILL" in by_name["b-killed.json"].error
    assert by_name["d-exits.json"].status == "error" and "exit code 3" in by_name["d-exits.json"].error
    assert all("worker died" in by_name[n].error for n in ("b-killed.json", "d-exits.json"))
    assert not multiprocessing.active_children()
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert sorted(r["status"] for r in summary["rows"]) == ["error", "error", "optimal", "optimal", "optimal"]


@contextmanager
def local_server(reply: bytes | None, close: bool = False):
    """A TCP server on 127.0.0.1 (a free port) that accepts every connection and sends `reply` (None: nothing, ever;
    `close`: then closes it). Yields its port."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.05)
    stop, accepted = threading.Event(), []

    def serve():
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            accepted.append(connection)
            if reply is not None:
                connection.sendall(reply)
            if close:
                connection.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        server.close()
        for connection in accepted:
            connection.close()


@pytest.fixture()
def ray_not_to_be_started(monkeypatch):
    """Ray, whose init must not be reached (the address is refused before it)."""
    ray = pytest.importorskip("ray")

    def init(*args, **kwargs):
        raise AssertionError("ray.init was called")

    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(explore_module, "RAY_CONNECT_SECONDS", 1.0)
    return ray


def _ray_error(inputs, tmp_path, address) -> tuple[str, float]:
    started = time.monotonic()
    with pytest.raises(ExecutorMissing) as caught:
        explore([inputs / "a.json"], tmp_path / "out", executor="ray", address=address)
    return str(caught.value), time.monotonic() - started


@pytest.mark.parametrize(("reply", "close", "said"), [
    (b"HTTP/1.1 400 Bad Request\r\n\r\n", True, ("it answers, but not as a Ray cluster does (its reply begins "
                                                 "'HTTP/1.1 400 Bad Request')")),
    (b"\x00garbage", False, "it answers, but not as a Ray cluster does"),
    (None, True, "it accepts connections but closes them without an answer"),
    (None, False, "it accepts connections but did not answer within 1 s"),
])
def test_a_port_that_is_not_ray_is_refused_in_bounded_time(inputs, tmp_path, ray_not_to_be_started, reply, close,
                                                           said):
    """A port that accepts TCP but is not Ray (an HTTP server, a silent one) made `explore --executor ray` hang."""
    with local_server(reply, close) as port:
        message, seconds = _ray_error(inputs, tmp_path, f"127.0.0.1:{port}")
    assert message.startswith(f"cannot reach the Ray cluster at 127.0.0.1:{port}: {said}") and seconds < 5
    assert not ray_not_to_be_started.is_initialized()


def test_an_address_that_never_answers_is_refused_in_bounded_time(inputs, tmp_path, ray_not_to_be_started,
                                                                  monkeypatch):
    """An address that drops the packets ended, minutes on, in Ray's logging and `internal error: ConnectionError`
    (exit 70). Simulated: the connection times out (nothing is sent anywhere)."""
    asked = []

    def dropped(address, timeout=None, *args, **kwargs):
        asked.append((address, timeout))
        raise TimeoutError("timed out")

    monkeypatch.setattr(socket, "create_connection", dropped)
    message, seconds = _ray_error(inputs, tmp_path, "127.0.0.1:6379")
    assert message == "cannot reach the Ray cluster at 127.0.0.1:6379: no answer within 1 s" and seconds < 5
    assert asked and asked[0][0] == ("127.0.0.1", 6379) and 0 < asked[0][1] <= 1


def test_a_silent_port_via_the_cli_is_one_line_and_exit_2(inputs, tmp_path, ray_not_to_be_started):
    with local_server(None) as port:
        result = runner.invoke(app, ["explore", str(inputs / "a.json"), "-o", str(tmp_path / "out"),
                                     "--executor", "ray", "--address", f"127.0.0.1:{port}", "--json"])
    lines = [line for line in result.stderr.splitlines() if not line.startswith("  ")]
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    assert lines == [(f"error: cannot reach the Ray cluster at 127.0.0.1:{port}: it accepts connections but did not "
                      "answer within 1 s (not a Ray cluster?)")]
    assert json.loads(result.stdout)["status"] == "error"


def test_ray_client_address_without_ray_client_is_exit_2(inputs, tmp_path, ray_not_to_be_started, monkeypatch):
    """`ray://HOST:PORT` without ray[client] was `internal error: ValueError`, exit 70."""
    without_module(monkeypatch, "grpc")
    message, seconds = _ray_error(inputs, tmp_path, "ray://127.0.0.1:10001")
    assert "ray://127.0.0.1:10001" in message and "pip install 'ray[client]'" in message and seconds < 5
    result = runner.invoke(app, ["explore", str(inputs / "a.json"), "-o", str(tmp_path / "out"), "--executor", "ray",
                                 "--address", "ray://127.0.0.1:10001"])
    assert result.exit_code == 2 and result.stderr.splitlines()[-1].startswith("error: the Ray address ray://")


SETTINGS = bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
"""What a gRPC server (Ray's GCS) answers first: an empty SETTINGS frame."""


def test_where_ray_itself_connects_is_checked_too(inputs, tmp_path, ray_not_to_be_started, monkeypatch):
    """Ray replaces a loopback host with this machine's address: a server found at 127.0.0.1 may not be there."""
    closed = socket.create_server(("127.0.0.1", 0))
    elsewhere = closed.getsockname()[1]
    closed.close()
    monkeypatch.setattr(explore_module, "_ray_target", lambda address: ("127.0.0.1", elsewhere))
    with local_server(SETTINGS) as port:
        message, _ = _ray_error(inputs, tmp_path, f"127.0.0.1:{port}")
    assert message.startswith(f"cannot reach the Ray cluster at 127.0.0.1:{port}: Ray connects to it as "
                              f"127.0.0.1:{elsewhere}") and "Connection refused" in message


@pytest.mark.parametrize("failure", ["hangs", "raises"])
def test_a_ray_init_that_hangs_or_fails_is_one_error(inputs, tmp_path, monkeypatch, failure):
    """Past the check, Ray's own connect may retry for minutes (or raise, e.g. ConnectionError: exit 70)."""
    ray = pytest.importorskip("ray")
    release = threading.Event()

    def init(*args, **kwargs):
        if failure == "raises":
            raise ConnectionError("Could not find any running Ray instance.\nmore lines")
        release.wait(30)

    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(explore_module, "_ray_target", lambda address: None)
    monkeypatch.setattr(explore_module, "RAY_INIT_SECONDS", 0.5)
    try:
        with local_server(SETTINGS) as port:
            message, seconds = _ray_error(inputs, tmp_path, f"127.0.0.1:{port}")
    finally:
        release.set()
    said = ("Ray did not finish connecting within 0.5 s" if failure == "hangs"
            else "ConnectionError: Could not find any running Ray instance.")
    assert message == f"cannot connect to the Ray cluster at 127.0.0.1:{port}: {said}" and seconds < 5


def test_explore_takes_scope_program_and_writes_its_gathers(inputs, tmp_path):
    result = runner.invoke(app, ["explore", str(inputs / "a.json"), "-o", str(tmp_path / "out"), "--scope", "program",
                                 "--workers", "1", "--json"])
    assert result.exit_code == 0, result.stdout
    row = json.loads(result.stdout)["rows"][0]
    written = load_plan(row["output"])
    assert row["optimized_peak"] == 113_080 and check(written) == []
    assert len(written.steps) == len(load_plan(REFERENCE).steps) + 14  # the inserted Copy steps


def test_an_input_that_is_a_device_is_a_row_not_a_hang(tmp_path):
    rows = explore([Path("/dev/zero")], tmp_path / "out", time_limit=5)
    assert [r.status for r in rows] == ["error"] and "/dev/zero" in rows[0].error
