"""The facts of one plan, inferred once (`facts.plan_facts`): every Gemm is a family or rejected with its reason,
the budgets given change the estimate and nothing inferred before it, and the element-wise families are inferred
on first use only, once."""

from __future__ import annotations

from ipuplan.facts import plan_facts as plan_facts_module
from ipuplan.facts.elementwise_families import recognise_elementwise
from ipuplan.facts.plan_facts import plan_facts
from ipuplan.plan.budgets import Budgets


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
