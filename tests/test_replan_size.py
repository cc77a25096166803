"""How big a run will be, said before it starts (`replan.size`): its memory estimated from the plan's counts, and a
run or a derived plan past the memory limit refused in one line before its heavy stages."""

from __future__ import annotations

from dataclasses import replace

import pytest
from reference import ALL_PLANS

from ipuplan import PlanError, load_plan
from ipuplan.replan import pipeline, size
from ipuplan.replan.options import OptimizeOptions
from ipuplan.replan.size import RunTooLarge, machine_slowdown, memory_limit, require_synth_fits, run_size, synth_size

GIB = 1 << 30


def test_a_run_past_the_memory_limit_is_refused_before_its_facts(reference_plan, monkeypatch):
    monkeypatch.setattr(pipeline, "plan_facts", lambda *args: pytest.fail("the facts were computed"))
    with pytest.raises(RunTooLarge) as refused:
        pipeline.prepare(reference_plan, OptimizeOptions(memory_limit="100M"))
    assert isinstance(refused.value, PlanError) and refused.value.exit_code == 2
    assert str(refused.value) == ("<plan>: the run would need about 550 MiB (176 values, 116 steps, 3,170 live "
                                  "entries); --memory-limit is 100 MiB")


def test_the_default_limit_refuses_no_plan_of_models():
    for path in ALL_PLANS:
        size = run_size(load_plan(path), OptimizeOptions())
        assert size.bytes < min(memory_limit(), 2 << 30), path


def test_the_estimate_counts_tiles_only_where_the_exact_exchange_is_priced(reference_plan):
    wide = reference_plan.model_copy(update={"tile_count": 1 << 20})
    priced, unpriced = OptimizeOptions(), OptimizeOptions(exact_exchange="never")
    assert run_size(wide, priced).bytes - run_size(reference_plan, priced).bytes > 2 << 30
    assert run_size(wide, unpriced).bytes == run_size(reference_plan, unpriced).bytes
    assert "1,048,576 tiles" in run_size(wide, priced).counts


def test_a_refusal_says_what_the_run_needs_without_the_exact_exchange(reference_plan):
    with pytest.raises(RunTooLarge, match=r"--memory-limit is 400 MiB \(with --exact-exchange never: about 154 MiB\)$"):
        pipeline.prepare(reference_plan, OptimizeOptions(memory_limit="400M"))
    assert run_size(reference_plan, OptimizeOptions(exact_exchange="never")).bytes < 400 << 20


def test_synth_is_refused_past_the_limit_naming_what_was_asked():
    counts = (880_000, 580_000, 27_457_678)  # the reference plan unrolled 5,000 times
    needed = synth_size(*counts)
    assert synth_size(1, 1, 1) < needed < synth_size(counts[0] + 1, *counts[1:])
    require_synth_fits("--unroll 5000", *counts, limit=needed)  # exactly the limit: made
    with pytest.raises(RunTooLarge) as refused:
        require_synth_fits("--unroll 5000", *counts, limit=needed - 1)
    assert str(refused.value).startswith("<plan>: --unroll 5000 would make a plan of ~880,000 values and "
                                         "~27,457,678 live entries")
    assert memory_limit(needed) == needed  # a limit given is the limit


@pytest.mark.parametrize(("load", "runnable", "cores", "slowdown"), [
    (0.3, 1, 2, 1.0), (2.0, 1, 2, 1.0), (3.0, 1, 2, 1.5), (6.0, 2, 4, 1.5), (0.5, 3, 2, 1.5)])
def test_a_busy_machine_stretches_the_seconds_a_run_is_sized_at(reference_plan, monkeypatch, load, runnable, cores,
                                                               slowdown):
    """The 1-minute load, or the tasks runnable now where more (work that just began), over this process's cores,
    at least 1; the mandatory work and the tail scale by it, and a run that passes its limit so says how loaded the
    machine is."""
    monkeypatch.setattr(size, "machine_slowdown", machine_slowdown)  # the suite's own pin (conftest) undone
    monkeypatch.setattr(size.os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(size, "runnable_now", lambda: runnable)
    monkeypatch.setattr(size.os, "sched_getaffinity", lambda pid: set(range(cores)))
    assert machine_slowdown() == slowdown
    loaded, alone = run_size(reference_plan, OptimizeOptions()), replace(run_size(reference_plan, OptimizeOptions()),
                                                                        slowdown=1.0)
    assert loaded.mandatory_seconds == pytest.approx(alone.mandatory_seconds * slowdown)
    assert loaded.tail_seconds == pytest.approx(alone.tail_seconds * slowdown)
    said = pipeline.past_the_limit(loaded.mandatory_seconds, 0.1, loaded.slowdown)
    assert ("slower than alone" in said) == (slowdown > 1)


def test_the_tasks_runnable_now_count_this_one():
    assert size.runnable_now() >= 1


@pytest.mark.parametrize(("gib", "exact_gib", "chosen", "fits"), [
    (3.7, 2.5, None, True),  # 2 x 3.7 less the solver's pricing 2.5: 4.9 G of the 6 G share; 3.7 G within ulimit -v
    (5.0, 1.0, None, False),  # 9 G: the copy would pass the share, though each fits its own address space
    (3.7, 2.5, 4 * GIB, False),  # a chosen limit is the run's and its copy's together
    (3.7, 2.5, 5 * GIB, True),
    (5.6, 0.0, 100 * GIB, True),  # a chosen limit is all that counts, not ulimit -v's 5.5 G
])
def test_a_forked_copy_fits_beside_the_run_without_the_exact_exchange_s_solver(monkeypatch, gib, exact_gib, chosen,
                                                                                fits):
    monkeypatch.setattr(size, "machine_memory", lambda: 8 * GIB)  # a 6 G share
    monkeypatch.setattr(size, "_default_limit", lambda: (int(5.5 * GIB), size.ADDRESS_SPACE))
    run = size.RunSize(values=50_160, steps=1, live=1, tiles=size.CHIP_TILES, bytes=int(gib * GIB),
                       exact_bytes=int(exact_gib * GIB))
    assert size.room_for_a_copy(run, chosen) == fits


def test_a_copy_s_room_counts_the_exchange_s_pricing_per_tile_as_the_copy_s(monkeypatch):
    monkeypatch.setattr(size, "machine_memory", lambda: 8 * GIB)
    tiles = 4 * size.CHIP_TILES
    per_tile = size._tile_bytes(tiles)
    assert per_tile > 0
    run = size.RunSize(values=50_160, steps=1, live=1, tiles=tiles, bytes=3 * GIB, exact_bytes=GIB + per_tile)
    limit = 2 * run.bytes - GIB
    assert size.room_for_a_copy(run, limit) and not size.room_for_a_copy(run, limit - 1)
