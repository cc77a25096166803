"""Rust-Debug syntax (plan/debug_syntax.py), the grammar every layout, operation and precision string is written
in: the strings of models/ and random terms print and parse back unchanged, malformed text and nesting past the
limit are a `SyntaxProblem`."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from reference import ALL_PLANS

from ipuplan import load_plan
from ipuplan.errors import SyntaxProblem
from ipuplan.plan.debug_syntax import (
    MAX_NESTING,
    Atom,
    Call,
    ListTerm,
    Struct,
    format_term,
    format_terms,
    parse_term,
    parse_terms,
)
from ipuplan.plan.operation import parse_operation


def _strings(path):
    plan = load_plan(path)
    return plan, [v.layout for v in plan.values], [s.operation for s in plan.steps]


@pytest.mark.parametrize("path", ALL_PLANS, ids=lambda p: p.name)
def test_every_operation_and_precision_round_trips(path):
    plan, _, operations = _strings(path)
    for text in operations + [v.precision for v in plan.values]:
        assert format_terms(parse_terms(text)) == text
        assert parse_operation(text).text == text


@pytest.mark.parametrize(
    "text",
    ["", "Gemm {", "Gemm { a: 1,}", "Some(", "[1, 2", "A  B", "x: 1", "Gemm { a 1 }", "(1)", "Layout { a: 1 } }"],
)
def test_malformed_strings_raise(text):
    with pytest.raises(SyntaxProblem):
        parse_terms(text)


@pytest.mark.parametrize("depth", [MAX_NESTING + 1, 5000])
def test_nesting_past_the_limit_is_a_syntax_problem_not_a_recursion_error(depth):
    with pytest.raises(SyntaxProblem, match=f"nested more than {MAX_NESTING} levels deep"):
        parse_term("Some(" * (depth - 1) + "X" + ")" * (depth - 1))
    assert parse_term("[" * (MAX_NESTING - 1) + "]" * (MAX_NESTING - 1)) is not None  # up to the limit: read


names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True)
atoms = st.one_of(names, st.integers(-(10**12), 10**12).map(str)).map(Atom)
terms = st.recursive(
    atoms,
    lambda inner: st.one_of(
        st.builds(lambda n, f: Struct(n, tuple(f)), names, st.lists(st.tuples(names, inner), max_size=4)),
        st.builds(lambda n, a: Call(n, tuple(a)), names, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda items: ListTerm(tuple(items)), st.lists(inner, max_size=4)),
    ),
    max_leaves=25,
)


@given(terms)
def test_print_then_parse_is_identity(term):
    assert parse_term(format_term(term)) == term


@given(st.lists(terms, min_size=1, max_size=4))
def test_sequences_round_trip(sequence):
    text = format_terms(tuple(sequence))
    assert format_terms(parse_terms(text)) == text
