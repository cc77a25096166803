"""`ipuplan iopddl`: the one run `benchmarks/iopddl.py` measures (`workbench.iopddl.solve_instance`), as a command:
the solution written only when the contest's evaluator finds it valid, exit 3 and nothing written otherwise, Ctrl-C
one line (issue 36, item 5)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import numpy as np
from test_iopddl import CHAIN, CHAIN_OPTIMUM, document
from typer.testing import CliRunner

from ipuplan.cli import app
from ipuplan.workbench.iopddl import instance_of, solve_instance

runner = CliRunner()


def test_the_chain_is_solved_written_and_scored_by_the_contests_definition(tmp_path):
    instance, solution = tmp_path / "chain.json", tmp_path / "chain.solution.json"
    instance.write_text(json.dumps(CHAIN))
    result = runner.invoke(app, ["iopddl", str(instance), "-o", str(solution), "--json", "--time-limit", "10"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["status"], summary["cost"], summary["valid"], summary["forbidden"]) == ("solved", CHAIN_OPTIMUM,
                                                                                            True, 0)
    assert json.loads(solution.read_text()) == [1, 1, 1]


def test_a_limit_no_solution_meets_is_exit_3_and_nothing_written(tmp_path):
    instance, solution = tmp_path / "unmeetable.json", tmp_path / "solution.json"
    instance.write_text(json.dumps(document([(0, 5), (2, 9)], [(5, 1), (2, 3)], [(40, 60), (50, 10)], limit=12)))
    result = runner.invoke(app, ["iopddl", str(instance), "-o", str(solution), "--time-limit", "10"])
    assert result.exit_code == 3 and not solution.exists()
    assert result.stderr.splitlines()[-1].startswith("no solution meets the usage limit (proven)")


def test_the_run_keeps_to_its_deadline_reading_included():
    started = time.perf_counter()
    run = solve_instance(instance_of(CHAIN), 5.0, started=started - 2.0)  # 2 s already spent reading
    assert run.solved and run.evaluation.cost == CHAIN_OPTIMUM and run.seconds < 3.5


def _large_document(nodes: int = 3000, strategies: int = 6, seed: int = 5) -> dict:
    """Long enough to solve that a Ctrl-C lands in the solver (edges between neighbours, a limit at mid usage)."""
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, 1000, nodes)
    intervals = [(int(s), int(s + rng.integers(1, 200))) for s in starts]
    costs = rng.integers(0, 100, (nodes, strategies)).tolist()
    usages = rng.integers(1, 100, (nodes, strategies)).tolist()
    edges = [((k, k + 1), rng.integers(0, 50, strategies * strategies).tolist()) for k in range(nodes - 1)]
    return document(intervals, costs, usages, edges, limit=6000)


def test_ctrl_c_while_solving_is_one_line_exit_130_and_nothing_written(tmp_path):
    """It gave exit 0 and "feasible" with no word of the interrupt."""
    instance, solution = tmp_path / "large.json", tmp_path / "solution.json"
    instance.write_text(json.dumps(_large_document()))
    process = subprocess.Popen([sys.executable, "-m", "ipuplan", "iopddl", str(instance), "-o", str(solution),
                                "--time-limit", "120"], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    for line in process.stderr:
        if line.split()[:2] == ["problem", "built"]:
            break
    time.sleep(0.3)
    process.send_signal(signal.SIGINT)
    rest = process.stderr.read()
    assert process.wait(timeout=60) == 130, rest
    lines = [line for line in rest.splitlines() if not line.startswith("  ")]
    assert lines == ["interrupted: nothing written"] and "Traceback" not in rest
    assert not solution.exists()
