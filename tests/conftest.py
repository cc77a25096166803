from __future__ import annotations

import json

import pytest
from reference import REFERENCE

from ipuplan import Plan, load_plan
from ipuplan.facts.plan_facts import plan_facts
from ipuplan.space.scopes import candidate_space


@pytest.fixture(scope="session")
def reference_plan() -> Plan:
    return load_plan(REFERENCE)


@pytest.fixture()
def reference_raw() -> dict:
    """A fresh, mutable copy of the reference plan's JSON."""
    return json.loads(REFERENCE.read_text())


@pytest.fixture(scope="session")
def facts(reference_plan):
    """The reference plan's facts under its own budgets."""
    return plan_facts(reference_plan)


@pytest.fixture(scope="session")
def spaces(facts):
    """The reference plan's candidate space per scope."""
    return {scope: candidate_space(facts, scope) for scope in ("storage", "kernels", "full")}
