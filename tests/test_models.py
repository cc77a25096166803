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
    ("vit-so400m-12layers.json", "full"): "100d00c7df8cdc8db8c7dccc220e93e2392011a75eb62c7fcb471713f670957f",
    ("vit-so400m-6layers-chip.json", "storage"): INFEASIBLE,
    ("vit-so400m-6layers-chip.json", "kernels"): INFEASIBLE,
    ("vit-so400m-6layers-chip.json", "full"): "443371e2d5fd9676716dd0c459e359fe150f321e9722447f7bc0dff10964deb7",
    ("vit-so400m-6layers.json", "storage"): "fd4e91867cde11a9463f4a31d1308cd3ca474e8cb9ec6b0d3b3c42fae5b802c6",
    ("vit-so400m-6layers.json", "kernels"): "a570ea32dbc13bcd78ce121631e615a7a2fc2a5548f78368ae1a88c4dfebb5df",
    ("vit-so400m-6layers.json", "full"): "cc6d6e37cd11f33bb68762a8d355132aed0cec9c990a6b3d5b3bdc318421b2cd",
    ("vit-so400m-finalist-5-tight.json", "storage"): "a2edea86a3f69f93f2e9783979a3303fce6059aa8577f4f83e842cbcc9ac5251",
    ("vit-so400m-finalist-5-tight.json", "kernels"): "7d949dc0e70293af3e040234792c388f084560bb1d63da4a56ae0aa9b33cc348",
    ("vit-so400m-finalist-5-tight.json", "full"): "05fb3a8d114896e86c70dec3484eface0f65ea820a292f0be4ff19b980eab375",
    ("vit-so400m-finalist-5.json", "storage"): "13cc59647c777916c7eca58e142bbb7320771351964f6963ff42a8782964857e",
    ("vit-so400m-finalist-5.json", "kernels"): "d16414a56563cf565391b17dd17572be74e87b0d57fbeb8c083fc5121d3b8fb6",
    ("vit-so400m-finalist-5.json", "full"): "c32a481c6da770039f7b9c1ed4e194589558892dd67d1b5234d212828db2ad48",
    ("vit-so400m-unroll3.json", "storage"): "35ae2e3da421953309e396fbe2d3b1e84268ac1e282820116916e0d70ba54a6f",
    ("vit-so400m-unroll3.json", "kernels"): "7ce86292da9e885d7da93fa57cf1f99e20d4b49e29e22085874c83418fae0d0b",
    ("vit-so400m-unroll3.json", "full"): "538da191a70865f4c2e240c39a8dad60dae755adc2fc996d8542111a6a19f2f7",
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
