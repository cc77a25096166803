"""The text every command prints (`report.text`): families named by their kernels as one unit each, the JSON
summaries of `check` and `show` carrying the plan's own figures, and one graph line per step before its families."""

from __future__ import annotations

from collections import Counter

from reference import with_value

from ipuplan.facts.check import check
from ipuplan.facts.estimate import estimate
from ipuplan.facts.plan_exchange import plan_exchange
from ipuplan.report.text import (
    check_summary,
    exchange_summary,
    family_units,
    graph_lines,
    kernel_words,
    show_summary,
    unit_of,
    unpriced_words,
)


def test_kernels_are_named_by_kind_in_order_of_their_first_step():
    words = kernel_words([(108, "Gelu"), (6, "Add"), (5, "Add"), (107, "Add")])
    assert words == "Add at steps 5, 6, 107; Gelu at step 108"
    assert kernel_words([(47, "Gemm")]) == "Gemm at step 47"


def test_every_family_a_level_re_lays_out_is_one_unit_each_member_in_one(facts):
    units = family_units(facts)
    loose = [family for family in facts.elementwise if family.hold is None]
    assert Counter(unit.space_kind for unit in units) == {"kernel": len(facts.families),
                                                          "attention": len(facts.attention),
                                                          "elementwise": len(loose)}
    members = [m for unit in units for m in unit.members]
    assert len(members) == len(set(members)) and set(unit_of(units)) == set(members)
    gemm = next(unit for unit in units if unit.space_kind == "kernel")
    assert gemm.label == f"Gemm family: {kernel_words(gemm.kernels)}" and facts.families[0].gemm_step in gemm.steps


def test_check_and_show_summaries_carry_the_plans_own_figures(reference_plan):
    exchange, estimated = plan_exchange(reference_plan), estimate(reference_plan)
    assert exchange_summary(exchange) | {"unpriced": None} == {
        "total": exchange.total, "movers": exchange.movers, "reductions": exchange.reductions, "unpriced": None,
        "inner_total": exchange.inner_total, "other_readings": []}
    consistent = check_summary("in.json", reference_plan, [], exchange, 1.23456)
    assert (consistent["status"], consistent["values"], consistent["steps"], consistent["seconds"]) == (
        "consistent", len(reference_plan.values), len(reference_plan.steps), 1.235)
    stored = reference_plan.values[20].bytes
    broken = with_value(reference_plan, 20, bytes=stored + 1)
    found = check_summary("in.json", broken, check(broken), exchange, 0.0)
    (mismatch,) = found["mismatches"]
    assert found["status"] == "mismatches" and mismatch["where"].startswith("value 20 ")
    assert (mismatch["field"], mismatch["stored"], mismatch["expected"]) == ("bytes", stored + 1, stored)
    shown = show_summary("in.json", reference_plan, estimated, exchange, top=3)
    assert (shown["raw_peak"], shown["total_peak_step"]) == (estimated.raw_peak, estimated.total_peak_step)
    sizes = [c["bytes"] for c in shown["contributors"]]
    assert len(sizes) == 3 and sizes == sorted(sizes, reverse=True)


def test_the_graph_is_a_line_per_step_then_each_family(reference_plan, facts):
    lines = list(graph_lines(reference_plan, facts.flow))
    steps = lines[:len(reference_plan.steps)]
    assert [int(line.split()[0]) for line in steps] == [step.index for step in reference_plan.steps]
    rest = lines[len(reference_plan.steps):]
    assert sum(line.startswith("gemm family at step") for line in rest) == len(facts.flow.families)
    assert sum(line.startswith("element-wise family:") for line in rest) == len(facts.elementwise)
    assert all(line.startswith(("gemm family", "element-wise family", "ambiguous:")) for line in rest)


def test_an_exchange_that_prices_every_step_leaves_nothing_unpriced(reference_plan):
    assert unpriced_words(plan_exchange(reference_plan)) == "nothing"
