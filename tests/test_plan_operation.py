"""Operation strings (plan/operation.py): the typed view of the kinds ipuplan reasons about, and why a string it
cannot read is refused."""

from __future__ import annotations

import pytest

from ipuplan.errors import SyntaxProblem
from ipuplan.plan.operation import KNOWN_KINDS, operation_problem, parse_operation


def test_operation_kinds(reference_plan):
    gemm = reference_plan.steps[12].parsed_operation
    assert (gemm.kind, gemm.gemm_field("inner_block"), gemm.gemm_field("output_columns")) == ("Gemm", 288, 96)
    assert gemm.with_gemm_fields(inner_block=64).gemm_field("inner_block") == 64
    assert parse_operation("Repeat 2 boundary").kind == "Repeat"
    assert parse_operation("Convert LocalKernel").conversion == "LocalKernel"
    copy = reference_plan.steps[16].parsed_operation
    assert copy.is_mover and copy.copy_offsets == (0, 0, 0) and not copy.has_view
    assert reference_plan.steps[19].parsed_operation.has_view
    assert reference_plan.steps[13].parsed_operation.sum_axis == 0


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("Copy { mapping: CoordinateMapping { offsets: [], view: None }, reuse_local: true }", None),
        ("Sum { axis: 0 }", None),
        ("FancyFusedThing { lanes: 4 }", None),  # unknown but well-formed: kept verbatim, not refused
        ("Copy { reuse_local: true }", "Copy without mapping"),
        ("Copy { mapping: CoordinateMapping { view: None } }", "Copy mapping without offsets"),
        ("Sum { axis: x }", "Sum axis must be an integer, found 'x'"),
        ("Gemm { inner_block: 0, output_columns: 96 }",
         "Gemm inner_block and output_columns must be at least 1, found 0"),
    ],
)
def test_a_field_ipuplan_reads_missing_or_malformed_is_the_problem_named(text, problem):
    assert operation_problem(text) == problem


def test_malformed_text_is_a_syntax_problem_and_the_problem_the_loader_names():
    with pytest.raises(SyntaxProblem) as raised:
        parse_operation("Gemm {")
    assert operation_problem("Gemm {") == str(raised.value) != ""


def test_unknown_kinds_are_kept_but_not_known_and_only_copies_and_retiles_move_data(reference_plan):
    unknown = parse_operation("FancyFusedThing { lanes: 4 }")
    assert (unknown.kind, unknown.is_known, unknown.is_mover) == ("FancyFusedThing", False, False)
    assert {step.parsed_operation.kind for step in reference_plan.steps} <= KNOWN_KINDS
    assert [parse_operation(f"Convert {c}").is_mover for c in ("DirectRetile", "StageLogicalThenTransform",
                                                               "LocalKernel")] == [True, True, False]
    assert [parse_operation(kind).is_in_place for kind in ("Add", "Gelu", "Repeat 2 boundary", "LayerNorm")] == [
        True, True, True, False]


def test_gemm_fields_are_only_a_gemms(reference_plan):
    gemm = reference_plan.steps[12].parsed_operation
    assert gemm.gemm_numbers[:2] == (gemm.gemm_field("inner_block"), gemm.gemm_field("output_columns"))
    changed = gemm.with_gemm_fields(inner_block=64, output_columns=32)
    assert parse_operation(changed.text) == changed and changed.gemm_numbers[:2] == (64, 32)
    copy = reference_plan.steps[16].parsed_operation
    with pytest.raises(KeyError):
        copy.with_gemm_fields(inner_block=64)
    assert copy.gemm_numbers == () and copy.sum_axis is None
