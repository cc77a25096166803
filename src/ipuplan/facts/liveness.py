"""When each value is live: the facts the estimate and the dataflow both start from."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain

import numpy as np

from ipuplan.plan.format import Plan


@dataclass(frozen=True)
class Liveness:
    """`first[v]`/`last[v]` = first/last step where value v is live (-1 if never live)."""

    first: tuple[int, ...]
    last: tuple[int, ...]
    born_at: tuple[tuple[int, ...], ...]
    dies_at: tuple[tuple[int, ...], ...]
    entries: tuple[np.ndarray, np.ndarray] = field(compare=False, repr=False)
    """`live_entries` of the plan (read-only), kept for the estimate's sums."""

    def is_live(self, value_id: int) -> bool:
        return self.first[value_id] >= 0


def liveness(plan: Plan) -> Liveness:
    count, steps = len(plan.values), len(plan.steps)
    lengths, value_of = live_entries(plan)
    lengths.flags.writeable = value_of.flags.writeable = False
    step_of = np.repeat(np.arange(steps, dtype=np.int64), lengths)
    first = np.full(count, steps, dtype=np.int64)
    last = np.full(count, -1, dtype=np.int64)
    np.minimum.at(first, value_of, step_of)
    np.maximum.at(last, value_of, step_of)
    first[last < 0] = -1
    return Liveness(tuple(first.tolist()), tuple(last.tolist()), _by_step(first, steps), _by_step(last, steps),
                    (lengths, value_of))


def same_live_sets(before: Plan, after: Plan) -> bool:
    """Whether both plans have as many values and the same steps live sets (the liveness reads nothing else)."""
    return (len(before.values) == len(after.values) and len(before.steps) == len(after.steps)
            and all(old.live is new.live or old.live == new.live for old, new in zip(before.steps, after.steps)))


def _by_step(step_of: np.ndarray, steps: int) -> tuple[tuple[int, ...], ...]:
    """Per step, the values whose `step_of` it is (-1: none), in increasing id."""
    live = np.flatnonzero(step_of >= 0)
    ordered = live[np.argsort(step_of[live], kind="stable")].tolist()
    ends = np.cumsum(np.bincount(step_of[live], minlength=steps)).tolist()
    return tuple(tuple(ordered[start:end]) for start, end in zip([0, *ends], ends))


def live_entries(plan: Plan) -> tuple[np.ndarray, np.ndarray]:
    """How many values each step has live, and all of them, step after step: for vectorised sums."""
    lengths = np.fromiter(map(len, (step.live for step in plan.steps)), dtype=np.int64, count=len(plan.steps))
    every = chain.from_iterable(step.live for step in plan.steps)
    value_of = np.fromiter(every, dtype=np.int64, count=int(lengths.sum()))
    return lengths, value_of
