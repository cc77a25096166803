"""Batch exploration: optimise many finalist scopes, rank them, keep every result.

Each plan runs in its own process (or Ray task); a failing plan becomes a row with its
error and never stops the others, whatever the failure (a bad plan, an internal error, a worker that
died); with best effort, a plan that cannot fit is written and its row says `best_effort`, with the
reason. Outputs that are up to date (same input bytes, same settings, output still there) are not
recomputed unless `force`. An interrupt (Ctrl-C, SIGTERM) ends the workers with the batch: none is
left running, and a worker dies with its parent even when the parent is killed outright.
"""

from __future__ import annotations

import csv
import ctypes
import hashlib
import io
import json
import logging
import multiprocessing
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as wait_for_ready
from pathlib import Path

from ipuplan.errors import InfeasibleBudget, IpuplanError, PlanError
from ipuplan.plan.format import plan_from_json, read_input, write_plan
from ipuplan.plan.outputs import require_output_folder, write_atomically
from ipuplan.replan.options import OptimizeOptions
from ipuplan.replan.pipeline import chosen_options, optimize

SUMMARY_JSON = "summary.json"
SUMMARY_CSV = "summary.csv"
SUCCESS = frozenset({"optimal", "feasible", "unchanged"})


POLL = 0.2
"""Seconds between two looks at the running plans: an interrupt is acted on within this."""
RAY_CONNECT_SECONDS = 10.0
"""How long a Ray cluster address may take to accept a connection and answer it as Ray does (a gRPC server) before
the batch gives up (Ray itself retries for ever on some addresses, for minutes on others)."""
RAY_INIT_SECONDS = 15.0
"""How long Ray may then take to connect to the cluster there before the batch gives up."""


class ExecutorMissing(IpuplanError):
    """An executor whose optional dependency is not installed, or whose cluster cannot be reached."""


@dataclass(frozen=True)
class ExploreRow:
    scope: str
    input: str
    output: str | None
    status: str
    input_peak: int | None = None
    optimized_peak: int | None = None
    fits_before: bool | None = None
    fits_after: bool | None = None
    gap: float | None = None
    exchange_added: int | None = None
    """The written plan's exact exchange less the input's (docs/EXCHANGE.md)."""
    seconds: float = 0.0
    error: str = ""
    input_sha256: str = ""
    output_sha256: str = ""
    """Of the written output: a stored result is reused only while the file still has these bytes."""
    settings: dict = field(default_factory=dict)
    skipped: bool = False

    @property
    def reduction(self) -> float | None:
        if self.input_peak is None or self.optimized_peak is None or self.input_peak == 0:
            return None
        return 1 - self.optimized_peak / self.input_peak

    @property
    def succeeded(self) -> bool:
        return self.status in SUCCESS


def plan_paths(paths: Iterable[str | Path]) -> list[Path]:
    """Files as given, directories expanded to their `*.json` plans (sorted)."""
    found: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            found += sorted(p for p in path.glob("*.json") if p.name not in (SUMMARY_JSON,))
        elif path.exists():
            found.append(path)
        else:
            raise PlanError("no such file or directory", source=str(path))
    if not found:
        raise PlanError("no plan files found", source=", ".join(map(str, paths)) or "(none)")
    names = [p.name for p in found]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise PlanError(f"two inputs would write the same output name: {', '.join(duplicates)}", source="explore")
    return found


def _sha256(path: Path) -> str:
    """The file's sha256, read as a plan is (`read_input`: bounded, never waiting on a pipe forever)."""
    return hashlib.sha256(read_input(path)).hexdigest()


