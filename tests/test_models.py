"""Every plan in models/ is consistent, and the optimiser's output on it is legal, no worse, and
byte-identical to the recorded output (a change meant to alter outputs updates OUTPUT_SHA256 and says
in its commit message which plans changed and by how many bytes)."""

from __future__ import annotations

import hashlib

import pytest
from reference import ALL_PLANS

from ipuplan import InfeasibleBudget, dump_plan, load_plan
from ipuplan.check import check
from ipuplan.optimizer import optimize
from ipuplan.rewrite import contract_violations

INFEASIBLE = "infeasible: no layout of the scope fits"

OUTPUT_SHA256 = {
    ("vit-so400m-12layers-chip.json", "storage"): INFEASIBLE,
    ("vit-so400m-12layers-chip.json", "kernels"): INFEASIBLE,
    ("vit-so400m-12layers-chip.json", "full"): "c340230d0ebb16b797caa254d5de6a41d981819241c23104c399018c863ab7f5",
    ("vit-so400m-12layers.json", "storage"): "2f5809cd5ac1b96ff86c24ed67c03822012f82e017d646367cfd82859b1b7c91",
    ("vit-so400m-12layers.json", "kernels"): "e5e0fb2f483f023c6f1a4ab0f1dc6d0d460f3e11ae46f71e47749978e17973a8",
    ("vit-so400m-12layers.json", "full"): "406f5e88447ed000677199fe16502b8450a43bbe720f0a96d6b41db903b658fd",
    ("vit-so400m-6layers-chip.json", "storage"): INFEASIBLE,
    ("vit-so400m-6layers-chip.json", "kernels"): INFEASIBLE,
    ("vit-so400m-6layers-chip.json", "full"): "aa2dc913937558c1b97ff8bf54d5c1238597e090c22766c3e8d17a7566674afb",
    ("vit-so400m-6layers.json", "storage"): "ed125e58711fb8f1b95f82f11b67d91b908e83f564cd85ef2091e8fd54630f33",
    ("vit-so400m-6layers.json", "kernels"): "a570ea32dbc13bcd78ce121631e615a7a2fc2a5548f78368ae1a88c4dfebb5df",
    ("vit-so400m-6layers.json", "full"): "bf4e98be721f37b27411b89e762ab135725b1464179ee59d709c917c4be2e6cc",
    ("vit-so400m-finalist-5-tight.json", "storage"): "a2edea86a3f69f93f2e9783979a3303fce6059aa8577f4f83e842cbcc9ac5251",
    ("vit-so400m-finalist-5-tight.json", "kernels"): "7d949dc0e70293af3e040234792c388f084560bb1d63da4a56ae0aa9b33cc348",
    ("vit-so400m-finalist-5-tight.json", "full"): "b7de39324969957453099fb3690087d22aefe1f51176d141732bd9e970f30838",
    ("vit-so400m-finalist-5.json", "storage"): "13cc59647c777916c7eca58e142bbb7320771351964f6963ff42a8782964857e",
    ("vit-so400m-finalist-5.json", "kernels"): "d16414a56563cf565391b17dd17572be74e87b0d57fbeb8c083fc5121d3b8fb6",
    ("vit-so400m-finalist-5.json", "full"): "644d20360e6b900350543fbaae741c6148370af21ce3c3a31c4d8a44c89c1a55",
    ("vit-so400m-unroll3.json", "storage"): "35ae2e3da421953309e396fbe2d3b1e84268ac1e282820116916e0d70ba54a6f",
    ("vit-so400m-unroll3.json", "kernels"): "fe2051d32281d5fb36683864a24b9bb6c5a24cc6563482a204444e3ddf5ab8bd",
    ("vit-so400m-unroll3.json", "full"): "6d9b6150a9c54e49e5b7e7588463b972b222fc3b743b9c0f9695c97f2cc04e17",
}


@pytest.mark.parametrize("path", ALL_PLANS, ids=lambda p: p.name)
def test_plan_is_consistent(path):
    assert check(load_plan(path)) == []


def test_every_plan_has_recorded_outputs():
    assert {name for name, _ in OUTPUT_SHA256} == {p.name for p in ALL_PLANS}


@pytest.mark.parametrize("scope", ["storage", "kernels", "full"])
@pytest.mark.parametrize("path", ALL_PLANS, ids=lambda p: p.name)
def test_optimised_plan_is_legal_fits_no_worse_and_unchanged_bytes(path, scope):
    plan = load_plan(path)
    if OUTPUT_SHA256[(path.name, scope)] == INFEASIBLE:
        with pytest.raises(InfeasibleBudget, match="standard budget"):
            optimize(plan, workers=1, time_limit=10, scope=scope)
        return
    result = optimize(plan, workers=1, time_limit=10, scope=scope)
    assert check(result.plan) == []
    assert contract_violations(plan, result.plan) == []
    assert result.after.raw_peak <= result.before.raw_peak
    assert result.after.fits_budget
    assert result.after.raw_peak == result.solve.peak
    assert hashlib.sha256(dump_plan(result.plan).encode()).hexdigest() == OUTPUT_SHA256[(path.name, scope)]
