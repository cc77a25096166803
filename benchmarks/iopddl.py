"""The solver core on the IOPDDL contest's instances (issue 23): one instance, or all of them with the contest's
timeouts.

    .venv/bin/python benchmarks/iopddl.py ../shared/iopddl/asplos-2025-iopddl-B.json.gz --time-limit 60 -o b.json
    .venv/bin/python benchmarks/iopddl.py --all ../shared/iopddl --results benchmarks/results/iopddl.md

One instance: the product's own run (`workbench.iopddl.solve_instance`, what `ipuplan iopddl` runs): reads it as
given (gzip or plain JSON), builds the core's `Problem` (`workbench.iopddl.merged_problem`: a group per set of nodes
that follow one another over edges that fix one side from the other), solves it with the code that
serves plans (`solvers.solve`: the reduction, then CP-SAT, objective `fit`, default settings), scores the solution
with the contest's definition (`workbench.iopddl.evaluate`, never the solver's own figure), writes it when valid (a
JSON list of strategy indices) and prints cost, validity, time to the first valid solution, wall and max RSS. The
time limit is the whole run's, as in the contest: one deadline from this process's start.

`--all DIR`: every instance of the contest table found in DIR, each in a fresh process with the contest's timeout
(`--busy`: with two CPU-bound loops running beside the whole time, results to iopddl-busy.md; the 1-minute load
after each run is in the table), watched: a run whose RSS passes `--memory-limit` (default 8 GB) or that runs past
its timeout by `GRACE` seconds is ended, and the table says how far it got (its last stage, with seconds and RSS).
Writes `--results` (markdown); text under a `## Notes` heading of an existing results file is kept.
"""

from __future__ import annotations

import time

STARTED = time.perf_counter()  # before the heavy imports: the contest times the whole process

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from tables import busy, head_commit

GRACE = 30.0
"""Seconds past its timeout after which a run is ended (the contest would have scored it as no solution)."""
POLL = 0.2


@dataclass(frozen=True)
class Reference:
    """The published figures of one instance (the shared README's table)."""

    model: str
    timeout: float
    best_known: int
    xla: int | None
    lower_bound: int


REFERENCES = {
    "B": Reference("Transformer (inference)", 60, 532_843, 990_205, 532_843),
    "G": Reference("Transformer (inference)", 120, 217_039, 1_264_777, 216_931),
    "A": Reference("GNS", 60, 6_548_641_531, 13_214_846_074, 6_513_812_172),
    "K": Reference("GNS", 180, 2_257_227_094, None, 2_065_623_588),
    "M": Reference("Gemma 1 (2B)", 180, 49_928_460_991, None, 49_407_421_919),
    "S": Reference("U-Net", 240, 1_534_613_444, None, 1_511_240_135),
}
"""In the order to run them: the small ones first."""


def resident_mb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def stage(name: str) -> None:
    """A line on stderr per stage, so a watcher that ends the run knows how far it got."""
    print(json.dumps({"stage": name, "seconds": round(time.perf_counter() - STARTED, 2), "rss_mb": resident_mb()}),
          file=sys.stderr, flush=True)


def solve_instance(path: Path, time_limit: float, output: Path | None) -> dict:
    """One instance through the product's own run (`workbench.iopddl.solve_instance`, what `ipuplan iopddl` runs and
    tests/test_solve_commands.py covers), timed from this process's start; its figures, with the RSS."""
    from ipuplan.plan.outputs import write_atomically
    from ipuplan.workbench.iopddl import read_instance
    from ipuplan.workbench.iopddl import solve_instance as solve

    stage("imported")
    instance = read_instance(path)
    stage("read")
    run = solve(instance, time_limit, started=STARTED, on_phase=lambda name, detail: stage(name))
    if output is not None and run.solved:
        write_atomically(output, json.dumps(list(run.choice)) + "\n")
    return {**run.summary(), "status": run.result.status.value, "wall_s": time.perf_counter() - STARTED,
            "rss_mb": resident_mb()}


def print_run(run: dict) -> None:
    print(f"{run['instance']}: {run['nodes']:,} nodes, {run['edges']:,} edges, {run['rows']:,} rows, "
          f"{run['groups']:,} groups; {run['status']}")
    print(f"  cost {run['cost']:,} ({'valid' if run['valid'] else 'NOT VALID'}: peak usage {run['peak_usage']:,} "
          f"of {'no limit' if run['usage_limit'] is None else format(run['usage_limit'], ',')}, "
          f"{run['forbidden']} forbidden costs paid; the solver said {run['solver_cost']:,})")
    first = "-" if run["first_valid_s"] is None else f"{run['first_valid_s']:.1f} s"
    print(f"  first valid solution {first}, wall {run['wall_s']:.1f} s, max RSS {run['rss_mb']:,} MB")


