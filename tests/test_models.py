"""Every plan in models/ is consistent, and the optimiser's output on it is legal, no worse, and
byte-identical to the recorded output (a change meant to alter outputs updates OUTPUTS and says
in its commit message which plans changed and by how many bytes)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import pytest
from reference import ALL_PLANS

from ipuplan import InfeasibleBudget, dump_plan, load_plan
from ipuplan.facts.check import check
from ipuplan.replan.pipeline import optimize
from ipuplan.replan.rewrite import contract_violations

INFEASIBLE = "infeasible: no layout of the scope fits"


@dataclass(frozen=True)
class Output:
    """What one optimised output stands for, beside its bytes: a changed hash says which figure moved."""

    raw_peak: int
    exchange_after: int
    """`OptimizeResult.exchange_after`, the optimiser's exchange figure."""
    status: str
    sha256: str


OUTPUTS = {
    ("vit-so400m-12layers-chip.json", "storage"): INFEASIBLE,
    ("vit-so400m-12layers-chip.json", "kernels"): INFEASIBLE,
    ("vit-so400m-12layers-chip.json", "full"): Output(455_436, 724_208_368, "optimal",
        "29ae2f5fee965516f762f72611825623f45c84f2dd02769dce9d9d03aba84ec5"),
    ("vit-so400m-12layers.json", "storage"): Output(580_496, 215_821_440, "optimal",
        "6f54c036e041a1e31581bc7488a50dbfd0f4cc4d02ab2c80585af4c2840634ca"),
    ("vit-so400m-12layers.json", "kernels"): Output(576_400, 491_555_384, "optimal",
        "14d441750e92f42fb3723c9ee8ea0c4456bc3fc4cda833b6a95e544a335c5af7"),
    ("vit-so400m-12layers.json", "full"): Output(455_436, 724_208_368, "optimal",
        "adade5d0f0e441006e7216b73d83927190debff46143ccaec33e33282fb538ec"),
    ("vit-so400m-6layers-chip.json", "storage"): INFEASIBLE,
    ("vit-so400m-6layers-chip.json", "kernels"): INFEASIBLE,
    ("vit-so400m-6layers-chip.json", "full"): Output(277_620, 724_208_368, "optimal",
        "093041725eb65c89b8dd3ca410cbb5c5a947189c9c5b6ab9578e813264fe8c2b"),
    ("vit-so400m-6layers.json", "storage"): Output(351_152, 215_821_440, "optimal",
        "5034485bac218a7f197024f6d6c0a555c7183a1e4ccbe16a76a54355900389d2"),
    ("vit-so400m-6layers.json", "kernels"): Output(347_056, 491_555_384, "optimal",
        "650f843a87dec661985682770d2d8953293f6505eae89a4fbe703723ef3cb4e9"),
    ("vit-so400m-6layers.json", "full"): Output(277_620, 724_208_368, "optimal",
        "103e1a904f30008972258bd40f5799760175267b6f00e2d7daa59b04e7305ca7"),
    ("vit-so400m-finalist-5-tight.json", "storage"): Output(198_256, 215_821_440, "optimal",
        "74b708cf208618d9c5fad58165d5bb3fa6ce2649019d643b032b0f1ef9ff9b52"),
    ("vit-so400m-finalist-5-tight.json", "kernels"): Output(194_160, 500_214_360, "optimal",
        "1b321743b20d45afbf4a7b4f4df884ead106b6da09e508cddcb3a60b5d48b074"),
    ("vit-so400m-finalist-5-tight.json", "full"): Output(159_076, 732_867_344, "optimal",
        "c722c7a645fe49b13fe41a337a1c83d92c2ce773a8cb87dcfb070c9d08558708"),
    ("vit-so400m-finalist-5.json", "storage"): Output(198_256, 215_821_440, "optimal",
        "d07edaab82c774b07778de34e60ca44aa6a1ad6af8eb3f8af416807ac630a4ca"),
    ("vit-so400m-finalist-5.json", "kernels"): Output(194_160, 500_214_360, "optimal",
        "2a39dcb71da40d801f4502d912ba87b10d8f4266d0adbfef97d6b0beb8d4d3e8"),
    ("vit-so400m-finalist-5.json", "full"): Output(159_076, 732_867_344, "optimal",
        "cd193160b79f1f54c5e6111c312f74a631e75c52821dbba0febe9effc3031b44"),
    ("vit-so400m-unroll3.json", "storage"): Output(250_432, 642_520_960, "optimal",
        "78bdf536cd03eef5b6d4c7792b61aa146833731e8ae6aee52cf5170fea618282"),
    ("vit-so400m-unroll3.json", "kernels"): Output(208_512, 1_481_584_200, "optimal",
        "9f0a57f422d7b8d898f6297507daee076b0fc9c702f8db41629686dafad936fb"),
    ("vit-so400m-unroll3.json", "full"): Output(180_148, 2_179_666_512, "optimal",
        "f97336c9fe01dc25be24c51155dfd6aebed7bb5271b4b81e7892b270f64e2861"),
}


@pytest.mark.parametrize("path", ALL_PLANS, ids=lambda p: p.name)
def test_plan_is_consistent(path):
    assert check(load_plan(path)) == []


def test_every_plan_has_recorded_outputs():
    assert {name for name, _ in OUTPUTS} == {p.name for p in ALL_PLANS}


@pytest.mark.parametrize("scope", ["storage", "kernels", "full"])
@pytest.mark.parametrize("path", ALL_PLANS, ids=lambda p: p.name)
def test_optimised_plan_is_legal_fits_no_worse_and_unchanged_bytes(path, scope):
    plan = load_plan(path)
    expected = OUTPUTS[(path.name, scope)]
    if expected == INFEASIBLE:
        with pytest.raises(InfeasibleBudget, match="standard budget"):
            optimize(plan, workers=1, time_limit=10, scope=scope)
        return
    result = optimize(plan, workers=1, time_limit=10, scope=scope)
    assert check(result.plan) == []
    assert contract_violations(plan, result.plan) == []
    assert result.after.raw_peak <= result.before.raw_peak
    assert result.after.fits_budget
    assert result.after.raw_peak == result.solve.peak
    figures = (result.after.raw_peak, result.exchange_after, result.status.value)
    assert figures == (expected.raw_peak, expected.exchange_after, expected.status)
    assert hashlib.sha256(dump_plan(result.plan).encode()).hexdigest() == expected.sha256
