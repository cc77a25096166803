"""Paths of the committed plans, immutable one-field mutations of a plan, and the `ipuplan` command run on them: in
this process (`run`) or as a program (`PYTHON`), with the one error line it says, what it leaves in a folder and what
its HTML report marks free or frozen."""

from __future__ import annotations

import builtins
import re
import sys
from contextlib import redirect_stderr, redirect_stdout
from io import StringIO
from pathlib import Path

from ipuplan import Plan

MODELS = Path(__file__).resolve().parent.parent / "models"
REFERENCE = MODELS / "vit-so400m-finalist-5.json"
ALL_PLANS = sorted(MODELS.glob("*.json"))
CHIP6 = MODELS / "vit-so400m-6layers-chip.json"
"""Six layers on the real chip's budgets: scope storage cannot meet them, and a cap leaves its best Gemm splits out."""
PYTHON = [sys.executable, "-m", "ipuplan"]


def without_module(monkeypatch, prefix: str) -> None:
    """Imports of `prefix` (and its submodules) fail for the rest of the test, as on a machine without the package."""
    real = builtins.__import__

    def refused(name, *args, **kwargs):
        if name.startswith(prefix):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", refused)


def with_value(plan: Plan, value_id: int, **changes) -> Plan:
    values = list(plan.values)
    values[value_id] = values[value_id].model_copy(update=changes)
    return plan.model_copy(update={"timeline": plan.timeline.model_copy(update={"values": values})})


def with_step(plan: Plan, index: int, **changes) -> Plan:
    steps = list(plan.steps)
    steps[index] = steps[index].model_copy(update=changes)
    return plan.model_copy(update={"timeline": plan.timeline.model_copy(update={"steps": steps})})


def run(*args: str) -> tuple[int, str, str]:
    """The real entry point in this process: exit code, stdout, stderr."""
    from ipuplan.cli import main  # the command's import (its signal machinery) only where a test runs it

    out, err = StringIO(), StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def one_line_error(stderr: str, *words: str) -> None:
    """One error line, last; anything before it is an indented progress line."""
    lines = [line for line in stderr.splitlines() if not line.startswith("  ")]
    assert len(lines) == 1 and lines[0].startswith("error: ") and stderr.splitlines()[-1] == lines[0], stderr
    assert all(word in lines[0] for word in words), lines[0]
    assert "Traceback" not in stderr


def error_line(stderr: str) -> str:
    """The one line that is not progress (progress lines are indented); no traceback."""
    lines = [line for line in stderr.splitlines() if not line.startswith("  ")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


def entries(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


def anatomy_marks(page: str) -> tuple[int, dict[int, str]]:
    """The page's peak step, and per value of its anatomy table: free or frozen."""
    step = int(re.search(r'<b id="peak-step">(\d+)</b>', page).group(1))
    table = page.split('<table id="anatomy">', 1)[1].split("</table>", 1)[0]
    marks = re.findall(r"<tr><td>(\d+)</td>.*?<td class='(free|frozen)'>", table)
    return step, {int(value): mark for value, mark in marks}


def expected_marks(facts, space, step: int) -> dict[int, str]:
    reasons = space.reasons()
    return {v: "free" if reasons[v] is None else "frozen" for v in facts.plan.steps[step].live}
