"""The facts of one plan, inferred once (`facts.plan_facts`): every Gemm is a family or rejected with its reason,
the budgets given change the estimate and nothing inferred before it, and the element-wise families are inferred
on first use only, once; a rewrite's facts read the input's where nothing they read changed."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from reference import with_step, with_value

from ipuplan.facts import plan_facts as plan_facts_module
from ipuplan.facts.dataflow import dataflow
from ipuplan.facts.elementwise_families import recognise_elementwise, relaid_elementwise
from ipuplan.facts.liveness import liveness
from ipuplan.facts.plan_facts import plan_facts, rewritten_facts
from ipuplan.plan.budgets import Budgets
from ipuplan.plan.layout import format_layout
from ipuplan.replan.gathers import with_gathers
from ipuplan.replan.rewrite import apply_choice, with_derived_fields
from ipuplan.space.scopes import candidate_space


def test_every_gemm_is_a_family_or_rejected_with_its_reason(reference_plan, facts):
    gemms = sorted(step.index for step in reference_plan.steps if step.parsed_operation.kind == "Gemm")
    rejected = [step for step, _ in facts.rejected_families]
    assert sorted([family.gemm_step for family in facts.families] + rejected) == gemms
    assert all(reason for _, reason in facts.rejected_families)
    assert {family.gemm_step for family in facts.attention} <= set(rejected)  # attention products are no family


def test_budgets_given_change_the_estimate_and_nothing_inferred_before_it(reference_plan, facts):
    tight = Budgets(300_000, 200_000, reference_plan.support_reserve_bytes)
    under = plan_facts(reference_plan, tight)
    assert (facts.budgets, under.budgets) == (Budgets.of(reference_plan), tight)
    assert facts.estimate.fits_budget and not under.estimate.fits_budget
    assert under.estimate.raw_peak == facts.estimate.raw_peak  # the bytes do not hang on the budgets
    assert (under.live, under.flow, under.families, under.attention) == (facts.live, facts.flow, facts.families,
                                                                         facts.attention)


def test_the_elementwise_families_are_inferred_on_first_use_once(reference_plan, monkeypatch):
    calls = []

    def counted(plan, flow):
        calls.append(plan)
        return recognise_elementwise(plan, flow)

    monkeypatch.setattr(plan_facts_module, "recognise_elementwise", counted)
    fresh = plan_facts(reference_plan)
    assert calls == []
    first = fresh.elementwise
    assert fresh.elementwise is first and len(calls) == 1
    assert first == recognise_elementwise(reference_plan, fresh.flow)


def _applied(facts, space, pick: str):
    choice = tuple(1 if pick == "second" else len(g.candidates) - 1 for g in space.free)
    return with_gathers(apply_choice(facts.plan, space, choice), space, choice, facts.live.born_at)


@pytest.mark.parametrize("scope", ["storage", "kernels", "full", "program"])
@pytest.mark.parametrize("pick", ["second", "last"])
def test_a_rewrites_facts_are_its_own_and_reuse_the_inputs_dataflow_where_nothing_it_read_changed(facts, scope, pick):
    space = candidate_space(facts, scope)
    applied = _applied(facts, space, pick)
    reused, fresh = rewritten_facts(facts, applied), plan_facts(applied)
    assert (reused.live, reused.flow, reused.families, reused.attention, reused.estimate) == (
        fresh.live, fresh.flow, fresh.families, fresh.attention, fresh.estimate)
    inserted = len(applied.steps) > len(facts.plan.steps)
    assert (reused.flow.steps is facts.flow.steps) is not inserted  # a gather's step is read afresh
    assert (reused.live is facts.live) is not inserted


def test_a_shape_no_rule_of_shapes_read_keeps_every_steps_flow(reference_plan, facts):
    unread = [v.id for v in reference_plan.values if v.id not in facts.flow.formed and len(v.shape) > 1][:5]
    assert unread
    for value in unread:
        changed = with_value(reference_plan, value, shape=[7, *reference_plan.values[value].shape[1:]])
        assert rewritten_facts(facts, changed).flow.steps is facts.flow.steps
        assert rewritten_facts(facts, changed).flow == dataflow(changed)


@pytest.mark.parametrize("change", ["formed shape", "name", "operation kind", "live set"])
def test_a_rewrite_that_changes_what_the_rules_read_is_inferred_afresh(reference_plan, facts, change):
    value = min(facts.flow.formed)
    copy_step = next(s.index for s in reference_plan.steps if s.parsed_operation.kind == "Copy")
    changed = {
        "formed shape": lambda: with_value(reference_plan, value, shape=[7, *reference_plan.values[value].shape[1:]]),
        "name": lambda: with_value(reference_plan, value, name="renamed"),
        "operation kind": lambda: with_step(reference_plan, copy_step, operation="Repeat"),
        "live set": lambda: with_step(reference_plan, copy_step, live=list(reference_plan.steps[copy_step].live[1:])),
    }[change]()
    rewritten = rewritten_facts(facts, changed)
    assert rewritten.flow.steps is not facts.flow.steps
    assert rewritten.flow == dataflow(changed, liveness(changed))


@pytest.mark.parametrize("scope", ["storage", "kernels", "full", "program"])
def test_a_rewrites_elementwise_families_are_those_found_afresh(facts, scope):
    """Choices at random in every scope (the space reads the input's families first, as a run does), the plan as
    rewritten and with its derived numbers written, as the re-check reads it."""
    space = candidate_space(facts, scope)
    rng = random.Random(scope)
    for _ in range(10):
        choice = tuple(rng.randrange(len(group.candidates)) for group in space.free)
        applied = with_gathers(apply_choice(facts.plan, space, choice), space, choice, facts.live.born_at)
        reused = rewritten_facts(facts, applied)
        derived = replace(reused, plan=with_derived_fields(applied, reused.estimate))
        assert reused.rewritten_from is not None
        assert reused.elementwise == derived.elementwise == plan_facts(applied).elementwise


def test_a_rewrites_elementwise_families_are_found_from_the_inputs_where_its_dataflow_is_the_inputs(
        reference_plan, monkeypatch):
    """Only once the input's are found, and only under the input's very dataflow (a live set changed has it found
    afresh)."""
    calls = []

    def counted(before, families, plan, flow):
        calls.append(plan)
        return relaid_elementwise(before, families, plan, flow)

    monkeypatch.setattr(plan_facts_module, "relaid_elementwise", counted)
    fresh = plan_facts(reference_plan)
    moved = format_layout(reference_plan.values[2].parsed_layout.with_tiling((2,), (1,), 728))
    changed = with_value(reference_plan, 2, layout=moved)
    assert rewritten_facts(fresh, changed).rewritten_from is None  # the input's not found: nothing to reuse
    fresh.elementwise  # noqa: B018 - found now
    relaid = rewritten_facts(fresh, changed)
    assert relaid.elementwise == plan_facts(changed).elementwise and calls == [changed]
    relived = with_step(reference_plan, 0, live=list(reference_plan.steps[0].live[1:]))
    assert rewritten_facts(fresh, relived).elementwise == plan_facts(relived).elementwise
    assert calls == [changed]
