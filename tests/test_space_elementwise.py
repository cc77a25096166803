"""Freedom level `elementwise` (space/levels/elementwise.py), registered here by the test for scope full just before
the classes level: what it decides alone on the reference plan, that every candidate keeps the family rule and is
legal when written, and the peak the reference plan reaches with it."""

from __future__ import annotations

from collections import Counter

import pytest

from ipuplan.facts.check import check
from ipuplan.facts.elementwise_families import (
    Role,
    broadcast_problem,
    dimension_tiling,
    recognise_elementwise,
)
from ipuplan.facts.plan_facts import plan_facts
from ipuplan.plan.layout import STANDARD
from ipuplan.replan.against import against
from ipuplan.replan.pipeline import optimize
from ipuplan.replan.rewrite import rewrite
from ipuplan.space import scopes
from ipuplan.space.levels import elementwise
from ipuplan.space.levels.elementwise import elementwise_level, promote
from ipuplan.space.rules import context_of
from ipuplan.space.scopes import Scope, candidate_space

ISSUE_FIGURE = 136_714
"""Issue 19: a legal plan at this raw peak exists with the residual stream, biases and bias Adds re-tiled."""
FREE_FAMILIES = {
    (2, 3, 14, 15, 26, 27, 45, 46, 47, 48, 54, 60, 79, 80, 81, 94, 95, 96, 97),  # residual stream, its biases
    (10, 11, 52, 66, 67),  # qkv bias Add
    (22, 23, 58, 87, 88),  # MLP up bias Add
    (32, 103, 104),  # MAP head key/value bias Add
    (36, 118, 119),  # MAP head output bias Add, flat
    (40, 125, 126, 127),  # MAP head MLP up bias Add and Gelu, flat
}


def test_the_level_is_registered_for_scope_full_only_before_the_classes_level():
    names = [level.name for level in scopes.levels_of(Scope.FULL)]
    assert names.index("elementwise") < names.index(scopes.CLASSES)
    assert "elementwise" not in [level.name for level in scopes.levels_of(Scope.KERNELS)]


@pytest.fixture()
def registered():
    """The registry as it is (the fixture keeps the tests' names for what they need)."""


@pytest.fixture()
def capped(monkeypatch, registered):
    """At most 2 splits kept per family: the residual stream's front (4 splits besides the input's) is cut."""
    monkeypatch.setattr(elementwise, "MAX_SPLITS", 2)


@pytest.fixture(scope="module")
def alone(facts):
    """What the level decides when it is given every group of the reference plan."""
    context = context_of(facts)
    return elementwise_level(context, context.groups)


@pytest.fixture(scope="module")
def optimized(reference_plan):
    return optimize(reference_plan, scope="full", workers=1, time_limit=30)


def test_alone_it_frees_every_family_that_can_change_and_freezes_nothing(alone):
    assert {group.members for group in alone.free} == FREE_FAMILIES
    assert alone.frozen == ()
    assert {group.kind for group in alone.free} == {"elementwise"}


def test_the_input_comes_first(facts, alone):
    values = facts.plan.values
    for group in alone.free:
        own = group.candidates[group.input_index]
        assert group.input_index == 0
        assert own.layouts == tuple(values[m].parsed_layout for m in group.members)
        assert own.value_bytes == tuple(facts.estimate.values[m] for m in group.members)


def test_every_candidate_keeps_the_family_rule(facts, alone):
    """Full-shape members tiled alike, each parameter cut and placed beside them, classes kept, within the chip."""
    values = facts.plan.values
    families = {family.members: family for family in recognise_elementwise(facts.plan, facts.flow)}
    for group in alone.free:
        family = families[group.members]
        shape = family.shape
        for candidate in group.candidates:
            layouts = dict(zip(group.members, candidate.layouts))
            template = layouts[family.template]
            full = {dimension_tiling(shape, layouts[m]) for m in group.members if family.roles[m] is not Role.PARAMETER}
            assert full == {dimension_tiling(shape, template)}, candidate.label
            for m in family.parameters:
                assert broadcast_problem(tuple(values[m].shape), layouts[m], shape, template) is None, (
                    m, candidate.label)
            assert all(layout.memory_class == values[m].memory_class for m, layout in layouts.items())
            assert all(layout.tile_count <= facts.plan.tile_count for layout in candidate.layouts)
        assert len({candidate.layouts for candidate in group.candidates}) == len(group.candidates)