def watched(command: list[str], timeout: float, memory_mb: int, log: Path) -> tuple[dict | None, str, int]:
    """(the run's --json object or None, how it ended, its peak RSS in MB) of one fresh process, ended when its RSS
    passes `memory_mb` or it outlives `timeout` + GRACE."""
    began = time.perf_counter()
    with log.open("w") as stderr:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, start_new_session=True)
    peak, ended = 0, "finished"
    while process.poll() is None:
        peak = max(peak, current_rss_mb(process.pid))
        if peak > memory_mb or time.perf_counter() - began > timeout + GRACE:
            ended = f"ended at {peak:,} MB" if peak > memory_mb else f"ended after {timeout + GRACE:.0f} s"
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            break
        time.sleep(POLL)
    output = process.stdout.read()
    if ended == "finished" and process.returncode != 0:
        ended = f"exit {process.returncode}"
    try:
        return json.loads(output), ended, peak
    except json.JSONDecodeError:
        return None, ended, peak


def current_rss_mb(pid: int) -> int:
    """The memory of `pid` and of every process it started (toulbar2's forked workers): their proportional set sizes
    summed, so that the pages a fork shares count once (resident size where the kernel gives no PSS)."""
    return sum(_own_memory_kb(p) for p in _tree(pid)) // 1024


