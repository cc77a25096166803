"""Random damage to the reference plan: loading either succeeds or says where it failed, never crashes;
the CLI keeps its promises under damaged plans and bad output paths (tests/fuzz_cases.py). A long run
of the same properties: benchmarks/fuzz_cli.py."""

from __future__ import annotations

from pathlib import Path

from fuzz_cases import (
    COMMANDS,
    EXIT_CODES,
    OUTPUT_FAULTS,
    PATHS,
    TEXT,
    cli_case,
    damaged,
    documented_exit_codes,
    json_values,
    plan_texts,
    replaced,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ipuplan import PlanError, plan_from_json
from ipuplan.facts.check import check


def loads_or_says_where(text: str) -> None:
    try:
        plan = plan_from_json(text, source="fuzz.json")
    except PlanError as error:
        assert str(error).startswith("fuzz.json") and "\n" not in str(error)
        return
    check(plan)  # a plan that loads can always be checked


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(PATHS), json_values)
def test_any_replaced_field_loads_or_fails_with_a_location(path, value):
    loads_or_says_where(replaced(path, value))


@settings(max_examples=100, deadline=None)
@given(st.integers(0, len(TEXT) - 1), st.text(max_size=3))
def test_any_text_damage_loads_or_fails_with_a_location(position, insert):
    loads_or_says_where(damaged(position, insert))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan_texts, st.sampled_from(COMMANDS), st.sampled_from(OUTPUT_FAULTS))
def test_the_cli_keeps_its_promises(text, command, fault):
    cli_case(text, command, fault)


README = Path(__file__).resolve().parent.parent / "README.md"


def test_the_command_and_the_readme_promise_the_same_exit_codes():
    assert len(EXIT_CODES) > 1 and EXIT_CODES == documented_exit_codes(README.read_text())
