"""When each value is live: the facts the estimate and the dataflow both start from."""

from __future__ import annotations

from dataclasses import dataclass
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

    def is_live(self, value_id: int) -> bool:
        return self.first[value_id] >= 0


def liveness(plan: Plan) -> Liveness:
    count, steps = len(plan.values), len(plan.steps)
    first = [-1] * count
    last = [-1] * count
    for step in plan.steps:
        for value_id in step.live:
            if first[value_id] < 0:
                first[value_id] = step.index
            last[value_id] = step.index
    born: list[list[int]] = [[] for _ in range(steps)]
    dies: list[list[int]] = [[] for _ in range(steps)]
    for value_id in range(count):
        if first[value_id] >= 0:
            born[first[value_id]].append(value_id)
            dies[last[value_id]].append(value_id)
    return Liveness(tuple(first), tuple(last), tuple(map(tuple, born)), tuple(map(tuple, dies)))


def live_entries(plan: Plan) -> tuple[np.ndarray, np.ndarray]:
    """How many values each step has live, and all of them, step after step: for vectorised sums."""
    lengths = np.fromiter(map(len, (step.live for step in plan.steps)), dtype=np.int64, count=len(plan.steps))
    every = chain.from_iterable(step.live for step in plan.steps)
    value_of = np.fromiter(every, dtype=np.int64, count=int(lengths.sum()))
    return lengths, value_of
