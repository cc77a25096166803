"""Element-wise families (facts/elementwise_families.py): which families the reference plan has, with which
members and roles, what holds the others, and that recognition reads the dataflow and layouts, not names."""

from __future__ import annotations

import random

import pytest
from reference import ALL_PLANS, REFERENCE, with_step, with_value

from ipuplan import load_plan
from ipuplan.facts.dataflow import dataflow
from ipuplan.facts.elementwise_families import (
    Hold,
    Role,
    broadcast_problem,
    recognise_elementwise,
    relaid_elementwise,
)
from ipuplan.plan.layout import format_layout

RESIDUAL_STREAM = (45, 46, 47, 48, 81, 96, 97)
"""The residual stream: value 45, its in-place versions (the embedding's Adds, the residual Adds, the loop's
result) and the body argument that stands for it in the loop."""


def families_of(plan):
    return recognise_elementwise(plan, dataflow(plan))


@pytest.fixture(scope="module")
def families(reference_plan):
    return {tuple(kernel.step for kernel in family.kernels): family for family in families_of(reference_plan)}


def test_the_reference_plan_has_these_families(families):
    assert sorted(families) == [(5, 6, 40, 41, 59, 60), (8, 43), (15,), (26,), (50,), (52,), (63,), (70,), (74,),
                                (84,), (97,), (99,), (101,), (107, 108), (113, 115)]


def test_the_residual_stream_is_one_family_with_its_biases_and_the_position_table(families):
    residual = families[(5, 6, 40, 41, 59, 60)]
    assert residual.hold is None
    assert set(residual.members) == {*RESIDUAL_STREAM, 2, 3, 14, 15, 26, 27, 54, 60, 79, 80, 94, 95}
    assert residual.parameters == (2, 14, 15, 26, 27, 54, 60)  # embedding, attention output and MLP down biases
    assert residual.roles[3] is Role.ACTIVATION  # the position table is full shape: added position by position
    assert {m for m, role in residual.roles.items() if role is Role.RESULT} == {46, 47, 80, 81, 95, 96}
    assert residual.shape == (1, 729, 1152) and residual.broadcast == frozenset({1})
    assert residual.carried_by == (61,)  # the loop's Repeat boundary only passes the stream's storage on
    assert not residual.rows_whole


@pytest.mark.parametrize(("steps", "bias", "activation", "result"), [
    ((15,), (10, 11, 52), 66, 67),  # qkv bias, read in the loop through its body argument
    ((50,), (22, 23, 58), 87, 88),  # MLP up bias
    ((70,), (32,), 103, 104),  # MAP head key/value bias
])
def test_each_bias_add_is_a_family_of_its_activation_and_bias(families, steps, bias, activation, result):
    family = families[steps]
    assert family.hold is None
    assert family.parameters == bias
    assert family.roles[activation] is Role.ACTIVATION and family.roles[result] is Role.RESULT


def test_a_loop_bias_the_dataflow_does_not_show_is_inferred_from_what_is_live(families):
    """A bias stays live through the loop, so it never dies at its Add: the body argument laid out beside the
    activation is the operand. Steps 40 and 59 could each read either output bias (54 or 60, alike) or the
    residual stream: all of them are members of the one family, so the family is the same whichever it is."""
    (kernel,) = families[(15,)].kernels
    assert (kernel.operands, kernel.possible, kernel.results) == ((66,), (52,), (67,))
    residual = {kernel.step: kernel for kernel in families[(5, 6, 40, 41, 59, 60)].kernels}
    assert residual[40].possible == residual[59].possible == (48, 54, 60)
    assert {m for m in residual[40].possible} <= set(families[(5, 6, 40, 41, 59, 60)].members)


def test_layer_norms_keep_rows_whole_and_their_scales_and_biases_are_broadcast_parameters(families):
    loop = families[(8, 43)]
    assert loop.hold is None and loop.rows_whole
    assert loop.parameters == (4, 5, 6, 7, 16, 17, 18, 19, 49, 50, 55, 56)
    assert {kernel.possible for kernel in loop.kernels} == {(49, 50, 55, 56)}
    assert families[(63,)].parameters == (28, 29) and families[(63,)].hold is None


@pytest.mark.parametrize(("steps", "rule", "step", "operation", "value"), [
    ((74,), Hold.OUTSIDE_WRITER, 73, "Sum", 106),  # a Gemm family's Sum writes the activation directly
    ((113, 115), Hold.OUTSIDE_WRITER, 112, "Sum", 130),
    ((26,), Hold.OPERAND_SHAPE, 26, "AttentionSoftmax", 143),  # scores [16,729,729] -> padded [16,729,784]
    ((84,), Hold.OPERAND_SHAPE, 84, "AttentionSoftmax", 164),
    ((99,), Hold.OPERAND_UNKNOWN, 99, "LayerNormMoments", None),  # reads nothing the dataflow shows
    ((101,), Hold.OPERAND_SHAPE, 101, "LayerNormApply", 173),  # moments [1,1,8,2] beside a row
])
def test_what_holds_a_family_names_the_kernel_and_the_rule(families, steps, rule, step, operation, value):
    hold = families[steps].hold
    assert (hold.rule, hold.step, hold.operation, hold.value) == (rule, step, operation, value)
    assert operation in str(hold) and rule.value in str(hold)


