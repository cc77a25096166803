"""The cyclic garbage collector held off while a plan is built (`plan.collector`): a pause turns it back on only at
the outermost, leaves the caller's garbage cycles collectable, and within a run sets what it built aside frozen until
the run ends, when the freeze count is what it was."""

from __future__ import annotations

import gc
import weakref

from reference import REFERENCE

from ipuplan import load_plan
from ipuplan.plan.collector import gc_paused, gc_run


class _Cycle:
    """An object in a reference cycle: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


def test_a_pause_lets_the_callers_garbage_cycles_be_collected():
    # a gc.freeze() at the end of a pause put the caller's young garbage out of the collector's reach for good
    cycle = _Cycle()
    alive = weakref.ref(cycle)
    del cycle
    with gc_paused():
        pass
    load_plan(REFERENCE)  # loading pauses too
    gc.collect()
    assert alive() is None


def test_nested_pauses_turn_the_collector_back_on_only_at_the_outermost():
    assert gc.isenabled()
    with gc_paused():
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_within_a_run_what_a_pause_built_stays_frozen_until_the_run_ends():
    assert gc.get_freeze_count() == 0
    with gc_run():
        with gc_paused():
            built = [[k] for k in range(1000)]
        assert gc.get_freeze_count() >= len(built)  # set aside: no collection walks it while the run lasts
        with gc_run():  # a run within the run (a thread's) ends nothing
            pass
        assert gc.get_freeze_count() >= len(built)
    assert gc.get_freeze_count() == 0


def test_a_run_begun_with_the_callers_objects_frozen_leaves_them_as_they_were():
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with gc_run(), gc_paused():
            [[k] for k in range(1000)]
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()
