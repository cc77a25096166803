"""Every plan in models/ is consistent, and the optimiser's output on it is legal, no worse, and
byte-identical to the recorded output (a change meant to alter outputs updates OUTPUT_SHA256 and says
in its commit message which plans changed and by how many bytes)."""

from __future__ import annotations

import hashlib

import pytest
from reference import ALL_PLANS

from ipuplan import dump_plan, load_plan
from ipuplan.check import check
from ipuplan.optimizer import optimize
from ipuplan.rewrite import contract_violations

OUTPUT_SHA256 = {
    ("vit-so400m-12layers.json", "kernels"): "99c91dd723de9353ad63acc2c3da41264e00dc25594b07b7f01fe41bfb3eefc1",
    ("vit-so400m-12layers.json", "storage"): "2f5809cd5ac1b96ff86c24ed67c03822012f82e017d646367cfd82859b1b7c91",
    ("vit-so400m-6layers.json", "kernels"): "d7ab6d868952f84bc7fd6a6d5030bd7421feb40f460c4146eb5b2e98cf2b5095",
    ("vit-so400m-6layers.json", "storage"): "fd4e91867cde11a9463f4a31d1308cd3ca474e8cb9ec6b0d3b3c42fae5b802c6",
    ("vit-so400m-finalist-5-tight.json", "kernels"): "71e2818d57f2d714787cb436211049e4c36d8a56f563da6883d1c14f3dc1041b",
    ("vit-so400m-finalist-5-tight.json", "storage"): "a2edea86a3f69f93f2e9783979a3303fce6059aa8577f4f83e842cbcc9ac5251",
    ("vit-so400m-finalist-5.json", "kernels"): "f3c6542c0a7d04ed52f3872b57994380c3458ebc6ebf45e0e3796ab7c4949c25",
    ("vit-so400m-finalist-5.json", "storage"): "13cc59647c777916c7eca58e142bbb7320771351964f6963ff42a8782964857e",
    ("vit-so400m-unroll3.json", "kernels"): "98998d81792876a6abfa9a583e1e10540239c37bf835b82158ccd59bfee51c14",
    ("vit-so400m-unroll3.json", "storage"): "35ae2e3da421953309e396fbe2d3b1e84268ac1e282820116916e0d70ba54a6f",
}


@pytest.mark.parametrize("path", ALL_PLANS, ids=lambda p: p.name)
def test_plan_is_consistent(path):
    assert check(load_plan(path)) == []


def test_every_plan_has_recorded_outputs():
    assert {name for name, _ in OUTPUT_SHA256} == {p.name for p in ALL_PLANS}


@pytest.mark.parametrize("scope", ["storage", "kernels"])
@pytest.mark.parametrize("path", ALL_PLANS, ids=lambda p: p.name)
def test_optimised_plan_is_legal_fits_no_worse_and_unchanged_bytes(path, scope):
    plan = load_plan(path)
    result = optimize(plan, workers=1, time_limit=10, scope=scope)
    assert check(result.plan) == []
    assert contract_violations(plan, result.plan) == []
    assert result.after.raw_peak <= result.before.raw_peak
    assert result.after.fits_budget
    assert result.after.raw_peak == result.solve.peak
    assert hashlib.sha256(dump_plan(result.plan).encode()).hexdigest() == OUTPUT_SHA256[(path.name, scope)]