def test_every_bias_of_the_reference_plan_follows_the_rule(reference_plan, families):
    """REPLAN's example: value 10 is 2 partitions x 729 replicas beside its activation's 729 x 2 split."""
    values = reference_plan.values
    bias, activation = values[10].parsed_layout, values[66].parsed_layout
    assert (bias.axes[0].partitions, bias.replicas) == (2, 729)
    assert [axis.partitions for axis in activation.axes] == [729, 2]
    for family in families.values():
        if family.hold is None and family.parameters:
            template = values[family.template]
            for m in family.parameters:
                assert broadcast_problem(tuple(values[m].shape), values[m].parsed_layout, tuple(template.shape),
                                         template.parsed_layout) is None, m


def test_a_bias_off_its_activations_tiles_holds_the_family(reference_plan):
    """Value 2 one replica short: the tiles of the last M group lack it (its step shows the Add reading it)."""
    layout = reference_plan.values[2].parsed_layout
    moved = format_layout(layout.with_tiling((2,), (1,), 728))
    (residual,) = [f for f in families_of(with_value(reference_plan, 2, layout=moved)) if 5 in f.steps]
    hold = residual.hold
    assert (hold.rule, hold.step, hold.operation, hold.value) == (Hold.PARAMETER_PLACEMENT, 5, "Add", 2)
    assert "replicas" in hold.detail


def test_a_kernel_outside_the_family_reading_a_member_holds_it(reference_plan):
    """Step 42 retiles the stream for the MLP norm; were it a LocalKernel conversion, it would read 81 as laid out."""
    mutated = with_step(reference_plan, 42, operation="Convert LocalKernel")
    (residual,) = [f for f in families_of(mutated) if 5 in f.steps]
    hold = residual.hold
    assert (hold.rule, hold.step, hold.operation, hold.value) == (Hold.OUTSIDE_READER, 42, "Convert", 81)


def test_a_row_reducer_with_its_rows_split_holds_its_family(reference_plan):
    """The final LayerNorm's input and output cut over the row (N) as well: rows are no longer whole on a tile."""
    layout = reference_plan.values[98].parsed_layout
    split = format_layout(layout.with_tiling((729, 2), (2, 1), 1))
    mutated = with_value(with_value(reference_plan, 98, layout=split), 99, layout=split)
    (norm,) = [f for f in families_of(mutated) if 63 in f.steps]
    assert (norm.hold.rule, norm.hold.step, norm.hold.operation) == (Hold.ROWS_SPLIT, 63, "LayerNorm")


def test_names_of_parameters_do_not_matter(reference_plan):
    """Every program parameter renamed, the families are the same: they come from the dataflow and the layouts."""
    renamed = reference_plan
    for value in reference_plan.values[:43]:
        renamed = with_value(renamed, value.id, name=f"parameter {value.id}")

    def key(family):
        return tuple(k.step for k in family.kernels), family.members, family.roles, family.hold

    assert [key(f) for f in families_of(renamed)] == [key(f) for f in families_of(reference_plan)]


def _relaid_alike(before, after, flow, families=None) -> tuple:
    """`relaid_elementwise` of `after` from `before`'s families, held equal to recognising `after` afresh; returned."""
    relaid = relaid_elementwise(before, families or recognise_elementwise(before, flow), after, flow)
    assert relaid == recognise_elementwise(after, flow)
    return relaid


def _relaid_at_random(plan, seed: int, most: int):
    """`plan` with up to `most` values given the layout of another value of their shape, as a rewrite lays them out,
    and one in four the shape, layout and precision of another of their rank, as a split resizes a Gemm's partials."""
    rng = random.Random(seed)
    alike: dict[tuple, list] = {}
    for value in plan.values:
        alike.setdefault(tuple(value.shape), []).append(value)
        alike.setdefault(len(value.shape), []).append(value)
    for value in rng.sample(plan.values, rng.randint(1, most)):
        if rng.random() < 0.25:
            other = rng.choice(alike[len(value.shape)])
            plan = with_value(plan, value.id, shape=other.shape, layout=other.layout, precision=other.precision)
        else:
            plan = with_value(plan, value.id, layout=rng.choice(alike[tuple(value.shape)]).layout)
    return plan


@pytest.mark.parametrize("path", ALL_PLANS, ids=lambda path: path.stem)
def test_families_relaid_are_those_recognised_afresh(path):
    """Layouts and shapes moved at random over every committed plan: a possible operand comes or goes, a family joins
    or parts, a role or a hold appears or goes, and the families found from the input's are those found afresh."""
    plan = load_plan(path)
    flow = dataflow(plan)
    trials = 24 if path == REFERENCE else 6
    for seed in range(trials):
        _relaid_alike(plan, _relaid_at_random(plan, seed, most=1 + seed * 4), flow)


