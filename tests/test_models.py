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
    ("vit-so400m-12layers-chip.json", "full"): "25e7ce7901f96697024302c8dd0c43a6fbe5e3d5f8f0a716a208d8baa59342ce",
    ("vit-so400m-12layers.json", "storage"): "2f5809cd5ac1b96ff86c24ed67c03822012f82e017d646367cfd82859b1b7c91",
    ("vit-so400m-12layers.json", "kernels"): "e5e0fb2f483f023c6f1a4ab0f1dc6d0d460f3e11ae46f71e47749978e17973a8",
    ("vit-so400m-12layers.json", "full"): "6ad0d4225f3801845e567cc6914377477104fd633b298a5d57109241a5ba384f",
    ("vit-so400m-6layers-chip.json", "storage"): INFEASIBLE,
    ("vit-so400m-6layers-chip.json", "kernels"): INFEASIBLE,
    ("vit-so400m-6layers-chip.json", "full"): "b979b6809b9a0fba8937bb9944448b2b52c4912c61dd282e0c0c732177344ef6",
    ("vit-so400m-6layers.json", "storage"): "fd4e91867cde11a9463f4a31d1308cd3ca474e8cb9ec6b0d3b3c42fae5b802c6",
    ("vit-so400m-6layers.json", "kernels"): "a570ea32dbc13bcd78ce121631e615a7a2fc2a5548f78368ae1a88c4dfebb5df",
    ("vit-so400m-6layers.json", "full"): "d6eb65d7ebfcc291fb2dce0e082283fb461f1077320a1d67dec3fd59f13e90ae",
    ("vit-so400m-finalist-5-tight.json", "storage"): "a2edea86a3f69f93f2e9783979a3303fce6059aa8577f4f83e842cbcc9ac5251",
    ("vit-so400m-finalist-5-tight.json", "kernels"): "7d949dc0e70293af3e040234792c388f084560bb1d63da4a56ae0aa9b33cc348",
    ("vit-so400m-finalist-5-tight.json", "full"): "e0bd6bf8ef2803e5800bdce96c354809e2a06cd798b42f6c49f4c8a8a8c019d6",
    ("vit-so400m-finalist-5.json", "storage"): "13cc59647c777916c7eca58e142bbb7320771351964f6963ff42a8782964857e",
    ("vit-so400m-finalist-5.json", "kernels"): "d16414a56563cf565391b17dd17572be74e87b0d57fbeb8c083fc5121d3b8fb6",
    ("vit-so400m-finalist-5.json", "full"): "192332b9316627ef5abe6c0d6ad624cdfa2eef0838a7b26481d8e50e904ca710",
    ("vit-so400m-unroll3.json", "storage"): "35ae2e3da421953309e396fbe2d3b1e84268ac1e282820116916e0d70ba54a6f",
    ("vit-so400m-unroll3.json", "kernels"): "7ce86292da9e885d7da93fa57cf1f99e20d4b49e29e22085874c83418fae0d0b",
    ("vit-so400m-unroll3.json", "full"): "595398f49dd205138e388d6f7f565c36e800dfd193b0548cc1d68c4dcfefc0d9",
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
