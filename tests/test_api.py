"""The Python API as a long-lived caller uses it (issue 35, item 5): no state left behind in the collector across
calls, plans that cannot change under a run, and one clear line for arguments of the wrong type."""

from __future__ import annotations

import gc
import pickle
import threading

import pytest
from reference import REFERENCE, with_step

import ipuplan
from ipuplan import PlanError, dump_plan, load_plan
from ipuplan.facts.check import check
from ipuplan.plan.format import FrozenList, Plan
from ipuplan.replan.options import BadOption
from ipuplan.replan.sweep import sweep

REFUSED = "cannot be changed in place"


# --- 1. nothing left in the collector across calls -----------------------------------------------------------


def test_five_optimize_calls_leave_the_freeze_count_as_it_was(reference_plan):
    before = gc.get_freeze_count()
    for _ in range(5):
        ipuplan.optimize(reference_plan, workers=1)
    assert gc.get_freeze_count() == before


def test_the_plan_stays_out_of_the_collectors_walks_during_a_run(reference_plan):
    # the speed of issue 20: a full collection during the solve does not walk the plan, its facts and its space
    frozen_at = {}

    def note(name: str, detail: str) -> None:
        frozen_at.setdefault(name, gc.get_freeze_count())

    ipuplan.optimize(reference_plan, workers=1, on_phase=note)
    assert frozen_at["solve"] > 0 and gc.get_freeze_count() == 0


def test_what_the_caller_froze_stays_frozen_and_nothing_more(reference_plan):
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        ipuplan.optimize(reference_plan, workers=1)
        load_plan(REFERENCE)
        assert 0 < gc.get_freeze_count() <= frozen  # some of what it froze may have been freed since
    finally:
        gc.unfreeze()


# --- 2. a plan cannot change under a run -----------------------------------------------------------------------


@pytest.mark.parametrize("change", [
    lambda plan: plan.steps[3].live.append(10**6),
    lambda plan: plan.steps[3].live.__setitem__(0, 1),
    lambda plan: plan.steps[3].live.sort(),
    lambda plan: plan.values[5].shape.__iadd__([2]),
    lambda plan: plan.values[5].shape.pop(),
    lambda plan: plan.timeline.values.clear(),
    lambda plan: plan.timeline.steps.__delitem__(0),
], ids=["append", "setitem", "sort", "iadd", "pop", "clear", "delitem"])
def test_a_plans_lists_refuse_every_change(reference_plan, change):
    before = dump_plan(reference_plan)
    with pytest.raises(TypeError, match=REFUSED):
        change(reference_plan)
    assert dump_plan(reference_plan) == before


def test_frozen_lists_still_equal_lists_and_survive_pickle(reference_plan):
    step = reference_plan.steps[3]
    assert step.live == list(step.live) and isinstance(step.live, list)
    assert step.live + [1] == [*step.live, 1]  # a new, ordinary list
    copied = pickle.loads(pickle.dumps(reference_plan))
    assert copied == reference_plan and type(copied.steps[3].live) is FrozenList
    assert dump_plan(reference_plan.model_copy(deep=True)) == dump_plan(reference_plan)


def test_model_copy_freezes_the_lists_it_is_given(reference_plan):
    live = list(reference_plan.steps[3].live)
    changed = with_step(reference_plan, 3, live=live)
    live.append(10**6)  # the caller's list, not the plan's
    assert type(changed.steps[3].live) is FrozenList and changed.steps[3].live == reference_plan.steps[3].live
    assert type(changed.timeline.steps) is FrozenList


def test_a_thread_changing_the_plan_during_optimize_changes_nothing(reference_plan):
    expected = ipuplan.optimize(reference_plan, workers=1)
    refused, done = [], threading.Event()

    def meddle() -> None:
        while not done.is_set():
            try:
                reference_plan.steps[7].live.append(len(reference_plan.values))
            except TypeError:
                refused.append(True)

    meddler = threading.Thread(target=meddle)
    meddler.start()
    try:
        result = ipuplan.optimize(reference_plan, workers=1)
    finally:
        done.set()
        meddler.join()
    assert refused and check(result.plan) == []
    assert dump_plan(result.plan) == dump_plan(expected.plan)


def test_the_result_cannot_be_changed_after_the_call(reference_plan):
    result = ipuplan.optimize(reference_plan, workers=1)
    written = dump_plan(result.plan)
    with pytest.raises(TypeError, match=REFUSED):
        result.plan.steps[0].live.append(0)
    assert dump_plan(result.plan) == written and check(result.plan) == []


