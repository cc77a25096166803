"""When each value is live: the facts the estimate and the dataflow both start from."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ipuplan.format import Plan


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


def live_matrix(plan: Plan) -> tuple[np.ndarray, np.ndarray]:
    """Flat (step index, value id) pairs of every live entry, for vectorised sums."""
    lengths = np.fromiter((len(step.live) for step in plan.steps), dtype=np.int64, count=len(plan.steps))
    step_of = np.repeat(np.arange(len(plan.steps), dtype=np.int64), lengths)
    value_of = np.fromiter((v for step in plan.steps for v in step.live), dtype=np.int64, count=int(lengths.sum()))
    return step_of, value_of
