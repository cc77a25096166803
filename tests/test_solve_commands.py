"""The commands that solve (`cli.solve_commands`): `optimize` writes a checked plan (never over a file without
--force, nor over its input without --in-place), its table or JSON summary, the model and the report it is asked for,
and exit 3 with nothing written when the budgets cannot be met; `sweep` the front as JSON and a report; `iopddl` the
contest's solution only when its evaluator finds it valid, and Ctrl-C as one line."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from reference import REFERENCE, anatomy_marks, entries, expected_marks, one_line_error, run
from test_iopddl import CHAIN, CHAIN_OPTIMUM, document
from typer.testing import CliRunner

from ipuplan import load_plan
from ipuplan.cli import app
from ipuplan.facts.check import check
from ipuplan.facts.plan_facts import plan_facts

runner = CliRunner()


def test_optimize_writes_a_checked_plan_and_json_summary(tmp_path):
    out = tmp_path / "better.json"
    result = runner.invoke(app, ["optimize", str(REFERENCE), "-o", str(out), "--workers", "1", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["input_raw_peak"] == 367_216
    assert summary["raw_peak"] == summary["bound"] <= 200_000
    assert summary["status"] == "optimal"
    assert runner.invoke(app, ["check", str(out)]).exit_code == 0
    # each stage's seconds, in the order the run took them
    assert list(summary["phase_seconds"]) == ["load", "analyse", "candidates", "problem", "solve", "exact exchange",
                                              "rewrite", "write"]
    # the plan's own name and the freedoms' scope under two names, no bare "scope" that could mean either
    assert (summary["plan_scope"], summary["freedom_scope"], "scope" in summary) == ("finalist-5", "full", False)


def test_optimize_table_and_progress(tmp_path):
    result = runner.invoke(app, ["optimize", str(REFERENCE), "-o", str(tmp_path / "o.json")])
    assert result.exit_code == 0
    assert "raw peak (std + il)" in result.stdout and "optimal" in result.stdout
    assert "objective" in result.stderr and "bound" in result.stderr


def test_optimize_never_overwrites_without_force(tmp_path):
    out = tmp_path / "o.json"
    out.write_text("precious")
    result = runner.invoke(app, ["optimize", str(REFERENCE), "-o", str(out)])
    assert result.exit_code == 2
    assert "already exists" in result.stderr
    assert out.read_text() == "precious"


def test_optimize_infeasible_exit_3_writes_nothing(tmp_path):
    out = tmp_path / "o.json"
    args = ["optimize", str(REFERENCE), "-o", str(out), "--budget", "200000", "--interleaved-budget", "100000",
            "--scope", "kernels"]
    result = runner.invoke(app, args)
    assert result.exit_code == 3
    assert "cannot be met at step" in result.stderr and "lowest raw peak" in result.stderr
    assert not out.exists()


def test_unknown_scope_is_a_clear_error(tmp_path):
    result = runner.invoke(app, ["optimize", str(REFERENCE), "-o", str(tmp_path / "o.json"), "--scope", "everything"])
    assert result.exit_code == 2
    assert "everything" in result.stderr and "storage" in result.stderr


def test_dump_model_writes_the_cp_sat_model(tmp_path):
    model = tmp_path / "model.pbtxt"
    result = runner.invoke(app, ["optimize", str(REFERENCE), "-o", str(tmp_path / "o.json"), "--dump-model",
                                 str(model)])
    assert result.exit_code == 0
    text = model.read_text()
    assert "variables" in text and "objective" in text
    assert "model variables / constraints" in result.stdout


def test_optimize_says_what_it_left_alone_and_why(tmp_path):
    table = runner.invoke(app, ["optimize", str(REFERENCE), "-o", str(tmp_path / "a.json"), "--scope", "storage"])
    assert "left alone (" in table.stdout and "values: read by Gemm" in table.stdout
    as_json = runner.invoke(app, ["optimize", str(REFERENCE), "-o", str(tmp_path / "b.json"), "--json",
                                  "--scope", "kernels"])
    frozen = json.loads(as_json.stdout)["frozen"]
    reasons = {v: entry["reason"] for entry in frozen for v in entry["values"]}
    assert reasons[4].startswith(("may be read by", "involved in an ambiguity"))
    assert 8 not in reasons  # a resident weight the optimiser is free to move


@pytest.mark.parametrize(
    ("change", "extra", "words"),
    [
        (lambda raw: raw.update(budget_bytes=0), [], ("bad.json: budget_bytes:", "(support_reserve_bytes)",
                                                      "(budget_bytes)")),
        (lambda raw: None, ["--budget", "0"], ("error: --budget:", "(support_reserve_bytes)", "(--budget)")),
        (lambda raw: raw.update(interleaved_budget_bytes=10**9), [], ("bad.json: budget_bytes:",
                                                                      "(interleaved_budget_bytes)")),
    ],
)
def test_a_budget_problem_names_the_file_and_field_or_the_option(tmp_path, change, extra, words):
    """Issue 21, item 12: `budget_bytes: 0` was 'support reserve 49,152 exceeds the budget 0', naming nothing."""
    raw = json.loads(REFERENCE.read_text())
    change(raw)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(raw))
    result = runner.invoke(app, ["optimize", str(bad), "-o", str(tmp_path / "o.json"), *extra])
    errors = [line for line in result.stderr.splitlines() if not line.startswith("  ")]  # not the progress lines
    assert result.exit_code == 2 and len(errors) == 1
    assert all(word in errors[0] for word in words), result.stderr


def test_the_input_is_overwritten_only_with_in_place(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_bytes(REFERENCE.read_bytes())
    for extra in ([], ["--force"]):
        code, _, stderr = run("optimize", str(plan), "-o", str(plan), *extra)
        assert code == 2
        one_line_error(stderr, "is an input of this run", "--in-place")
        assert plan.read_bytes() == REFERENCE.read_bytes()
    code, _, _ = run("optimize", str(plan), "--in-place", "--workers", "1", "--json")
    assert code == 0 and plan.read_bytes() != REFERENCE.read_bytes()
    assert check(load_plan(plan)) == [] and entries(tmp_path) == {"plan.json"}


def test_optimize_needs_an_output_or_in_place():
    code, _, stderr = run("optimize", str(REFERENCE))
    assert code == 2
    one_line_error(stderr, "-o OUTPUT", "--in-place")


def test_optimize_report_marks_the_free_values_of_the_runs_scope(tmp_path, facts, spaces):
    page = tmp_path / "storage.html"
    args = ["optimize", str(REFERENCE), "-o", str(tmp_path / "o.json"), "--scope", "storage", "--workers", "1",
            "--time-limit", "5", "--report", str(page)]
    assert runner.invoke(app, args).exit_code == 0
    text = page.read_text()
    step, marks = anatomy_marks(text)
    result = load_plan(tmp_path / "o.json")
    assert step == plan_facts(result).estimate.total_peak_step
    # value ids are the input's: the run's space (of the input) says which of those live here it could move
    assert marks == expected_marks(plan_facts(result), spaces["storage"], step)
    assert "free" in marks.values() and "frozen" in marks.values()
    assert "scope <b id='scope'>storage</b>" in text


def test_sweep_cli_json_and_report(tmp_path):
    page = tmp_path / "sweep.html"
    result = runner.invoke(app, ["sweep", str(REFERENCE), "--scope", "kernels", "--workers", "1", "--json",
                                 "--points", "3", "--report", str(page)])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["complete"] and 2 <= len(summary["points"]) <= 3
    text = page.read_text()
    assert '<svg id="front"' in text and text.count('class="point"') == len(summary["points"])


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


def test_a_plan_past_5000_values_is_optimised_by_the_program_with_its_checks_in_forked_copies(tmp_path):
    """The program in a process of its own (forks allowed) on the reference plan unrolled 29 times: 5,104 values,
    past `replan.pipeline.FORK_VALUES`, with the default workers (every core). It writes an optimal plan that is
    legal against its input (a run this size once raised TypeError before its first fork, exit 70)."""
    plan, out = tmp_path / "plan.json", tmp_path / "better.json"
    made = subprocess.run([sys.executable, "-m", "ipuplan", "synth", str(REFERENCE), "--unroll", "29", "-o", str(plan)],
                          capture_output=True, text=True, check=False)
    assert made.returncode == 0, made.stderr
    done = subprocess.run([sys.executable, "-m", "ipuplan", "optimize", str(plan), "-o", str(out), "--json"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert (len(load_plan(plan).values), json.loads(done.stdout)["status"]) == (5_104, "optimal")
    checked = subprocess.run([sys.executable, "-m", "ipuplan", "check", str(out), "--against", str(plan)],
                             capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
