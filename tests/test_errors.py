"""The typed errors (`errors`): each names where it happened in one line (the file, the place in it), and carries the
exit code and status the CLI reports it by."""

from __future__ import annotations

import pytest

from ipuplan.errors import (
    BudgetError,
    InfeasibleBudget,
    IpuplanError,
    NoSolutionInTime,
    OutputError,
    PlanError,
    SyntaxProblem,
)


def test_a_plan_error_names_its_file_and_its_place_in_it():
    assert str(PlanError("bad layout", location="timeline.values[12].layout", source="a.json")) == (
        "a.json: timeline.values[12].layout: bad layout")
    assert str(PlanError("invalid JSON")) == "<plan>: invalid JSON"  # in memory, nowhere in particular


def test_an_error_raised_about_a_plan_in_memory_is_placed_in_the_file_it_came_from():
    inner = PlanError("bad layout", location="layout")
    placed = inner.at(source="a.json", prefix="timeline.values[12].")
    assert str(placed) == "a.json: timeline.values[12].layout: bad layout"
    assert (inner.source, inner.location) == ("<plan>", "layout")  # a new error: the one raised is as it was
    named = PlanError("cannot read", source="pins.json")
    assert named.at(source="a.json").source == "pins.json"  # one that names its file already keeps it


def test_a_syntax_problem_says_where_in_the_string_when_it_knows():
    assert str(SyntaxProblem("expected a name", 6)) == "expected a name at character 6"
    assert SyntaxProblem("expected a name", 6).offset == 6
    assert str(SyntaxProblem("nested too deep")) == "nested too deep" and isinstance(SyntaxProblem("x"), ValueError)


def test_a_failed_write_names_the_file_and_that_nothing_was_left():
    error = OutputError("/tmp/out.json", "No space left on device")
    assert str(error) == "/tmp/out.json: cannot write: No space left on device (nothing written)"
    assert (error.path, error.exit_code) == ("/tmp/out.json", 2)


@pytest.mark.parametrize(
    ("error", "kinds", "code", "status"),
    [
        (PlanError("x"), (IpuplanError,), 2, None),
        (BudgetError("x"), (PlanError, ValueError), 2, None),
        (OutputError("o.json", "x"), (IpuplanError,), 2, None),
        (InfeasibleBudget("x"), (IpuplanError,), 3, "infeasible"),
        (NoSolutionInTime("x"), (InfeasibleBudget,), 3, "no_solution"),  # not a proof: its own status
    ],
)
def test_each_error_has_the_exit_code_and_status_it_is_reported_by(error, kinds, code, status):
    assert isinstance(error, kinds) and error.exit_code == code
    assert getattr(error, "status", None) == status
