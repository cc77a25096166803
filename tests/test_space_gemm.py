"""Freedom level `kernels` (space/levels/gemm.py): Gemm families re-split as one unit, and the search that finds their
splits."""

from __future__ import annotations

import numpy as np
import pytest

from ipuplan.facts.check import check
from ipuplan.plan.layout import format_layout
from ipuplan.replan.against import against
from ipuplan.replan.pipeline import optimize
from ipuplan.space.levels.gemm import PARETO_BLOCK, pareto_front, split_grid


def _front_one_at_a_time(vectors):
    """The Pareto front by its definition: in lexicographic order, keep what no kept vector is at most."""
    kept: list[int] = []
    for index in np.lexsort(vectors.T[::-1]):
        if not any((vectors[k] <= vectors[index]).all() for k in kept):
            kept.append(int(index))
    return kept


@pytest.mark.parametrize("seed", range(6))
def test_pareto_front_in_blocks_is_the_front_one_vector_at_a_time(seed):
    rng = np.random.default_rng(seed)  # few distinct values: many equal and dominated vectors, fronts across blocks
    vectors = rng.integers(0, 6, size=(int(rng.integers(1, 3 * PARETO_BLOCK)), int(rng.integers(1, 7))))
    assert pareto_front(vectors) == _front_one_at_a_time(vectors)


def test_split_grid_is_the_nested_loops_in_their_order():
    options = [[1, 2, 3, 5], [1, 2, 4, 8], [1, 3, 9]]
    for tiles in (1, 7, 24, 1000):
        loops = [[a, b, c] for a in options[0] for b in options[1] for c in options[2] if a * b * c <= tiles]
        assert split_grid(options, tiles).tolist() == loops


def test_kernel_candidates_start_with_the_input_split(reference_plan, spaces):
    kernels = [g for g in spaces["kernels"].free if g.kind == "kernel"]
    assert len(kernels) == 10  # every recognised family, the MAP head's at step 72 included
    for group in kernels:
        first = group.candidates[0]
        assert all(format_layout(x) == reference_plan.values[m].layout for m, x in zip(group.members, first.layouts))


def test_kernel_scope_optimises_the_reference_plan_legally(reference_plan):
    storage = optimize(reference_plan, workers=1, time_limit=10, scope="storage")
    kernels = optimize(reference_plan, workers=1, time_limit=10, scope="kernels")
    assert kernels.status.value == "optimal" and kernels.after.raw_peak == kernels.bound
    assert kernels.after.raw_peak < storage.after.raw_peak
    assert check(kernels.plan) == [] and against(reference_plan, kernels.plan, "kernels") == []
    resplit = [s.index for s, t in zip(reference_plan.steps, kernels.plan.steps) if s.operation != t.operation]
    assert resplit and all(reference_plan.steps[i].parsed_operation.kind == "Gemm" for i in resplit)
