from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from reference import MODELS, REFERENCE

from ipuplan import Plan, load_plan
from ipuplan.facts.plan_facts import plan_facts
from ipuplan.model.build import problem_of
from ipuplan.model.exact import exact_problem
from ipuplan.plan import forked
from ipuplan.replan import size as run_sizes
from ipuplan.replan.options import OptimizeOptions
from ipuplan.replan.pipeline import optimize, prepare
from ipuplan.space.scopes import candidate_space

# no price kept from another run reaches a test, nor one of a test another (tests/test_price_store.py opts in)
os.environ["IPUPLAN_CACHE_DIR"] = "off"


@pytest.fixture(scope="session")
def reference_plan() -> Plan:
    return load_plan(REFERENCE)


@pytest.fixture()
def reference_raw() -> dict:
    """A fresh, mutable copy of the reference plan's JSON."""
    return json.loads(REFERENCE.read_text())


@pytest.fixture()
def plan(tmp_path) -> Path:
    """The reference plan's file, copied into the test's own folder."""
    path = tmp_path / "plan.json"
    shutil.copy(REFERENCE, path)
    return path


@pytest.fixture()
def inputs(tmp_path):
    """A folder of plans for a batch: the reference plan, the 6-layer one and a file that is no plan."""
    folder = tmp_path / "in"
    folder.mkdir()
    shutil.copy(REFERENCE, folder / "a.json")
    shutil.copy(MODELS / "vit-so400m-6layers.json", folder / "b.json")
    (folder / "broken.json").write_text(REFERENCE.read_text()[:3000])
    return folder


@pytest.fixture(scope="session")
def facts(reference_plan):
    """The reference plan's facts under its own budgets."""
    return plan_facts(reference_plan)


@pytest.fixture(scope="session")
def spaces(facts):
    """The reference plan's candidate space per scope."""
    return {scope: candidate_space(facts, scope) for scope in ("storage", "kernels", "full")}


@pytest.fixture(scope="session")
def storage_problem(facts, spaces):
    """The reference plan's problem in scope storage."""
    return problem_of(facts, spaces["storage"])


@pytest.fixture(scope="session")
def storage_result(reference_plan):
    """The reference plan optimised in scope storage, deterministically."""
    return optimize(reference_plan, workers=1, time_limit=10, scope="storage")


@pytest.fixture(scope="module", params=["storage", "full"])
def prepared(request, reference_plan):
    """The reference plan's run prepared (facts, space, problem) in scope storage, then full."""
    return prepare(reference_plan, OptimizeOptions(scope=request.param, workers=1))


@pytest.fixture(scope="module")
def priced(prepared):
    """The exact exchange of the prepared run as a problem's costs."""
    return exact_problem(prepared.facts, prepared.space, prepared.problem)


@pytest.fixture()
def forks_allowed(monkeypatch):
    """`plan.forked` may fork, as in the program (`ipuplan.cli.program.main`), for this test only."""
    monkeypatch.setitem(forked._allowed, "forks", True)


@pytest.fixture(autouse=True)
def machine_alone(monkeypatch):
    """Every run sized as on a machine alone (`replan.size.machine_slowdown`), so that no test's outcome depends on
    the load of the machine it runs on; `tests/test_replan_size.py` measures the slowdown itself."""
    monkeypatch.setattr(run_sizes, "machine_slowdown", lambda: 1.0)