def explore_one(path: str, out_dir: str, options: OptimizeOptions) -> ExploreRow:
    """Optimise one plan and write its result; every failure becomes the row's status and error."""
    started = time.perf_counter()
    source = Path(path)
    output = Path(out_dir) / source.name
    row = ExploreRow(scope=source.stem, input=str(source), output=None, status="error", settings=options.fingerprint())
    try:
        data = read_input(source)  # read once: hashed, then parsed
        row = replace(row, input_sha256=hashlib.sha256(data).hexdigest())
        plan = plan_from_json(data, source=str(source))
        row = replace(row, scope=plan.scope)
        result = optimize(plan, options)
        write_plan(result.plan, output)
        row = replace(row, output_sha256=_sha256(output))
    except IpuplanError as error:
        return _failed(row, error, source, time.perf_counter() - started)
    except OSError as error:
        message = f"{error.filename or source}: {error.strerror}"
        return replace(row, error=message, seconds=time.perf_counter() - started)
    except Exception as error:  # noqa: BLE001  (one plan's bug is that plan's row, never the end of the batch)
        return replace(row, error=f"internal error: {type(error).__name__}: {error}",
                       seconds=time.perf_counter() - started)
    short = result.best_effort and not result.after.fits_budget
    return replace(
        row,
        output=str(output),
        status="best_effort" if short else "unchanged" if result.note else result.status.value,
        error=result.explanation.line if short else "",
        exchange_added=result.exchange_bytes_added,
        input_peak=result.before.raw_peak,
        optimized_peak=result.after.raw_peak,
        fits_before=result.before.fits_budget,
        fits_after=result.after.fits_budget,
        gap=result.solve.gap,
        seconds=time.perf_counter() - started,
    )


def _lost(path: Path, options: OptimizeOptions, why: str) -> ExploreRow:
    """The row of a plan whose worker gave no row (it died, or its task failed)."""
    return ExploreRow(scope=path.stem, input=str(path), output=None, status="error", error=why,
                      settings=options.fingerprint())


def _failed(row: ExploreRow, error: IpuplanError, source: Path, seconds: float) -> ExploreRow:
    """The row of a plan that failed: its reason, and the input's figures when the run got as far as them."""
    status = "infeasible" if isinstance(error, InfeasibleBudget) else "error"
    located = error.at(source=str(source)) if isinstance(error, PlanError) else error
    prepared = getattr(error, "prepared", None)
    if prepared is not None:
        before = prepared.facts.estimate
        row = replace(row, input_peak=before.raw_peak, fits_before=before.fits_budget)
    return replace(row, status=status, error=str(located), seconds=seconds)


def _previous_rows(out_dir: Path) -> dict[str, ExploreRow]:
    try:
        stored = json.loads((out_dir / SUMMARY_JSON).read_text())
        return {row["input"]: ExploreRow(**{k: v for k, v in row.items() if k in ExploreRow.__dataclass_fields__})
                for row in stored["rows"]}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def _up_to_date(previous: ExploreRow | None, path: Path, options: OptimizeOptions) -> bool:
    """The stored row is for these input bytes and options, and its output still has the bytes it wrote."""
    return (
        previous is not None
        and previous.succeeded
        and previous.output is not None
        and previous.settings == options.fingerprint()
        and previous.input_sha256 == _file_sha256(path)
        and previous.output_sha256 == _file_sha256(Path(previous.output))
    )


def _file_sha256(path: Path) -> str | None:
    try:
        return _sha256(path)
    except (OSError, PlanError):
        return None


def ranked(rows: Iterable[ExploreRow]) -> list[ExploreRow]:
    """Best optimised peak first; plans that failed last, in input order."""
    rows = list(rows)
    return sorted(rows, key=lambda r: (not r.succeeded, r.optimized_peak if r.succeeded else 0, rows.index(r)))


def summary_rows(rows: Iterable[ExploreRow]) -> list[dict]:
    return [{**asdict(row), "reduction": row.reduction, "rank": rank} for rank, row in enumerate(ranked(rows), 1)]