def _tree(pid: int) -> list[int]:
    """`pid` and its descendants, read off every process's parent in /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, queue = [], [pid]
    while queue:
        p = queue.pop()
        found.append(p)
        queue += children.get(p, [])
    return found


def _own_memory_kb(pid: int) -> int:
    for source, key in ((f"/proc/{pid}/smaps_rollup", "Pss:"), (f"/proc/{pid}/status", "VmRSS:")):
        try:
            for line in Path(source).read_text().splitlines():
                if line.startswith(key):
                    return int(line.split()[1])
        except OSError:
            pass
    return 0


def last_stages(log: Path) -> list[dict]:
    stages = []
    for line in log.read_text().splitlines():
        try:
            stages.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return [s for s in stages if isinstance(s, dict) and "stage" in s]


def run_all(folder: Path, results: Path, memory_mb: int, letters: list[str], loaded: bool = False) -> None:
    began = f"commit {head_commit()} and the working tree of {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    began += ", busy (two CPU-bound loops beside every run)" if loaded else ", alone"
    rows = []
    with tempfile.TemporaryDirectory() as scratch, busy(loaded):
        for letter, reference in REFERENCES.items():
            path = folder / f"asplos-2025-iopddl-{letter}.json.gz"
            if not path.exists() or letter not in letters:
                continue
            log = Path(scratch) / f"{letter}.log"
            command = [sys.executable, __file__, str(path), "--time-limit", str(reference.timeout), "--json",
                       "-o", str(Path(scratch) / f"{letter}.json")]
            run, ended, peak = watched(command, reference.timeout, memory_mb, log)
            rows.append({**table_row(letter, reference, run, ended, peak, last_stages(log)),
                         "load": f"{os.getloadavg()[0]:.1f}"})
            print(" | ".join(str(cell) for cell in rows[-1].values()), flush=True)
            if ended != "finished":  # the run's own words (a traceback) go with the scratch folder otherwise
                print(f"{letter}: {ended}; its stderr ends:", *said(log)[-40:], sep="\n", file=sys.stderr, flush=True)
    write_results(results, rows, memory_mb, began)


def said(log: Path) -> list[str]:
    """What a run wrote on stderr besides its stage lines."""
    return [line for line in log.read_text(errors="replace").splitlines() if not line.startswith('{"stage"')]


def gap(cost: int, reference: int) -> str:
    return f"{100 * (cost - reference) / reference:+.2f}%"


def table_row(letter: str, reference: Reference, run: dict | None, ended: str, peak: int, stages: list[dict]) -> dict:
    reached = "; ".join(f"{s['stage']} {s['seconds']:.1f} s / {s['rss_mb']:,} MB" for s in stages)
    if run is None:
        return {"instance": letter, "cost": "-", "valid": "-", "gap to best known": "-", "gap to lower bound": "-",
                "x XLA": "-", "first valid s": "-", "wall s": "-", "max memory MB": f"{peak:,}",
                "run": f"{ended}; reached: {reached}"}
    usable = run["valid"] and not run["forbidden"]
    cost = run["cost"]
    return {"instance": letter, "cost": f"{cost:,}" if cost < 10**15 else f"{cost:.3g}",
            "valid": "yes" if usable else "no" + ("" if not run["forbidden"]
                                                  else f" ({run['forbidden']} forbidden pairs"
                                                   + (", usage within the limit)" if run["valid"] else ")")),
            "gap to best known": gap(cost, reference.best_known) if usable else "-",
            "gap to lower bound": gap(cost, reference.lower_bound) if usable else "-",
            "x XLA": f"{cost / reference.xla:.3f}" if usable and reference.xla else "-",
            "first valid s": "-" if run["first_valid_s"] is None else f"{run['first_valid_s']:.1f}",
            "wall s": f"{run['wall_s']:.1f}", "max memory MB": f"{max(run['rss_mb'], peak):,}",
            "run": f"{run['status']}, {run['rows']:,} rows, {run['groups']:,} groups{disagreement(run)}; "
                   f"reached: {reached}"}


def disagreement(run: dict) -> str:
    """What the solver's own figure says, where it differs from the evaluator's (it should never)."""
    return "" if run["solver_cost"] == run["cost"] else f"; the solver said {run['solver_cost']:,}"


def toulbar2_version() -> str:
    """The installed pytoulbar2's version, or that it is not installed (the start then is the Lagrangian's)."""
    try:
        return f"{metadata.version('pytoulbar2')} installed"
    except metadata.PackageNotFoundError:
        return "NOT installed (pip install 'ipuplan[toulbar2]')"


def write_results(results: Path, rows: list[dict], memory_mb: int, began: str) -> None:
    kept = ""
    if results.exists() and "\n## Notes" in results.read_text():
        kept = "\n## Notes" + results.read_text().split("\n## Notes", 1)[1]
    headers = list(rows[0]) if rows else []
    lines = [
        "# IOPDDL: the solver core on the contest's instances",
        "",
        (f"`benchmarks/iopddl.py --all` on {began}, {os.cpu_count()} cores: each instance in a fresh "
        "process with the contest's timeout for the whole run (read, build, solve, score, write), default settings "
        "(`workbench.iopddl.solve_instance`, what `ipuplan iopddl` runs: `solvers.solve`, its reduction within the "
        "timeout, then CP-SAT, objective `fit`, the default workers; where the whole model is too large, the start "
        f"from the penalised network, `solvers.wcsp`: toulbar2 {toulbar2_version()}). "
        "Cost and validity are the independent evaluator's "
        "(`workbench.iopddl.evaluate`). Gaps are to the published best known cost and lower bound; `x XLA` is the "
        f"cost over XLA's published score (below 1 beats it). `max memory` is the run's process and its workers' "
        "(toulbar2's forks) together, proportional set sizes summed, sampled every poll, or the process's own max RSS "
        f"where that is more. Runs passing {memory_mb:,} MB are ended "
        "(`run` says how far they got: each stage with seconds since the start and max RSS)."),
        "",
        "| " + " | ".join(headers) + " |",
        "|" + "---|" * len(headers),
        *("| " + " | ".join(str(row[h]) for h in headers) + " |" for row in rows),
        "",
    ]
    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text("\n".join(lines) + kept)
    print(f"wrote {results}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("instance", nargs="?", type=Path)
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds for the whole run (default 60)")
    parser.add_argument("-o", "--output", type=Path, help="write the solution here (a JSON list of strategy indices)")
    parser.add_argument("--json", action="store_true", help="print the run's figures as one JSON object")
    parser.add_argument("--all", type=Path, metavar="DIR", help="every contest instance in DIR, contest timeouts")
    parser.add_argument("--results", type=Path, help="default benchmarks/results/iopddl.md (iopddl-busy.md)")
    parser.add_argument("--busy", action="store_true", help="with --all: two CPU-bound loops beside every run")
    parser.add_argument("--memory-limit", type=int, default=8192, help="MB of RSS at which --all ends a run")
    parser.add_argument("--only", nargs="+", default=list(REFERENCES), metavar="LETTER",
                        help="with --all: only these instances (default all six)")
    options = parser.parse_args()
    if options.all is not None:
        results = options.results or ROOT / "benchmarks" / "results" / f"iopddl{'-busy' if options.busy else ''}.md"
        run_all(options.all, results, options.memory_limit, options.only, options.busy)
        return
    if options.instance is None:
        parser.error("give an INSTANCE or --all DIR")
    from ipuplan.errors import IpuplanError

    try:
        run = solve_instance(options.instance, options.time_limit, options.output)
    except IpuplanError as error:
        print(error, file=sys.stderr)
        sys.exit(error.exit_code)
    print(json.dumps(run)) if options.json else print_run(run)


if __name__ == "__main__":
    main()