def test_a_plan_with_plain_lists_is_run_on_a_frozen_snapshot(reference_plan):
    # model_construct does not validate, so its lists stay the caller's: the run copies them first
    steps = [step.model_construct(**{**dict(step), "live": list(step.live)}) for step in reference_plan.steps]
    timeline = reference_plan.timeline.model_construct(values=list(reference_plan.values), steps=steps)
    plan = Plan.model_construct(**{**dict(reference_plan), "timeline": timeline})
    snapshot = plan.snapshot()
    assert snapshot is not plan and type(snapshot.steps[7].live) is FrozenList
    steps[7].live.append(len(plan.values))  # the caller's list: not the snapshot's
    assert snapshot.steps[7].live == reference_plan.steps[7].live
    assert reference_plan.snapshot() is reference_plan  # a loaded plan is its own snapshot


@pytest.mark.parametrize("value_id, shown", [(176, "176"), (-1, "-1"), ("3", "'3'")])
def test_an_unknown_live_id_is_one_plan_error(reference_plan, value_id, shown):
    plan = with_step(reference_plan, 7, live=[*reference_plan.steps[7].live, value_id])
    slot = len(reference_plan.steps[7].live)
    with pytest.raises(PlanError) as raised:
        ipuplan.optimize(plan, workers=1)
    assert str(raised.value) == (f"<plan>: timeline.steps[7].live[{slot}]: value id {shown} does not exist "
                                 "(plan has 176 values)")


# --- 3. wrong types: one clear line ----------------------------------------------------------------------------


def test_optimize_of_a_dict_says_what_a_plan_is(reference_plan):
    with pytest.raises(TypeError) as raised:
        ipuplan.optimize(dict(reference_plan))
    assert str(raised.value) == "optimize: plan must be an ipuplan Plan (use ipuplan.load_plan(path)), got dict"


def test_optimize_of_a_path_says_what_a_plan_is():
    with pytest.raises(TypeError, match=r"^optimize: plan must be an ipuplan Plan .*, got PosixPath$"):
        ipuplan.optimize(REFERENCE)


def test_sweep_of_a_dict_says_what_a_plan_is(reference_plan):
    with pytest.raises(TypeError, match=r"^sweep: plan must be an ipuplan Plan .*, got dict$"):
        sweep(dict(reference_plan))


@pytest.mark.parametrize("name", ["budget", "interleaved_budget", "support_reserve", "workers", "seed", "time_limit"])
def test_a_bool_for_a_number_names_the_option(reference_plan, name):
    with pytest.raises(BadOption) as raised:
        ipuplan.optimize(reference_plan, **{name: True})
    assert str(raised.value) == f"option {name}: expected a number, got the bool True"


def test_a_bool_option_still_takes_a_bool(reference_plan):
    result = ipuplan.optimize(reference_plan, workers=1, keep_classes=True, best_effort=False)
    assert result.after.raw_peak <= result.before.raw_peak


def test_options_that_are_not_optimize_options_are_a_type_error(reference_plan):
    with pytest.raises(TypeError, match=r"^optimize: options must be an ipuplan.OptimizeOptions, got dict$"):
        ipuplan.optimize(reference_plan, {"workers": 1})


def test_a_hook_that_cannot_be_called_is_a_type_error(reference_plan):
    with pytest.raises(TypeError, match=r"^optimize: on_phase must be callable, got str$"):
        ipuplan.optimize(reference_plan, on_phase="print")


def test_explore_of_one_path_string_asks_for_a_list(tmp_path):
    with pytest.raises(TypeError) as raised:
        ipuplan.explore(str(REFERENCE), tmp_path / "out")
    assert str(raised.value).startswith("explore: paths must be a list of plan files or folders, not one path")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("paths, out_dir, message", [
    (REFERENCE, "out", "not one path"),
    (3, "out", "got int"),
    ([REFERENCE], 3, "explore: out_dir must be a path, got int"),
])
def test_explore_refuses_arguments_it_would_misread(tmp_path, paths, out_dir, message):
    with pytest.raises(TypeError, match=message):
        ipuplan.explore(paths, out_dir)


def test_explore_refuses_a_bool_option(tmp_path):
    with pytest.raises(BadOption, match="^option budget: "):
        ipuplan.explore([REFERENCE], tmp_path / "out", budget=True)
