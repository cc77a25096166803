from __future__ import annotations

import json

import pytest
from reference import REFERENCE

from ipuplan import Plan, load_plan


@pytest.fixture(scope="session")
def reference_plan() -> Plan:
    return load_plan(REFERENCE)


@pytest.fixture()
def reference_raw() -> dict:
    """A fresh, mutable copy of the reference plan's JSON."""
    return json.loads(REFERENCE.read_text())
