"""The candidate space (space/scopes.py): the free/frozen split of the reference plan, scope by scope."""

from __future__ import annotations

from collections import Counter

import pytest
from reference import with_step

from ipuplan.errors import IpuplanError
from ipuplan.facts.plan_facts import plan_facts
from ipuplan.space.scopes import UnknownScope, candidate_space
from ipuplan.space.types import Freeze, FreezeReason


def test_kernels_scope_adds_kernel_groups(spaces):
    assert {g.kind for g in spaces["storage"].free} == {"storage"}
    assert {g.kind for g in spaces["kernels"].free} == {"kernel", "storage"}
    assert spaces["kernels"].candidate_count > spaces["storage"].candidate_count


@pytest.mark.parametrize("scope", ["storage", "kernels"])
def test_input_candidate_reproduces_the_input(facts, spaces, scope):
    values = facts.plan.values
    for group in spaces[scope].free:
        chosen = group.candidates[group.input_index]
        assert chosen.layouts == tuple(values[m].parsed_layout for m in group.members)
        assert chosen.value_bytes == tuple(facts.estimate.values[m] for m in group.members)
        assert all(tuple(values[m].shape) == shape for m, shape in zip(group.members, chosen.shapes))
        assert all(facts.plan.steps[s].operation == text for s, text in chosen.operations)


@pytest.mark.parametrize("scope", ["storage", "kernels"])
def test_every_value_is_in_exactly_one_group(facts, spaces, scope):
    space = spaces[scope]
    counts = Counter(m for group in (*space.free, *space.frozen) for m in group.members)
    assert counts == Counter(range(len(facts.plan.values)))


@pytest.mark.parametrize("scope", ["storage", "kernels"])
def test_frozen_reasons_are_typed_and_their_labels_carry_no_numbers(spaces, scope):
    for group in spaces[scope].frozen:
        assert isinstance(group.reason, FreezeReason)
        assert isinstance(group.reason.kind, Freeze)
        assert not any(c.isdigit() for c in group.reason.group_label), group.reason.group_label


def test_unknown_scope_is_refused(facts):
    with pytest.raises(UnknownScope) as raised:
        candidate_space(facts, "everything")
    assert isinstance(raised.value, IpuplanError)
    assert "storage" in str(raised.value) and "kernels" in str(raised.value)


def test_an_unknown_operation_freezes_what_is_live_there(reference_plan, spaces):
    step = 19  # a Copy where 13 values of free storage groups are live
    free_before = {m for g in spaces["storage"].free for m in g.members} & set(reference_plan.steps[step].live)
    assert free_before
    mutated = with_step(reference_plan, step, operation="FancyFusedThing { lanes: 4 }")
    reasons = candidate_space(plan_facts(mutated), "storage").reasons()
    assert not [v for v in reference_plan.steps[step].live if reasons.get(v, "absent") is None]
    for value in free_before:
        reason = reasons[value]
        assert (reason.kind, reason.step, reason.operation) == (Freeze.UNKNOWN_OPERATION, step, "FancyFusedThing")