def test_families_a_relayout_leaves_alone_are_the_inputs_own(reference_plan):
    """Value 2 (a bias of the residual stream) one replica short: its family is found again, held, and every other
    family is the input's very object."""
    flow = dataflow(reference_plan)
    before = recognise_elementwise(reference_plan, flow)
    moved = format_layout(reference_plan.values[2].parsed_layout.with_tiling((2,), (1,), 728))
    relaid = _relaid_alike(reference_plan, with_value(reference_plan, 2, layout=moved), flow, before)
    assert [old is new for old, new in zip(before, relaid)] == [2 not in family.members for family in before]
    assert [family.hold.rule for family in relaid if 2 in family.members] == [Hold.PARAMETER_PLACEMENT]
    assert relaid_elementwise(reference_plan, before, reference_plan, flow) is before


@pytest.mark.parametrize("change", ["layout", "precision"])
def test_a_loop_bias_laid_out_away_from_its_activation_parts_from_its_family(reference_plan, change):
    """Bias 52 one replica short, or of another precision than the Add's result, is no possible operand of the Add at
    step 15 any more: its family loses the bias and is held, found again as a whole."""
    flow = dataflow(reference_plan)
    moved = format_layout(reference_plan.values[52].parsed_layout.with_tiling((2,), (1,), 728))
    changed = with_value(reference_plan, 52, **({"layout": moved} if change == "layout" else {"precision": "F32"}))
    relaid = {tuple(k.step for k in f.kernels): f for f in _relaid_alike(reference_plan, changed, flow)}
    assert relaid[(15,)].kernels[0].possible == ()
    assert relaid[(15,)].hold.rule is Hold.OPERAND_UNKNOWN and 52 not in relaid[(15,)].members


def test_a_kernel_whose_activation_is_laid_out_anew_finds_its_possible_operands_again(reference_plan):
    """Activation 66 of the Add at step 15 cut in one where bias 52 is cut in two: the bias is no possible operand
    any more. The activation's storage dropped from the step's live set, its layout alone tells the kernels apart."""
    flow = dataflow(reference_plan)
    before = with_step(reference_plan, 15, live=[v for v in reference_plan.steps[15].live if v != 66])
    uncut = format_layout(reference_plan.values[66].parsed_layout.with_tiling((729, 1), (1, None), 2))
    relaid = _relaid_alike(before, with_value(before, 66, layout=uncut), flow)
    assert next(f for f in relaid if 15 in f.steps).kernels[0].possible == ()


def test_a_members_shape_changed_finds_its_family_again(reference_plan):
    """A member no rule of the dataflow reads the shape of, made 7 rows: a member of neither shape holds its family."""
    flow = dataflow(reference_plan)
    before = recognise_elementwise(reference_plan, flow)
    members = {m for family in before for m in family.members}
    unformed = min(v.id for v in reference_plan.values if v.id in members - flow.formed and len(v.shape) > 1)
    resized = with_value(reference_plan, unformed, shape=[7, *reference_plan.values[unformed].shape[1:]])
    relaid = _relaid_alike(reference_plan, resized, flow, before)
    assert [old is new for old, new in zip(before, relaid)] == [unformed not in family.members for family in before]
    assert next(f for f in relaid if unformed in f.members).hold.rule is Hold.OPERAND_SHAPE


@pytest.mark.parametrize("change", ["operation", "live set", "root"])
def test_plans_that_differ_in_more_than_values_relaid_are_recognised_afresh(reference_plan, change):
    """A kernel outside a family turned one that reads its members as laid out, the storage of bias 52 (body argument
    of 10) no longer live at its Add, the residual stream's loop result no version of it: what the families read
    beside the values' layouts, shapes and precisions."""
    flow = dataflow(reference_plan)
    changed = {
        "operation": lambda: with_step(reference_plan, 42, operation="Convert LocalKernel"),
        "live set": lambda: with_step(reference_plan, 15, live=[v for v in reference_plan.steps[15].live if v != 10]),
        "root": lambda: with_value(reference_plan, 97, root=97),
    }[change]()
    assert _relaid_alike(reference_plan, changed, flow) != recognise_elementwise(reference_plan, flow)


@pytest.mark.parametrize("relaid", ["mended", "broken otherwise"])
def test_a_family_held_by_its_layouts_is_judged_again(reference_plan, relaid):
    """The residual stream held as bias 2 is one replica short: laid out as before, it is free again; bias 2 mended
    but the stream's first result cut otherwise, it is held again, now as tiled apart."""
    flow = dataflow(reference_plan)
    short = format_layout(reference_plan.values[2].parsed_layout.with_tiling((2,), (1,), 728))
    held = with_value(reference_plan, 2, layout=short)
    after = with_value(held, 2, layout=reference_plan.values[2].layout)
    if relaid == "broken otherwise":
        after = with_value(after, 46, layout=reference_plan.values[98].layout)
    (residual,) = [f for f in _relaid_alike(held, after, flow) if 5 in f.steps]
    assert residual.hold is None if relaid == "mended" else residual.hold.rule is Hold.TILED_APART