def test_the_bias_adds_can_shrink_their_biases_to_a_few_bytes_per_tile(facts, alone):
    """At the peak every bias is replicated on every tile holding its activation: cut finer over N, it shrinks."""
    smallest = {}
    for group in alone.free:
        for position, m in enumerate(group.members):
            smallest[m] = min(candidate.value_bytes[position].bytes for candidate in group.candidates)
    assert {m: facts.estimate.values[m].bytes for m in (10, 22, 32)} == {10: 3456, 22: 4304, 32: 2304}
    assert all(smallest[m] <= 8 for m in (2, 10, 11, 14, 15, 22, 23, 26, 27, 32, 36, 40))


def test_held_and_unchangeable_families_are_left_to_the_classes_level(registered, facts):
    """A LayerNorm's scales keep their tiling (rows whole, the input is the only split), the softmax scores are
    held (their shape changes): the classes level still moves them between classes."""
    space = candidate_space(facts, "full")
    kind = {m: group.kind for group in space.free for m in group.members}
    assert {kind[m] for m in (4, 5, 49, 28, 143, 144)} == {"class"}
    assert {kind[m] for family in FREE_FAMILIES for m in family} == {"elementwise"}
    counts = Counter(m for group in (*space.free, *space.frozen) for m in group.members)
    assert counts == Counter(range(len(facts.plan.values)))


def test_a_pinned_member_keeps_its_whole_family(registered, facts):
    """Pin the attention output bias (value 14): the residual stream cannot be re-cut without re-cutting it, so the
    family is left as it is; the other families still change."""
    space = candidate_space(facts, "full", pinned=frozenset({14}))
    families = {group.members for group in space.free if group.kind == "elementwise"}
    assert families == {family for family in FREE_FAMILIES if 45 not in family}


@pytest.mark.parametrize("scope", ["storage", "kernels"])
def test_it_decides_in_scope_full_only(registered, facts, scope):
    assert "elementwise" not in {group.kind for group in candidate_space(facts, scope).free}


def test_every_candidate_is_legal_when_written(registered, facts):
    """The k-th candidate of every family at once (its last, for a family with fewer), the rest as in the input:
    `rewrite` re-checks the written plan and the output contract, and raises if either fails."""
    space = candidate_space(facts, "full")
    counts = [len(group.candidates) if group.kind == "elementwise" else 1 for group in space.free]
    for k in range(1, max(counts)):
        choice = tuple(min(k, count - 1) if group.kind == "elementwise" else group.input_index
                       for group, count in zip(space.free, counts))
        written = rewrite(facts, space, choice, facts.budgets).plan
        assert check(written) == []


def test_optimize_reaches_the_issue_figure_with_a_legal_plan(reference_plan, optimized):
    assert optimized.before.raw_peak == 367_216
    assert optimized.after.raw_peak <= ISSUE_FIGURE
    assert optimized.after.raw_peak == optimized.bound == 136_712
    assert optimized.status.value == "optimal"
    assert check(optimized.plan) == []
    assert against(reference_plan, optimized.plan, "full") == []


def test_the_written_plan_keeps_the_rule_and_the_bias_bytes_are_gone(reference_plan, optimized):
    """Recognised again in the output, every family has the same kernels and members and none is newly held; the
    biases at the peak are a few bytes per tile (22,576 bytes of them in the input's peak)."""
    before = recognise_elementwise(reference_plan, plan_facts(reference_plan).flow)
    after = recognise_elementwise(optimized.plan, optimized.facts.flow)
    assert [(f.members, f.hold is None) for f in after] == [(f.members, f.hold is None) for f in before]
    estimate = optimized.after
    peak = estimate.total_peak_step
    biases = (10, 11, 14, 15, 22, 23, 26, 27, 32, 36, 40)
    assert sum(estimate.values[m].bytes for m in biases if m in optimized.plan.steps[peak].live) <= 8 * len(biases)
    assert {optimized.plan.values[m].memory_class for m in biases} == {STANDARD}


def test_a_cap_carries_the_splits_it_leaves_out_by_the_bytes_their_candidates_have(capped, facts):
    context = context_of(facts)
    (residual,) = [g for g in elementwise_level(context, context.groups).free if 45 in g.members]
    left_out = residual.left_out
    assert len(residual.candidates) == 3 and left_out.count == 2
    made = promote(context, residual.members, left_out.choices)
    assert [c.label for c in made] != [c.label for c in residual.candidates[1:]]
    for row, candidate in enumerate(made):
        assert left_out.bytes[row].tolist() == [size.bytes for size in candidate.value_bytes]
        assert {(step, int(s[row]), int(i[row])) for step, s, i in left_out.scratch} == set(candidate.scratch)


def test_a_cap_does_not_cost_the_peak_or_the_claim(capped, reference_plan):
    result = optimize(reference_plan, scope="full", workers=1, time_limit=30)
    assert (result.after.raw_peak, result.status.value) == (136_712, "optimal")
    assert check(result.plan) == []
