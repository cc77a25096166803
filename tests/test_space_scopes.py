"""The candidate space (space/scopes.py): the free/frozen split of the reference plan, scope by scope."""

from __future__ import annotations

from collections import Counter

import pytest

from ipuplan.errors import IpuplanError
from ipuplan.space import scopes
from ipuplan.space.scopes import Level, Scope, UnknownScope, candidate_space, levels_of
from ipuplan.space.types import Candidate, Decisions, FreeGroup


def test_kernels_scope_adds_gemm_and_attention_families(spaces):
    assert {g.kind for g in spaces["storage"].free} == {"storage"}
    assert {g.kind for g in spaces["kernels"].free} == {"kernel", "attention", "storage"}
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


def test_unknown_scope_is_refused(facts):
    with pytest.raises(UnknownScope) as raised:
        candidate_space(facts, "everything")
    assert isinstance(raised.value, IpuplanError)
    assert "storage" in str(raised.value) and "kernels" in str(raised.value)


def test_scopes_are_ordered_as_defined_narrowest_first():
    assert tuple(Scope) == (Scope.STORAGE, Scope.KERNELS, Scope.FULL, Scope.PROGRAM)
    # `program` changes the timeline: opt-in only, never offered as a wider scope
    assert [scope.wider() for scope in Scope] == [(Scope.KERNELS, Scope.FULL), (Scope.FULL,), (), ()]


@pytest.mark.parametrize(
    ("scope", "keep_classes", "names"),
    [
        (Scope.STORAGE, False, ["storage"]),
        (Scope.KERNELS, False, ["kernels", "attention", "storage"]),
        (Scope.FULL, False, ["kernels", "attention", "elementwise", "classes", "storage"]),
        (Scope.FULL, True, ["kernels", "attention", "elementwise", "storage"]),
        (Scope.KERNELS, True, ["kernels", "attention", "storage"]),
        (Scope.PROGRAM, False, ["kernels", "attention", "elementwise", "gather", "classes", "storage"]),
    ],
)
def test_each_scope_runs_its_registered_levels_in_registry_order(scope, keep_classes, names):
    assert [level.name for level in levels_of(scope, keep_classes)] == names


def test_every_level_is_registered_once():
    names = [level.name for level in scopes.LEVELS]
    assert len(names) == len(set(names))
    assert len({level.decide for level in scopes.LEVELS}) == len(names)


STUB_GROUP = (31,)
"""A storage group free in every scope of the reference plan."""


def stub_level(context, groups):
    """Frees `STUB_GROUP` with its input layout as its only candidate."""
    if STUB_GROUP not in groups:
        return Decisions()
    facts = context.facts
    layouts = tuple(facts.plan.values[m].parsed_layout for m in STUB_GROUP)
    sizes = tuple(facts.estimate.values[m] for m in STUB_GROUP)
    return Decisions(free=(FreeGroup(STUB_GROUP, (Candidate(layouts, sizes, 0),), input_index=0, kind="stub"),))


@pytest.fixture()
def stub_registered(monkeypatch):
    """A level registered by this test, first in the registry, for `kernels` and `full`; the registry restored after."""
    monkeypatch.setattr(scopes, "LEVELS", (Level("stub", stub_level, (Scope.KERNELS, Scope.FULL)), *scopes.LEVELS))


@pytest.mark.parametrize("scope", list(Scope))
def test_a_level_registered_from_outside_decides_in_the_scopes_it_names(stub_registered, facts, scope):
    space = candidate_space(facts, scope)
    stubs = [group for group in space.free if group.kind == "stub"]
    if scope in (Scope.STORAGE, Scope.PROGRAM):  # the scopes the stub does not name
        assert stubs == [] and STUB_GROUP in [group.members for group in space.free]
    else:
        assert [(group.members, len(group.candidates)) for group in stubs] == [(STUB_GROUP, 1)]
    counts = Counter(m for group in (*space.free, *space.frozen) for m in group.members)
    assert counts == Counter(range(len(facts.plan.values)))


def test_a_family_level_registered_from_outside_is_reported_as_one_unit(monkeypatch, facts):
    """A level that re-lays out families as units is its module and one `Level(...)` line: the report finds its
    families through `Level.families` (no list kept by hand in report/)."""
    from ipuplan.report.html import unit_state
    from ipuplan.report.text import family_units

    def stub_families(facts):
        return [(((31, "Copy"),), STUB_GROUP)]

    monkeypatch.setattr(scopes, "LEVELS", (Level("stub", stub_level, (Scope.KERNELS,), "stub", families=stub_families,
                                                 unit="stub"), *scopes.LEVELS))
    units = family_units(facts)
    assert units[0].label == "stub family: Copy at step 31" and units[0].members == STUB_GROUP
    assert unit_state(units[0], candidate_space(facts, Scope.KERNELS)) == "free as one unit"
    assert unit_state(units[0], candidate_space(facts, Scope.STORAGE)).startswith("not re-split")
