from __future__ import annotations

import pytest

from ipuplan import PlanError, dump_plan
from ipuplan.facts.check import check
from ipuplan.facts.dataflow import dataflow
from ipuplan.facts.estimate import estimate
from ipuplan.workbench.synth import MAX_VALUES, repeat_layers, unroll, with_budget_factor


def test_identity_cases_are_byte_identical(reference_plan):
    assert dump_plan(repeat_layers(reference_plan, 2)) == dump_plan(reference_plan)
    assert dump_plan(unroll(reference_plan, 1)) == dump_plan(reference_plan)


def test_more_layers_are_consistent_and_bound(reference_plan):
    deeper = repeat_layers(reference_plan, 6)
    assert check(deeper) == []
    assert len(deeper.values) == 176 + 4 * 12
    assert "Repeat 6 boundary" in {s.operation for s in deeper.steps}
    assert {s.execution_count for s in deeper.steps} == {1, 6}
    flow = dataflow(deeper)
    assert len(flow.bindings[51]) == 6
    assert deeper.values[flow.bindings[51][-1]].name == "vit.encoder.layer5.attention.qkv.weight"
    assert estimate(deeper).raw_peak > estimate(reference_plan).raw_peak


def test_unrolled_copies_are_consistent_with_their_own_dataflow(reference_plan):
    unrolled = unroll(reference_plan, 3)
    assert check(unrolled) == []
    assert (len(unrolled.values), len(unrolled.steps)) == (3 * 176, 3 * 116)
    flow = dataflow(unrolled)
    assert len(flow.ambiguities) == 3 * len(dataflow(reference_plan).ambiguities)
    assert len(flow.inputs) == 3 * 43
    copy_one_qkv = 176 + 51
    assert flow.steps[116 + 11].reads == (copy_one_qkv,)


def test_budget_factor(reference_plan):
    loose = with_budget_factor(reference_plan, 2.0)
    assert loose.budget_bytes == 2 * reference_plan.budget_bytes
    assert check(loose) == []


def test_bad_requests(reference_plan):
    with pytest.raises(PlanError, match="already has 2 layers"):
        repeat_layers(reference_plan, 1)
    with pytest.raises(PlanError, match="at least 1"):
        unroll(reference_plan, 0)


def test_a_size_synth_cannot_hold_is_refused_before_it_is_built(reference_plan):
    copies = MAX_VALUES // len(reference_plan.values) + 1
    with pytest.raises(PlanError, match=f"{copies} unrolled copies would make a plan of {copies * 176:,} values"):
        unroll(reference_plan, copies)
    with pytest.raises(PlanError, match="10000000 layers would make a plan of .* values; synth makes at most"):
        repeat_layers(reference_plan, 10_000_000)
