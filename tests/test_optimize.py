"""The optimiser on the reference plan: legal, optimal for its scope, minimal, deterministic."""

from __future__ import annotations

from dataclasses import replace

import pytest
from measures import unneeded_changes

from ipuplan import InfeasibleBudget, dump_plan
from ipuplan.facts.check import check
from ipuplan.facts.estimate import estimate
from ipuplan.model.exact import exact_problem
from ipuplan.plan.budgets import Budgets
from ipuplan.plan.layout import format_layout
from ipuplan.replan.against import against
from ipuplan.replan.pipeline import optimize
from ipuplan.replan.rewrite import IllegalRewrite, rewrite
from ipuplan.solvers import SolveStatus
from ipuplan.space.levels.storage_layouts import partition_vectors
from ipuplan.space.scopes import candidate_space


@pytest.fixture(scope="module")
def space(facts):
    return candidate_space(facts, "storage")


def test_emitted_plan_is_legal_and_consistent(reference_plan, storage_result):
    assert check(storage_result.plan) == []
    assert against(reference_plan, storage_result.plan, "full") == []


def test_peak_is_proven_optimal_for_the_scope_and_meets_target(storage_result):
    assert storage_result.status == SolveStatus.OPTIMAL
    assert storage_result.after.raw_peak == storage_result.solve.peak == storage_result.bound
    assert storage_result.after.raw_peak <= 200_000 < storage_result.before.raw_peak == 367_216
    assert storage_result.after.fits_budget


def test_solver_peak_equals_independent_estimate(storage_problem, storage_result):
    assert storage_problem.usage(storage_result.solve.choice).peak == estimate(storage_result.plan).raw_peak


def test_no_change_without_reason(storage_result):
    """No changed group could go back to its input layout at the same peak and no more exact exchange."""
    prepared = storage_result.prepared
    exact = exact_problem(prepared.facts, prepared.space, prepared.problem).problem
    assert storage_result.changes
    assert unneeded_changes(exact, storage_result.solve.choice) == []


def test_only_storage_values_change(reference_plan, space, storage_result):
    free = {m for g in space.free for m in g.members}
    assert {c.value_id for c in storage_result.changes} <= free
    changed_names = {c.name for c in storage_result.changes}
    assert "vit.encoder.layer1.mlp.up.weight" in changed_names
    for value in reference_plan.values:
        if value.id not in free:
            assert storage_result.plan.values[value.id].layout == value.layout


def test_bound_members_share_one_layout(space, storage_result):
    group = next(g for g in space.free if 51 in g.members)
    assert set(group.members) == {8, 9, 51}
    assert len({storage_result.plan.values[m].layout for m in group.members}) == 1


def test_candidates_are_distinct_shard_sizes_within_the_chip(reference_plan, space):
    """Apart from stride variants (label "strides": the same shard size, other strides), one candidate per size."""
    for group in space.free:
        sizes = [(c.layouts[0].memory_class, c.value_bytes[0].shard_bytes) for c in group.candidates[1:]
                 if c.label != "strides"]
        assert len(sizes) == len(set(sizes))
    weight = reference_plan.values[8]
    vectors = partition_vectors(tuple(weight.shape), weight.parsed_layout, reference_plan.tile_count)
    assert (1, 1) in vectors and (36, 4) in vectors and (216, 4) in vectors
    assert all(format_layout(g.candidates[0].layouts[0]) == reference_plan.values[g.members[0]].layout
               for g in space.free)
    assert all(p0 * p1 <= 1472 for p0, p1 in vectors)


def test_budget_rows_must_make_sense(reference_plan):
    with pytest.raises(ValueError, match="interleaved budget"):
        optimize(reference_plan, budget=420_000, time_limit=1)


def test_deterministic_mode_gives_identical_bytes(reference_plan, storage_result):
    again = optimize(reference_plan, workers=1, time_limit=10, scope="storage")
    assert dump_plan(again.plan) == dump_plan(storage_result.plan)


