"""Each stage of a run runs once, on every path: the facts of the input once (and once more for the rewritten
plan's deliberate re-check), the candidate space and the problem once for the run's scope (the explanation
of a conflict also tries wider scopes, from the same facts), the plan parsed once. The report, the failure's
report, the explanation, `sweep` and `explore` read the prepared run instead of inferring anything again."""

from __future__ import annotations

import sys
from collections import Counter

import pytest
from reference import REFERENCE
from typer.testing import CliRunner

from ipuplan.cli import app
from ipuplan.facts.dataflow import dataflow
from ipuplan.facts.elementwise_families import recognise_elementwise, relaid_elementwise
from ipuplan.facts.estimate import estimate
from ipuplan.facts.gemm_families import recognise_families
from ipuplan.facts.liveness import liveness
from ipuplan.model.build import problem_of
from ipuplan.model.exact import exact_problem
from ipuplan.plan.format import load_plan, plan_from_json
from ipuplan.replan.options import OptimizeOptions
from ipuplan.replan.pipeline import BudgetConflict, optimize
from ipuplan.space.scopes import candidate_space, scope_named
from ipuplan.workbench.explore import explore_one

FACTS = {"liveness": liveness, "dataflow": dataflow, "estimate": estimate, "recognise_families": recognise_families,
         "recognise_elementwise": recognise_elementwise}
READ_ONCE = ("liveness", "dataflow", "recognise_elementwise")
"""The facts a rewritten plan takes from its input where the rewrite left what they read alone (`rewritten_facts`;
the element-wise families: those no relaid member touches, and here each rewrite leaves every family's possible
operands alone, `relaid_elementwise`)."""
STAGES = {**FACTS, "relaid_elementwise": relaid_elementwise, "candidate_space": candidate_space,
          "problem_of": problem_of, "plan_from_json": plan_from_json, "exact_problem": exact_problem}
TIGHT = ["--scope", "kernels", "--budget", "200000", "--interleaved-budget", "72831"]
"""No layout of the kernels scope meets these budgets (tests/test_objectives.py); the full scope's do."""

runner = CliRunner()


def _scope_of(name: str, args: tuple, kwargs: dict) -> str | None:
    """The scope a candidate space is built for, or a problem is built from."""
    if name == "candidate_space":
        return scope_named(kwargs.get("scope", args[1] if len(args) > 1 else "full")).value
    return args[1].scope if name == "problem_of" else None


def _counting(name: str, stage, calls: Counter):
    def counted(*args, **kwargs):
        calls[name, _scope_of(name, args, kwargs)] += 1
        return stage(*args, **kwargs)

    return counted


@pytest.fixture()
def calls(monkeypatch) -> Counter:
    """(stage, scope) -> calls, from here on: every module's binding of a stage counts."""
    found: Counter = Counter()
    for name, stage in STAGES.items():
        counted = _counting(name, stage, found)
        for module in [m for key, m in sys.modules.items() if key.startswith("ipuplan")]:
            if getattr(module, name, None) is stage:
                monkeypatch.setattr(module, name, counted)
    return found


def cli(*args: str, code: int = 0):
    def run(tmp_path):
        result = runner.invoke(app, [a.replace("TMP", str(tmp_path)) for a in args])
        assert result.exit_code == code, result.output

    return run


def raises_conflict(tmp_path):
    with pytest.raises(BudgetConflict):
        optimize(load_plan(REFERENCE), workers=1, time_limit=5, scope="kernels", budget=200_000,
                 interleaved_budget=72_831)


PATHS = {
    # path: (run, facts of the plans, the run's scope, wider scopes its explanation may try, exact exchange stages);
    # `report` solves nothing: it builds the candidate space of the scope it shows, and no problem
    "optimize": (lambda tmp: optimize(load_plan(REFERENCE), workers=1, time_limit=5), 2, "full", (), 1),
    "optimize --report": (cli("optimize", str(REFERENCE), "-o", "TMP/o.json", "--scope", "storage", "--workers", "1",
                              "--report", "TMP/r.html"), 2, "storage", (), 1),
    "infeasible": (raises_conflict, 1, "kernels", ("full",), 0),
    "infeasible --report": (cli("optimize", str(REFERENCE), "-o", "TMP/o.json", *TIGHT, "--workers", "1",
                                "--time-limit", "5", "--report", "TMP/r.html", code=3), 1, "kernels", ("full",), 0),
    "best effort --report": (cli("optimize", str(REFERENCE), "-o", "TMP/o.json", *TIGHT, "--workers", "1",
                                 "--time-limit", "5", "--best-effort", "--report", "TMP/r.html", code=3), 2, "kernels",
                             ("full",), 0),
    # sweep: the input's facts, and those of the plan each point would write (its exact exchange; storage, 2 points:
    # the smallest peak and the least exchange, every pair priced once)
    "sweep --report": (cli("sweep", str(REFERENCE), "--scope", "storage", "--workers", "1", "--points", "2",
                           "--report", "TMP/s.html"), 3, "storage", (), 1),
    "explore": (lambda tmp: explore_one(str(REFERENCE), str(tmp), OptimizeOptions(workers=1, time_limit=5)), 2, "full",
                (), 1),
    "report": (cli("report", str(REFERENCE), "-o", "TMP/r.html", "--scope", "kernels"), 1, "kernels", (), 0),
}


@pytest.mark.parametrize("path", PATHS)
def test_each_stage_runs_once_per_run(path, calls, tmp_path):
    run, plans, scope, wider, exact = PATHS[path]
    run(tmp_path)
    # the liveness, the dataflow and the element-wise families once: a rewritten plan reads the input's (its
    # re-check's element-wise rule finds again only the families a relaid member touches), as no path here changes
    # what they read
    assert {name: calls[name, None] for name in FACTS} == {name: 1 if name in READ_ONCE else plans for name in FACTS}
    assert calls["relaid_elementwise", None] == plans - 1  # every rewritten plan's families, from its input's
    assert calls["exact_problem", None] == exact
    for stage in ("candidate_space", "problem_of") if path != "report" else ("candidate_space",):
        built = {s: n for (name, s), n in calls.items() if name == stage}
        assert built.pop(scope, 0) == 1, (stage, built)
        assert set(built) <= set(wider) and set(built.values()) <= {1}, (stage, built)
    assert path != "report" or not any(name == "problem_of" for name, _ in calls)
    # parsed once on every path (the API paths' own load_plan in the test counts; explore reads, hashes, parses)
    assert calls["plan_from_json", None] == 1
