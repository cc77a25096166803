"""Freedom level `attention` (space/levels/attention.py): each attention product of the reference plan re-split over
heads, M, N (and K) as one unit, its input split first, every split derivable; a product with no other legal split
frozen; the left-out splits made candidates (`promote`) as the level makes its own."""

from __future__ import annotations

from ipuplan.facts.attention_families import current_head_split, derive_attention
from ipuplan.space.levels import attention
from ipuplan.space.levels.gemm import MAX_SPLITS
from ipuplan.space.rules import context_of
from ipuplan.space.types import Freeze


def test_the_splits_of_each_product_begin_with_its_own_and_each_derives(reference_plan, facts):
    for family in facts.attention:
        search = attention.head_splits(facts, family)
        assert search.kept[0] == current_head_split(reference_plan, family)
        assert len(set(search.kept)) == len(search.kept) <= MAX_SPLITS
        for split in search.kept:
            derived = derive_attention(reference_plan, family, split)
            assert set(derived.layouts) == set(family.members)


def test_each_product_is_free_as_one_unit_or_frozen_when_it_has_no_other_split(reference_plan, facts):
    context = context_of(facts)
    decided = attention.attention_level(context, context.groups)
    splits = {family.members: len(attention.head_splits(facts, family).kept) for family in facts.attention}
    assert {group.members for group in decided.free} == {m for m, n in splits.items() if n > 1}
    for group in decided.free:
        assert group.kind == attention.KIND and group.input_index == 0
        assert group.input.layouts == tuple(reference_plan.values[m].parsed_layout for m in group.members)
        assert len(group.candidates) == splits[group.members]
    for group in decided.frozen:
        family = next(f for f in facts.attention if f.members == group.members)
        assert (group.reason.kind, group.reason.family_step) == (Freeze.NO_OTHER_SPLIT, family.gemm_step)
    assert {g.members for g in (*decided.free, *decided.frozen)} == set(splits)


def test_promoted_splits_are_the_candidates_the_level_makes_of_them(facts):
    context = context_of(facts)
    for group in attention.attention_level(context, context.groups).free:
        family = next(f for f in facts.attention if f.left in group.members)
        assert attention.promote(context, group.members, attention.head_splits(facts, family).kept) == group.candidates


def test_a_report_names_each_product_by_its_kernels(facts):
    named = attention.families(facts)
    assert [members for _, members in named] == [family.members for family in facts.attention]
    for (kernels, _), family in zip(named, facts.attention):
        assert kernels == ((family.gemm_step, "Gemm"),) + (((family.sum_step, "Sum"),) if family.reduces else ())