def test_never_worse_reoptimising_returns_input(storage_result):
    again = optimize(storage_result.plan, workers=1, time_limit=5, scope="storage")
    assert again.changes == ()
    assert dump_plan(again.plan) == dump_plan(storage_result.plan)
    assert "unchanged" in again.note


def test_infeasible_budget_names_budget_and_step(reference_plan):
    with pytest.raises(InfeasibleBudget) as caught:
        optimize(reference_plan, budget=230_000, interleaved_budget=100_000, workers=1, time_limit=5,
                 scope="storage")
    message = str(caught.value)
    assert "standard budget (130,000 bytes) cannot be met at step 45" in message
    assert "lowest raw peak any layout reaches within the interleaved budget is 176,740 bytes" in message


def test_overridden_budget_is_written_and_true(reference_plan):
    tight = optimize(reference_plan, budget=450_000, interleaved_budget=250_000, workers=1, time_limit=5)
    assert not tight.before.fits_budget
    assert (tight.plan.budget_bytes, tight.plan.interleaved_budget_bytes) == (450_000, 250_000)
    assert tight.plan.fits_budget
    assert check(tight.plan) == []


def test_rewrite_refuses_an_illegal_choice(reference_plan, facts, space):
    group = space.free[0]
    bogus = replace(group.candidates[1],
                    layouts=tuple(replace(x, tile_count=9999) for x in group.candidates[1].layouts))
    broken = replace(space, free=(replace(group, candidates=(group.candidates[0], bogus)),), frozen=())
    with pytest.raises(IllegalRewrite, match="fails its checks"):
        rewrite(facts, broken, (1,), Budgets.of(reference_plan))


def test_unknown_operation_is_kept_and_freezes_what_it_may_touch(reference_plan):
    strange = "FancyFusedThing { lanes: 4 }"
    plan = reference_plan.model_copy(update={"timeline": reference_plan.timeline.model_copy(update={
        "steps": [s.model_copy(update={"operation": strange}) if s.index == 41 else s for s in reference_plan.steps]})})
    result = optimize(plan, workers=1, time_limit=5)
    assert result.plan.steps[41].operation == strange
    reasons = {m: str(g.reason) for g in result.frozen for m in g.members}
    assert "an operation ipuplan does not know (FancyFusedThing)" in reasons[8]
    assert check(result.plan) == [] and result.after.raw_peak <= result.before.raw_peak


@pytest.mark.parametrize("forked", [False, True])
def test_structurally_inconsistent_input_is_refused_not_blamed_on_the_optimiser(reference_plan, monkeypatch, forked,
                                                                                forks_allowed):
    """Also where the check runs in a forked copy beside the candidate space (a large plan's, `forks`), and
    whatever the space then breaks on."""
    from reference import with_step

    from ipuplan.errors import PlanError
    from ipuplan.replan import pipeline

    if forked:
        monkeypatch.setattr(pipeline, "forks", lambda size, options: True)
    text = reference_plan.steps[12].operation.replace("inner_block: 288", "inner_block: 96")
    with pytest.raises(PlanError, match="input plan is inconsistent: step 12: Gemm family"):
        optimize(with_step(reference_plan, 12, operation=text), time_limit=2)
    if forked:
        monkeypatch.setattr(pipeline, "live_sets", lambda *_: 1 / 0)
        with pytest.raises(PlanError, match="input plan is inconsistent: step 12: Gemm family"):
            optimize(with_step(reference_plan, 12, operation=text), time_limit=2)


def test_stale_derived_numbers_are_simply_recomputed(reference_plan):
    from reference import with_value

    stale = with_value(reference_plan, 20, bytes=1)
    result = optimize(stale, workers=1, time_limit=5, scope="storage")
    assert check(result.plan) == [] and result.after.raw_peak == 176_740
