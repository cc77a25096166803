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
    """`OptimizeResult.exchange_after`: the written plan's exact exchange (docs/EXCHANGE.md)."""
    status: str
    sha256: str


OUTPUTS = {
    ("vit-so400m-12layers-chip.json", "storage"): INFEASIBLE,
    ("vit-so400m-12layers-chip.json", "kernels"): INFEASIBLE,
    ("vit-so400m-12layers-chip.json", "full"): Output(332_712, 711_251_902, "optimal",
        "9c4dc8c1627d01451d38a227c096816ae4e96d542d197f9446f36d1a3a4d7289"),
    ("vit-so400m-12layers.json", "storage"): Output(473_100, 716_904_052, "optimal",
        "0810f6e41c80cb09f4d915f19ca81cc75eda375a2812332ced19119cd1affdef"),
    ("vit-so400m-12layers.json", "kernels"): Output(455_436, 705_905_072, "optimal",
        "487e1a1d53e9bc33cab95904b547fbdc1bfb6d297613a32f48c177886b6323d2"),
    ("vit-so400m-12layers.json", "full"): Output(332_712, 711_251_902, "optimal",
        "29ee4e0485af7c5319349fe63e44ee2f8f2a8391908335c61814e7cf759c5051"),
    ("vit-so400m-6layers-chip.json", "storage"): INFEASIBLE,
    ("vit-so400m-6layers-chip.json", "kernels"): Output(311_412, 745_115_328, "optimal",
        "a69441d2f0c84b738bad504ceb560d7c6f1110d039a74222b79dee0078edf9c1"),
    ("vit-so400m-6layers-chip.json", "full"): Output(215_112, 711_251_902, "optimal",
        "f14ba84a8aeda2e43163edb7a0d583daf3d0859c667b5f87ac0958fb5af0ba41"),
    ("vit-so400m-6layers.json", "storage"): Output(295_284, 716_904_052, "optimal",
        "4bf11bc5e35cb87b43ca463f73d155006f6edf9207e71c9bfdd643b304e2c346"),
    ("vit-so400m-6layers.json", "kernels"): Output(277_620, 705_905_072, "optimal",
        "56744064a96fe31c0a1e733ecc938734196783e3e760986ed3aa3e99d641de82"),
    ("vit-so400m-6layers.json", "full"): Output(215_112, 711_251_902, "optimal",
        "eb0dee6806264c00b9f288d806ae1da7e8763914f4703d901540ed2ae46e47a8"),
    ("vit-so400m-finalist-5-tight.json", "storage"): Output(176_740, 716_904_052, "optimal",
        "447c9a9117fc685c6bf50882c5cfd8f65a2da4c700b44aa296ee474c3eeb3b7b"),
    ("vit-so400m-finalist-5-tight.json", "kernels"): Output(159_076, 654_181_876, "optimal",
        "834014aee55efc74836b1ad8b74f19c00e21678a6f7f8e75e6936d4b45a03073"),
    ("vit-so400m-finalist-5-tight.json", "full"): Output(136_712, 659_519_330, "optimal",
        "3d8864775415af62daf8342cf7aa3ca12bac571968343ea1f8a4337d152802b0"),
    ("vit-so400m-finalist-5.json", "storage"): Output(176_740, 716_904_052, "optimal",
        "035025bb9752ef5c627d147bc16d1b99500fe9f3568e590e3ffb4225ec63d656"),
    ("vit-so400m-finalist-5.json", "kernels"): Output(159_076, 654_181_876, "optimal",
        "47edf38addb2b2ef905a8501dbeb73c5b2cee01fd5203970c0ed71927488c981"),
    ("vit-so400m-finalist-5.json", "full"): Output(136_712, 659_519_330, "optimal",
        "aec10aee0e91c326818abf9da7798257079a86e6816bb2a6822e456f04d8150d"),
    ("vit-so400m-unroll3.json", "storage"): Output(224_576, 2_150_712_156, "optimal",
        "78ca4b9ec2514cc8ba44114c3003201190e86600c7a77fe6acc76be421e3611e"),
    ("vit-so400m-unroll3.json", "kernels"): Output(176_564, 2_034_875_524, "optimal",
        "c56d17b2dacf4c92b8ed01b5bf9fe139d2684d7e5d023fe011dc14afcab92a5e"),
    ("vit-so400m-unroll3.json", "full"): Output(150_748, 2_048_184_144, "optimal",
        "a52225c610d1fc20c58feb22d91a6bec05adc279d4ce8617336d7a8d5f2f02d0"),
}


def only_free_values_changed(plan, result) -> bool:
    """The output differs from the input only where the scope's levels freed something: layouts and shapes of
    free values, and only with a kernel family (never with `storage` alone) the operations of its Gemms."""
    space = result.prepared.space
    free = {m for group in space.free for m in group.members}
    families = {m for group in space.free if group.kind in ("kernel", "attention") for m in group.members}
    changed = {a.id for a, b in zip(plan.values, result.plan.values) if (a.layout, a.shape) != (b.layout, b.shape)}
    reshaped = {a.id for a, b in zip(plan.values, result.plan.values) if a.shape != b.shape}
    operations = {a.index for a, b in zip(plan.steps, result.plan.steps) if a.operation != b.operation}
    gemms = {s.index for s in plan.steps if s.parsed_operation.kind == "Gemm"}
    return changed <= free and reshaped <= families and operations <= (gemms if families else set())


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
    assert only_free_values_changed(plan, result)
    figures = (result.after.raw_peak, result.exchange_after, result.status.value)
    assert figures == (expected.raw_peak, expected.exchange_after, expected.status)
    assert hashlib.sha256(dump_plan(result.plan).encode()).hexdigest() == expected.sha256
