"""The options of a run (`replan.options.OptimizeOptions`): a bad value is one line naming the option, sizes read as
text, the budgets and solver settings a run takes from them, and the fingerprint of every setting that can change
the output bytes."""

from __future__ import annotations

import pytest

from ipuplan.plan.budgets import Budgets
from ipuplan.replan.options import BadOption, OptimizeOptions, default_workers


@pytest.mark.parametrize(("values", "words"),
                         [({"budget": True}, "option budget: expected a number, got the bool True"),
                          ({"workers": False}, "option workers: expected a number"),
                          ({"bogus": 1}, "option bogus: Extra inputs are not permitted")])
def test_options_built_directly_refuse_bad_values_in_one_line(values, words):
    with pytest.raises(BadOption) as raised:
        OptimizeOptions(**values)
    assert str(raised.value).startswith(words) and "\n" not in str(raised.value)


def test_memory_limit_reads_sizes_and_leaves_the_fingerprint_alone():
    assert OptimizeOptions(memory_limit="8G").memory_limit == 8 << 30
    assert OptimizeOptions(memory_limit="512M").memory_limit == 512 << 20
    assert OptimizeOptions(memory_limit=1000).memory_limit == 1000
    assert OptimizeOptions(memory_limit="8G").fingerprint() == OptimizeOptions().fingerprint()


def test_changed_values_are_validated_again():
    options = OptimizeOptions(workers=1)
    assert options.with_values(seed=7) == OptimizeOptions(workers=1, seed=7)
    with pytest.raises(BadOption, match="^option time_limit: "):
        options.with_values(time_limit=0)


def test_the_budgets_of_a_run_are_the_plans_with_the_options_overrides(reference_plan):
    own = Budgets.of(reference_plan)
    assert OptimizeOptions().budgets_for(reference_plan) == own
    overridden = OptimizeOptions(budget=500_000, support_reserve=1000).budgets_for(reference_plan)
    assert overridden == Budgets(500_000, own.interleaved_budget_bytes, 1000)


def test_one_worker_is_a_deterministic_solve_and_none_the_machines_share():
    one = OptimizeOptions(workers=1, seed=3, time_limit=4, objective="fit").solver_settings("m.pbtxt")
    assert (one.workers, one.deterministic, one.seed, one.time_limit, one.objective.value, one.dump_model) == (
        1, True, 3, 4.0, "fit", "m.pbtxt")
    default = OptimizeOptions().solver_settings()
    assert (default.workers, default.deterministic) == (default_workers(), False)


def test_the_fingerprint_follows_the_pin_files_bytes_not_its_name(tmp_path):
    pins = tmp_path / "pins.json"
    pins.write_text('{"vit.*": "layout"}')
    first = OptimizeOptions(pin_file=pins).fingerprint()
    pins.write_text('{"vit.*": "class"}')
    edited = OptimizeOptions(pin_file=pins).fingerprint()
    assert first["pin_file_sha256"] != edited["pin_file_sha256"] and first["pin_file"] == edited["pin_file"]
    pins.unlink()
    assert OptimizeOptions(pin_file=pins).fingerprint()["pin_file_sha256"] is None  # gone: refused later, by the run
    assert OptimizeOptions(seed=1).fingerprint() != OptimizeOptions().fingerprint()
