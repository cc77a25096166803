"""The cyclic garbage collector held off while a plan's millions of small objects are built or dropped
(`gc_paused`), and what a run built set aside unwalked until it ends (`gc_run`). Apart from the plan's format: every
stage that builds at scale (load and dump, facts, space, model, rewrite) pauses it."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class _Runs:
    """The open `gc_run` scopes. Threads may overlap them, and the collector is one for the whole process."""

    lock = threading.Lock()
    open = 0
    freezing = False
    """Whether pauses freeze what they built: nothing was frozen when the first scope opened (else unfreezing at
    the end would thaw what the caller froze)."""


@contextmanager
def gc_run() -> Iterator[None]:
    """One run of the optimiser (`optimize`): within it, what each outermost `gc_paused` leaves is frozen,
    so that no collection walks the plan, its facts and its space again (0.4 s each time at 50,160 values, about
    once a run); leaving the last open scope unfreezes it all, so the freeze count is what it was before (issue 35:
    a freeze left in place kept every garbage cycle for good, 2 MB an `optimize` call)."""
    with _Runs.lock:
        if _Runs.open == 0:
            _Runs.freezing = gc.get_freeze_count() == 0
        _Runs.open += 1
    try:
        yield
    finally:
        with _Runs.lock:
            _Runs.open -= 1
            if _Runs.open == 0 and _Runs.freezing:
                gc.unfreeze()  # into the oldest generation, not counted as new there: no full collection is due


@contextmanager
def gc_paused() -> Iterator[None]:
    """Hold off the cyclic garbage collector while millions of small objects are built or dropped.

    A plan is millions of containers that reference counting alone frees. With the collector on,
    every few hundred allocations it walks the young ones, and now and then every object alive:
    about half the time of loading or dumping a large plan, for no garbage at all.

    Leaving the outermost pause, what was built is set aside unwalked (`_set_aside`): else the next
    young collections walk all of it, once per generation, and later full ones again (2.8 s of a
    50,160-value optimize, issue 20). Entering it, the young generations (a few thousand objects)
    are collected first, so that young garbage, such as the cycles of a CP-SAT model just solved,
    is not set aside with it to wait for a rare full collection (issue 35).
    """
    enabled = gc.isenabled()
    if enabled:
        gc.collect(1)
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            _set_aside()
            gc.enable()


def _set_aside() -> None:
    """Move every object the collector tracks out of its young generations without walking it: within a `gc_run`,
    frozen until the run ends; outside one, straight to the oldest generation, where `gc.unfreeze()` puts what
    `gc.freeze()` froze without counting it as new, so that no full collection falls due for it. Nothing stays
    frozen: a caller's own frozen objects are left as they are, and then nothing is moved."""
    with _Runs.lock:
        if _Runs.open and _Runs.freezing:
            gc.freeze()
        elif gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