def write_summaries(rows: list[ExploreRow], out_dir: Path) -> None:
    """summary.json and summary.csv, each written atomically."""
    records = summary_rows(rows)
    write_atomically(out_dir / SUMMARY_JSON, json.dumps({"rows": records}, indent=2) + "\n")
    columns = ["rank", "scope", "input", "output", "output_sha256", "status", "input_peak", "optimized_peak",
               "reduction", "fits_before", "fits_after", "exchange_added", "gap", "seconds", "skipped", "error"]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(records)
    write_atomically(out_dir / SUMMARY_CSV, buffer.getvalue())


def job_layout(jobs: int, cores: int | None = None) -> tuple[int, int]:
    """(jobs, solver workers per job) with jobs x workers <= cores.

    >>> job_layout(1, 2), job_layout(2, 2), job_layout(8, 2)
    ((1, 2), (2, 1), (2, 1))
    """
    cores = max(1, cores or os.cpu_count() or 1)
    jobs = max(1, min(jobs, cores))
    return jobs, max(1, cores // jobs)


def _run_local(todo: list[Path], out_dir: Path, options: OptimizeOptions, jobs: int, on_row) -> list[ExploreRow]:
    if jobs == 1:
        rows = []
        for path in todo:
            rows.append(explore_one(str(path), str(out_dir), options))
            on_row(rows[-1])
        return rows
    return _run_processes(todo, out_dir, options, jobs, on_row)


@dataclass
class _Worker:
    """One plan's own process, and the end of the pipe its row comes back on."""

    path: Path
    process: multiprocessing.process.BaseProcess
    reader: Connection

    def row(self, options: OptimizeOptions) -> ExploreRow:
        """The row it sent, or (it died first) a row that says how it died; the process is ended either way."""
        row = why = None
        try:
            if self.reader.poll():
                row = self.reader.recv()
        except (EOFError, OSError):
            pass  # it died before it sent a row (or while sending it)
        except Exception as error:  # noqa: BLE001  (a row that cannot be read is that plan's row)
            why = f"the worker's row could not be read: {type(error).__name__}: {error}"
        finally:
            self.reader.close()
        self.process.join(WORKER_EXIT_SECONDS)
        if self.process.is_alive():  # it sent its row (or closed its pipe) but does not end: nothing of it is needed
            self.process.kill()
            self.process.join()
        if isinstance(row, ExploreRow):
            return row
        return _lost(self.path, options, why or f"the worker died ({_exit_reason(self.process.exitcode)}) "
                                                 "before it could give this plan's row")


WORKER_EXIT_SECONDS = 1.0
"""How long a worker that has sent its row may take to end before it is killed: its outputs are written whole before
the row is sent, and the loop (and an interrupt) waits on this join."""


def _exit_reason(code: int | None) -> str:
    """
    >>> _exit_reason(-9), _exit_reason(3)
    ('killed by SIGKILL', 'exit code 3')
    """
    if code is None or code >= 0:
        return f"exit code {code}"
    try:
        return f"killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"killed by signal {-code}"


def _run_processes(todo: list[Path], out_dir: Path, options: OptimizeOptions, jobs: int, on_row) -> list[ExploreRow]:
    """Each plan in a process of its own, `jobs` at a time, its row sent back on a pipe of its own: a worker that dies
    (killed, out of memory, `os._exit` in a library) costs only its own plan, whose row says so; the plans finished
    keep their rows and the others still run. The wait wakes every POLL seconds, so an interrupt is not held up."""
    context = multiprocessing.get_context()
    waiting, running, rows = list(todo), [], []
    try:
        while waiting or running:
            while waiting and len(running) < jobs:
                path = waiting.pop(0)
                try:
                    running.append(_start_worker(context, path, out_dir, options))
                except OSError as error:  # no process could be made (a limit on processes, no memory): its row
                    rows.append(_lost(path, options, f"could not start a worker: {error.strerror or error}"))
                    on_row(rows[-1])
            if not running:
                continue
            ready = set(wait_for_ready([w.reader for w in running] + [w.process.sentinel for w in running], POLL))
            for worker in [w for w in running if w.reader in ready or w.process.sentinel in ready]:
                running.remove(worker)
                rows.append(worker.row(options))
                on_row(rows[-1])
    except BaseException:
        _stop_workers(running)
        raise
    return rows


def _start_worker(context, path: Path, out_dir: Path, options: OptimizeOptions) -> _Worker:
    reader, writer = context.Pipe(duplex=False)
    process = context.Process(target=_work, args=(writer, str(path), str(out_dir), options, os.getpid()),
                              name=f"ipuplan-explore {path.name}", daemon=True)
    try:
        process.start()
    except BaseException:
        reader.close()
        raise
    finally:
        writer.close()  # the worker's end is the worker's: when it dies, the reader sees the end at once
    return _Worker(path, process, reader)


def _work(writer: Connection, path: str, out_dir: str, options: OptimizeOptions, parent: int) -> None:
    """In the worker: one plan, its row sent back."""
    worker_started(parent)
    row = explore_one(path, out_dir, options)
    writer.send(row)
    writer.close()


def worker_started(parent: int) -> None:
    """In each worker: Ctrl-C (sent to the whole terminal's process group) is the parent's to act on, SIGTERM
    ends the worker, and the worker dies with its parent (Linux), so none outlives a parent killed outright."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, (signal.SIGINT, signal.SIGTERM))  # the CLI's main thread blocks them
    if os.getppid() != parent:  # the parent died before the line above could ask to follow it
        os._exit(1)


_PR_SET_PDEATHSIG = 1


def _stop_workers(workers: list[_Worker]) -> None:
    """End every worker now (SIGTERM, then SIGKILL after a second)."""
    for worker in workers:
        worker.process.terminate()
    for worker in workers:
        worker.process.join(1.0)
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join()
        worker.reader.close()


def _run_ray(todo: list[Path], out_dir: Path, options: OptimizeOptions, address: str | None,
             on_row) -> list[ExploreRow]:
    try:
        import ray
    except ImportError:
        raise ExecutorMissing("the Ray executor needs the ray extra: pip install 'ipuplan[ray]'") from None
    started_here = not ray.is_initialized()
    if started_here:
        _require_reachable(address)
        if _is_cluster(address):
            _connect(ray, address)
        else:
            with _signals_unblocked():  # Ray's processes inherit the mask: they must be able to end
                ray.init(address=address, include_dashboard=False, log_to_driver=False)
    try:
        remote = ray.remote(num_cpus=options.workers)(explore_one)
        tasks = {remote.remote(str(path), str(out_dir.resolve()), options): path for path in todo}
        rows, pending = [], list(tasks)
        while pending:
            done, pending = ray.wait(pending, num_returns=1, timeout=POLL)
            for task in done:
                try:
                    rows.append(ray.get(task))
                except Exception as error:  # noqa: BLE001  (a task that failed is its plan's row)
                    rows.append(_lost(tasks[task], options, f"the Ray task failed: {type(error).__name__}: {error}"))
                on_row(rows[-1])
        return rows
    finally:
        if started_here:
            ray.shutdown()


def _is_cluster(address: str | None) -> bool:
    """An address of a cluster to connect to (not None, auto or local: a Ray instance started here, or found)."""
    return address is not None and address not in ("auto", "local")


_HTTP2_HELLO = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
"""An HTTP/2 client's first bytes (the preface, then an empty SETTINGS frame): a gRPC server, as Ray's GCS and the
Ray Client server are, answers with a SETTINGS frame of its own."""


def _require_reachable(address: str | None) -> None:
    """Refuse, within RAY_CONNECT_SECONDS, a cluster address that Ray could not use: one that is not HOST:PORT, a
    ray:// address without Ray Client installed, an address that refuses or does not answer, and one that answers but
    not as a gRPC server (Ray would retry each for ever, or minutes, logging all the while)."""
    if not _is_cluster(address):
        return
    client = address.startswith("ray://")
    host, port = _host_port(address)
    if client and _ray_client_missing():
        raise ExecutorMissing(f"the Ray address {address} is a Ray Client address, which needs Ray Client: "
                              "pip install 'ray[client]' (or give the cluster's HOST:PORT, without ray://)")
    deadline = time.monotonic() + RAY_CONNECT_SECONDS
    problem = _answers_as_grpc(host, port, deadline)
    if problem is None and not client:
        target = _ray_target(address)
        if target is not None and target != (host, port):
            problem = _answers_as_grpc(*target, deadline)
            if problem is not None:
                problem = f"Ray connects to it as {_joined(*target)} (this machine's address for a loopback one), " \
                          f"and there {problem}"
    if problem is not None:
        raise ExecutorMissing(f"cannot reach the Ray cluster at {address}: {problem}")


def _host_port(address: str) -> tuple[str, int]:
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise ExecutorMissing(f"Ray address {address!r} is not HOST:PORT (or ray://HOST:PORT, auto, local)")
    return host.removeprefix("[").removesuffix("]"), int(port)


def _joined(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _ray_client_missing() -> bool:
    """Whether Ray Client's dependency (grpcio, the one Ray itself checks for ray://) is missing."""
    try:
        import grpc  # noqa: F401
    except ImportError:
        return True
    return False


def _ray_target(address: str) -> tuple[str, int] | None:
    """The host and port Ray itself will connect to for `address`: it replaces a loopback host (127.0.0.1,
    localhost) with this machine's address, where a server bound to loopback only is not found."""
    try:
        from ray._private.services import canonicalize_bootstrap_address

        return _host_port(canonicalize_bootstrap_address(address))
    except Exception:  # noqa: BLE001  (a Ray without this private helper: the address as given is what there is)
        return None


def _answers_as_grpc(host: str, port: int, deadline: float) -> str | None:
    """None when host:port accepts a connection and answers an HTTP/2 preface as gRPC servers do before the deadline;
    otherwise what went wrong, in words."""
    def left() -> float:
        return max(0.01, deadline - time.monotonic())

    reply = b""
    try:
        with socket.create_connection((host, port), timeout=left()) as connection:
            try:
                connection.sendall(_HTTP2_HELLO)
                while len(reply) < 9:
                    connection.settimeout(left())
                    chunk = connection.recv(64)
                    if not chunk:
                        break
                    reply += chunk
            except TimeoutError:
                if not reply:
                    return (f"it accepts connections but did not answer within {RAY_CONNECT_SECONDS:g} s "
                            "(not a Ray cluster?)")
            except OSError:  # reset: it closed the connection on what it was sent
                pass
    except TimeoutError:
        return f"no answer within {RAY_CONNECT_SECONDS:g} s"
    except OSError as error:
        return f"{error.strerror or type(error).__name__} (within {RAY_CONNECT_SECONDS:g} s)"
    if len(reply) >= 9 and reply[3] == 4 and reply[5:9] == bytes(4):  # a SETTINGS frame, on the connection's stream
        return None
    if not reply:
        return "it accepts connections but closes them without an answer (not a Ray cluster?)"
    begins = reply[:40].split(b"\n")[0].decode("ascii", "replace").strip()
    return f"it answers, but not as a Ray cluster does (its reply begins {begins!r})"


def _connect(ray, address: str) -> None:
    """ray.init on a cluster, within RAY_INIT_SECONDS; what fails is one line naming the address. (Ray may retry
    for minutes, and may not be told to stop: on a time-out its thread is left to end with the process.)"""
    outcome: dict[str, BaseException | bool] = {}

    def connect() -> None:
        try:
            with _signals_unblocked(), _no_thread_warning():
                ray.init(address=address, include_dashboard=False, log_to_driver=False)
            outcome["done"] = True
        except BaseException as error:  # noqa: BLE001  (handed to the caller's thread)
            outcome["error"] = error

    thread = threading.Thread(target=connect, name="ray-connect", daemon=True)
    thread.start()
    deadline = time.monotonic() + RAY_INIT_SECONDS
    while thread.is_alive() and time.monotonic() < deadline:
        thread.join(POLL)  # in steps, so an interrupt is not held up
    if thread.is_alive():
        raise ExecutorMissing(f"cannot connect to the Ray cluster at {address}: Ray did not finish connecting within "
                              f"{RAY_INIT_SECONDS:g} s")
    error = outcome.get("error")
    if isinstance(error, Exception):
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise ExecutorMissing(f"cannot connect to the Ray cluster at {address}: {type(error).__name__}"
                              + (f": {first}" if first else "")) from None
    if error is not None:
        raise error


class _no_thread_warning:
    """Ray's warning that it sets no SIGTERM handler from a thread left out (the CLI has its own)."""

    @staticmethod
    def filter(record) -> bool:
        return not record.getMessage().startswith("SIGTERM handler is not set")

    def __enter__(self) -> None:
        self.logger = logging.getLogger("ray._private.worker")
        self.logger.addFilter(self.filter)

    def __exit__(self, *exc) -> None:
        self.logger.removeFilter(self.filter)


class _signals_unblocked:
    """SIGINT and SIGTERM unblocked in this thread for a while (what a process started meanwhile inherits)."""

    def __enter__(self) -> None:
        self.before = signal.pthread_sigmask(signal.SIG_UNBLOCK, (signal.SIGINT, signal.SIGTERM))

    def __exit__(self, *exc) -> None:
        signal.pthread_sigmask(signal.SIG_SETMASK, self.before)


def _check_paths(paths: object, out_dir: object) -> None:
    """TypeError, in one line, for arguments `explore` would misread: one path for `paths` (a string would be
    walked one character at a time), or anything but a path for either."""
    if isinstance(paths, (str, bytes, os.PathLike)):
        raise TypeError(f"explore: paths must be a list of plan files or folders, not one path: "
                        f"explore([{str(paths)!r}], ...)")
    if not isinstance(paths, Iterable):
        raise TypeError(f"explore: paths must be a list of plan files or folders, got {type(paths).__name__}")
    if not isinstance(out_dir, (str, os.PathLike)):
        raise TypeError(f"explore: out_dir must be a path, got {type(out_dir).__name__}")


def explore(
    paths: Iterable[str | Path],
    out_dir: str | Path,
    options: OptimizeOptions | None = None,
    *,
    jobs: int = 1,
    force: bool = False,
    executor: str = "local",
    address: str | None = None,
    on_row: Callable[[ExploreRow], None] | None = None,
    **option_values,
) -> list[ExploreRow]:
    """Optimise every plan into `out_dir` with `options` (or keyword values of its fields);
    returns the rows ranked (best optimised peak first).

    Solver workers per plan default to the cores each job gets (one on Ray); the worker count
    is part of the fingerprint, since one worker means deterministic output.
    """
    _check_paths(paths, out_dir)
    options = chosen_options(options, option_values, "explore")
    files = plan_paths(paths)
    out = Path(out_dir)
    if executor not in ("local", "ray"):
        raise PlanError(f"unknown executor {executor!r}; choose local or ray", source="explore")
    require_output_folder(out, inputs=tuple(files))
    jobs, solver_workers = job_layout(jobs)
    options = options.with_values(workers=1 if executor == "ray"
                                  else min(options.workers or solver_workers, solver_workers))
    previous = _previous_rows(out)
    notify = on_row or (lambda row: None)
    kept = {}
    for path in files:
        if not force and _up_to_date(previous.get(str(path)), path, options):
            kept[str(path)] = replace(previous[str(path)], skipped=True)
            notify(kept[str(path)])
    todo = [path for path in files if str(path) not in kept]
    if executor == "local":
        fresh = _run_local(todo, out, options, jobs, notify)
    else:
        fresh = _run_ray(todo, out, options, address, notify)
    by_input = {**kept, **{row.input: row for row in fresh}}
    rows = ranked(by_input[str(path)] for path in files)
    write_summaries(rows, out)
    return rows
