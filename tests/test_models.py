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
    ("vit-so400m-12layers-chip.json", "full"): Output(332_712, 639_130_042, "optimal",
        "f561e98e63e3bb07078ae653c55b2de5d486368bb613c41af8516037c8b5cc13"),
    ("vit-so400m-12layers.json", "storage"): Output(473_100, 716_605_388, "optimal",
        "12570b82e51b010e54a96c58d4aecf8ea194d51828cd083df027e38b623c12d1"),
    ("vit-so400m-12layers.json", "kernels"): Output(455_436, 633_760_184, "optimal",
        "9b5c8865f0cd9d413752ac08af2e63a7d69f2f01b2f664d377621993afac56c8"),
    ("vit-so400m-12layers.json", "full"): Output(332_712, 639_130_042, "optimal",
        "836f38b8c663ae8c4f178c93dd935024f981458bd328c5dc0034b437f04e0c9e"),
    ("vit-so400m-6layers-chip.json", "storage"): INFEASIBLE,
    ("vit-so400m-6layers-chip.json", "kernels"): Output(311_412, 665_365_424, "optimal",
        "abfba51566f5d683f15659de170c84125bce91375246a7542557ecd1b235435b"),
    ("vit-so400m-6layers-chip.json", "full"): Output(215_112, 639_130_042, "optimal",
        "52abf4a0728892d2a7e8f1cb5b1013274fb5df78574f82a55e68195a2478e9ff"),
    ("vit-so400m-6layers.json", "storage"): Output(295_284, 716_605_388, "optimal",
        "8ded65195896dc3f051efab5a7507846f108f30c1e34b31192d1e61632ff530b"),
    ("vit-so400m-6layers.json", "kernels"): Output(277_620, 633_760_184, "optimal",
        "85e2b1106792ed930b74c38fdd96b3b21724146b43bac7221694aad09fa12ff2"),
    ("vit-so400m-6layers.json", "full"): Output(215_112, 639_130_042, "optimal",
        "4faad56601e47f62ee052290493ee3da239980ac8da1f9295a57a2257b2cdb5b"),
    ("vit-so400m-finalist-5-tight.json", "storage"): Output(176_740, 716_605_388, "optimal",
        "d08d0cdaa65581c2b7ef641d4b5b6948ab095aec0a2a075400283dbc73b6c9cd"),
    ("vit-so400m-finalist-5-tight.json", "kernels"): Output(159_076, 633_760_184, "optimal",
        "2cf9c781a3bea322ba4d31cf03179333239b4acc3fff80071f34280811560257"),
    ("vit-so400m-finalist-5-tight.json", "full"): Output(136_712, 639_130_042, "optimal",
        "51db2d7f3fbcc2bfd637c2573dfeb03211e9f565c49402374a870753267e8c73"),
    ("vit-so400m-finalist-5.json", "storage"): Output(176_740, 716_605_388, "optimal",
        "e2ddc0ea5bf006bfefabd6a3a21bd5f395403729b619bd225da03d23d9b7f019"),
    ("vit-so400m-finalist-5.json", "kernels"): Output(159_076, 633_760_184, "optimal",
        "3d7726bd277721fbf6999b512793840c6f1d762e42d5df88ba562d0e6d4fdcd8"),
    ("vit-so400m-finalist-5.json", "full"): Output(136_712, 639_130_042, "optimal",
        "018fc99a82c049119aab118d62dc92f83d4b8fab162645f36f300d1aeef76885"),
    ("vit-so400m-unroll3.json", "storage"): Output(224_576, 2_144_848_560, "optimal",
        "4ce647562eed68f8f7e452f417f4024e06bf290981b99a458cf6800ae4321e19"),
    ("vit-so400m-unroll3.json", "kernels"): Output(176_564, 1_897_241_692, "optimal",
        "4c4c24f46d73f0307a66f641c897664ee392c346e3f415015c2a3615a734a006"),
    ("vit-so400m-unroll3.json", "full"): Output(150_748, 1_911_180_522, "optimal",
        "a88f04cb66a9595e2ea701995e96f1d77bb022bad25b7b13bbf2f434a0c6fb1d"),
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
    # the model chose by the written plan's exact exchange, counted again from the plan (issue 24)
    assert result.exact and result.model_exchange_after == result.exchange_after
    figures = (result.after.raw_peak, result.exchange_after, result.status.value)
    assert figures == (expected.raw_peak, expected.exchange_after, expected.status)
    assert hashlib.sha256(dump_plan(result.plan).encode()).hexdigest() == expected.sha256
