"""Random damage to the reference plan: loading either succeeds or says where it failed, never crashes."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference import REFERENCE

from ipuplan import PlanError, plan_from_json
from ipuplan.check import check

RAW = json.loads(REFERENCE.read_text())
TEXT = REFERENCE.read_text()

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)


def _paths(node, prefix=()):
    if isinstance(node, dict):
        for key, value in node.items():
            yield (*prefix, key)
            yield from _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node[:3]):
            yield (*prefix, index)
            yield from _paths(value, (*prefix, index))


PATHS = list(_paths({k: v for k, v in RAW.items() if k != "timeline"})) + list(
    _paths({"timeline": {"values": RAW["timeline"]["values"][40:50], "steps": RAW["timeline"]["steps"][10:14]}})
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(PATHS), json_values)
def test_any_replaced_field_loads_or_fails_with_a_location(path, value):
    raw = json.loads(TEXT)
    node = raw
    keys = list(path)
    if keys[:2] == ["timeline", "values"] and len(keys) > 2:
        keys[2] += 40
    if keys[:2] == ["timeline", "steps"] and len(keys) > 2:
        keys[2] += 10
    for key in keys[:-1]:
        node = node[key]
    node[keys[-1]] = value
    try:
        plan = plan_from_json(json.dumps(raw), source="fuzz.json")
    except PlanError as error:
        assert str(error).startswith("fuzz.json") and "\n" not in str(error)
        return
    check(plan)  # a plan that loads can always be checked


@settings(max_examples=100, deadline=None)
@given(st.integers(0, len(TEXT) - 1), st.text(max_size=3))
def test_any_text_damage_loads_or_fails_with_a_location(position, insert):
    damaged = TEXT[:position] + insert + TEXT[position + 1 :]
    try:
        plan = plan_from_json(damaged, source="fuzz.json")
    except PlanError as error:
        assert str(error).startswith("fuzz.json") and "\n" not in str(error)
        return
    check(plan)
