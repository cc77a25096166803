"""Large-neighbourhood search with CP-SAT for problems with pairwise costs: most groups fixed at the incumbent, a
connected neighbourhood of them (over the edges) free, solved exactly as a small problem of its own, the result
kept when it is cheaper (issue 23: the IOPDDL instances, 30k groups and 50k edges, whose whole model CP-SAT cannot
presolve in a minute).

The neighbourhood's problem (`Neighbourhood.problem`) has the free groups only: each edge to a fixed group becomes
exchange of the free side's candidates (priced at the fixed pick), the rows are those where the free groups could
pass a limit, one per run of rows with the same free terms and limit, their constants the fixed groups' bytes. Its
table is read off the whole table's spans (`construct.GroupRows`): no per-row Python objects. A neighbourhood grows
from a seed group on an edge that costs more than its least pair, breadth first; its size follows the outcomes
(larger after a proven optimum, smaller after a timeout).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ipuplan.model.problem import FORBIDDEN, Edge, Problem, TableRows, TermTable, Usage, ranges, spans_of
from ipuplan.solvers.construct import GroupRows
from ipuplan.solvers.deadline import DETERMINISTIC_WALL
from ipuplan.solvers.lagrange import Slack, group_rows

FIRST_SIZE = 60
"""Free groups of the first neighbourhood."""
LARGEST = 300
"""Free groups of a neighbourhood at most. IOPDDL, 60 s on A and 180 s on M, alone: 2000 (grown to some 800 after
proofs) 14.7 G and 85.2 G; 300: 12.7 G and 80.8 G; 180: 13.4 G on A; 100: 15.2 G. Larger ones cost their pair
booleans' building and presolve more than they find."""
SMALLEST = 10
STEP_SECONDS = 2.0
"""CP-SAT's time per neighbourhood at most."""
REPAIR_SIZE = 150
"""Groups a repair frees at the row furthest over a limit (those that can relieve it most), with as many of their
neighbours at most. IOPDDL K's Lagrangian rounds, 5 MB to 50 GB over the limit at 12-13 G: valid at 12.2-13.9 G in
2-9 s, where `lagrange.relieve`'s one-group moves left them over."""
REPAIR_SECONDS = 3.0
"""CP-SAT's time per repair neighbourhood at most, both its solves (`cpsat.repair_part`): its least excess takes a
few tenths of a second on IOPDDL K, its least exchange at that excess what the excess leaves. Given the excess's
2 s and half of it (what was), a neighbourhood of K kept 1.82 G and 0.82 G where the time the excess left gave the
exchange 1.09 G and 0.73 G (its choice before: 0.93 G and 0.69 G, 0.16 GB and some bytes over the limit)."""
REPAIR_PARTS = 6
"""Neighbourhoods one repair solves at most (K's repairs that end valid take 1-3; S's first round, 10.7 T over,
took 20 in 21 s and stayed over)."""
PART_UNITS = 0.02
"""Deterministic units a neighbourhood counts at least (its building is work too): a search of N units solves at
most N / PART_UNITS of them."""


@dataclass(frozen=True)
class Neighbourhood:
    groups: np.ndarray
    """The free groups (indices of the whole problem), ascending."""
    problem: Problem


def neighbourhood(problem: Problem, index: GroupRows, choice, free: np.ndarray, usage: Usage) -> Neighbourhood:
    """The problem over the `free` groups, the others fixed at `choice` (module docstring); `usage` is the choice's
    (kept by the caller: computing it over the whole problem took 1.4 s per neighbourhood on IOPDDL A)."""
    local = {int(g): k for k, g in enumerate(free.tolist())}
    exchange, edges = [], []
    for g in free.tolist():
        costs = np.minimum(np.asarray(problem.exchange[g], dtype=np.int64), FORBIDDEN)
        for other, matrix in index.pairing.incident.get(g, ()):
            if other in local:
                if local[g] < local[other]:
                    edges.append(Edge(local[g], local[other], matrix))
            else:
                costs = np.minimum(costs + matrix[:, choice[other]], FORBIDDEN)
        exchange.append(tuple(costs.tolist()))
    sub = Problem(candidate_counts=tuple(problem.candidate_counts[g] for g in free.tolist()),
                  input_choice=tuple(int(choice[g]) for g in free.tolist()), group_sizes=(0,) * len(free),
                  rows=_rows(problem, index, choice, free, usage), exchange=tuple(exchange), limits=problem.limits,
                  steps_total=problem.table.rows, edges=tuple(edges))
    return Neighbourhood(free, sub)


def _rows(problem: Problem, index: GroupRows, choice, free: np.ndarray, usage: Usage) -> TableRows:
    """The neighbourhood's rows, read from a table of its free groups' spans: its constants the fixed groups' bytes;
    of the rows where the free groups could pass a limit, per run of rows with the same free groups' terms (between
    two of their spans' ends) and per limit only the row of the most fixed bytes, which every other row of the run
    is within whatever the free groups pick (IOPDDL A: a few hundred rows for thousands)."""
    table = index.table
    located = [index.located(g) for g in free.tolist()]
    standard, interleaved = usage.standard.copy(), usage.interleaved.copy()
    reach = np.zeros(table.rows, dtype=np.int64)
    touched = np.zeros(table.rows, dtype=bool)
    for g, (rows, terms) in zip(free.tolist(), located):
        at = table.start[terms] + choice[g]
        standard[rows] -= table.standard[at]
        interleaved[rows] -= table.interleaved[at]
        reach[rows] += index.most[0][terms]
        touched[rows] = True
    kept = np.zeros(table.rows, dtype=bool)
    for limit in problem.limits:
        kept |= limit.usage(standard, interleaved) + max(limit.standard, limit.interleaved) * reach > limit.bytes
    candidates = np.flatnonzero(kept & touched)
    runs = np.searchsorted(_span_bounds(index, free), candidates, side="right")
    picked = np.zeros(table.rows, dtype=bool)
    for limit in problem.limits:
        picked[candidates[_most_per_run(runs, limit.usage(standard[candidates], interleaved[candidates]))]] = True
    return TableRows(_local_table(table, located, picked, standard, interleaved), np.flatnonzero(picked))


def _most_per_run(runs: np.ndarray, figures: np.ndarray) -> np.ndarray:
    """Per run (`runs`: each entry's, ascending or not), the entry of the highest figure."""
    order = np.lexsort((-figures, runs))
    first = np.ones(len(order), dtype=bool)
    first[1:] = runs[order][1:] != runs[order][:-1]
    return order[first]


def _span_bounds(index: GroupRows, free: np.ndarray) -> np.ndarray:
    """Every row at which one of the free groups' terms begins or after which one ends, ascending."""
    table = index.table
    spans = np.concatenate([index.spans[index.bounds[g]:index.bounds[g + 1]] for g in free.tolist()])
    return np.unique(np.concatenate([table.span_first[spans], table.span_end[spans]]))


def _local_table(table: TermTable, located: list[tuple[np.ndarray, np.ndarray]], picked: np.ndarray,
                 standard: np.ndarray, interleaved: np.ndarray) -> TermTable:
    """The table of the free groups (the k-th of `located` is group k) at the `picked` rows, renumbered."""
    number = np.cumsum(picked) - 1
    parts = [(number[rows[picked[rows]]], terms[picked[rows]], np.full(int(picked[rows].sum()), k))
             for k, (rows, terms) in enumerate(located)]
    row, whole, group = (np.concatenate(column) for column in zip(*parts)) if parts else (np.zeros(0, np.int64),) * 3
    distinct, term = np.unique(whole, return_inverse=True)
    groups = np.zeros(len(distinct), dtype=np.int64)
    groups[term] = group
    counts = table.counts[distinct]
    starts = np.cumsum(counts) - counts
    at = ranges(table.start[distinct], counts)
    span_term, span_first, span_end = spans_of(row, term.reshape(-1))
    return TermTable(groups, starts, table.standard[at], table.interleaved[at], span_term, span_first, span_end,
                     standard[picked], interleaved[picked])


def grown(index: GroupRows, seed: int, size: int, random: np.random.Generator) -> np.ndarray:
    """Up to `size` groups reached from `seed` over the edges, breadth first (each layer in a random order)."""
    taken, layer = {seed}, [seed]
    while layer and len(taken) < size:
        following = []
        for g in layer:
            for other, _ in index.pairing.incident.get(g, ()):
                if other not in taken and len(taken) < size:
                    taken.add(other)
                    following.append(other)
        random.shuffle(following)
        layer = following
    return np.array(sorted(taken), dtype=np.int64)


def _seeds(problem: Problem, index: GroupRows, choice, tried: np.ndarray) -> np.ndarray:
    """Groups on an edge that costs more than its least pair at `choice`, or at a candidate dearer than their least,
    the dearest excess first, those `tried` left out."""
    excess = index.pairing.excess(choice, problem.groups)
    excess += [float(costs[c] - min(costs)) for costs, c in zip(problem.exchange, choice)]
    excess[tried] = 0
    order = np.argsort(-excess, kind="stable")
    return order[excess[order] > 0]


PartRepair = Callable[[Problem, float, int], tuple[int, ...] | None]
"""Solves a neighbourhood's problem from its input choice within seconds in all, with a seed, for the least excess over
its limits, then the least exchange at that excess: its choice, or None when it found none (`cpsat.repair_part`)."""


def repaired(problem: Problem, choice, repair_part: PartRepair, deadline: float, seed: int = 0,
             index: GroupRows | None = None) -> list[int]:
    """`choice` moved off the row furthest over a limit, a neighbourhood at a time, while one is, each neighbourhood
    lessening the excess, and `deadline` (a `time.perf_counter` value) is not past: the groups live there that can
    relieve it most (REPAIR_SIZE) and their neighbours, solved by `repair_part`. Never a forbidden pick: the
    neighbourhood's exchange prices every pair with a fixed group."""
    index = group_rows(problem) if index is None else index
    random = np.random.default_rng(seed)
    choice = list(choice)
    usage = problem.usage(choice).copy()
    violation = usage.violation(problem.limits)
    for _ in range(REPAIR_PARTS):
        if violation == 0 or deadline - time.perf_counter() <= 0.05:
            break
        free = _relieving(problem, index, choice)
        if not len(free):  # no group there has a lighter candidate
            break
        part = neighbourhood(problem, index, choice, free, usage)
        found = repair_part(part.problem, min(REPAIR_SECONDS, deadline - time.perf_counter()),
                            int(random.integers(1 << 30)))
        if found is None:
            break
        was = [choice[g] for g in free.tolist()]
        _move(index, usage, choice, free, found)
        now = usage.violation(problem.limits)
        if now >= violation:  # no lighter: back to where it was, and the rounds go on without it
            _move(index, usage, choice, free, was)
            break
        violation = now
    return choice


def _move(index: GroupRows, usage: Usage, choice: list[int], groups: np.ndarray, picks) -> None:
    """The `groups` to their `picks`, in `choice` and in `usage`."""
    for g, c in zip(groups.tolist(), picks):
        if c != choice[g]:
            index.moved(usage, g, choice[g], c)
            choice[g] = c


def _relieving(problem: Problem, index: GroupRows, choice: list[int]) -> np.ndarray:
    """The groups live at the row furthest over a limit that can relieve it most (REPAIR_SIZE), and as many of
    their neighbours at most, ascending."""
    slack = Slack(problem, choice, index)
    groups = np.unique(problem.table.groups_at(slack.worst()))
    relief = np.array([slack.relief(g, choice[g]).max(initial=0) for g in groups.tolist()])
    order = np.argsort(-relief, kind="stable")
    top = groups[order[relief[order] > 0]][:REPAIR_SIZE].tolist()
    free = set(top)
    for g in top:
        for other, _ in index.pairing.incident.get(g, ()):
            if len(free) < 2 * REPAIR_SIZE:
                free.add(other)
    return np.array(sorted(free), dtype=np.int64)


PartSolve = Callable[[Problem, float, int], tuple[bool, tuple[int, ...] | None, float]]
"""Solves a neighbourhood's problem from its input choice within seconds, with a seed: (proven optimal, its choice
no dearer than the input, or None, the deterministic units it used). The CP-SAT backend passes its own
(`cpsat.solve_part`)."""


def search(problem: Problem, choice, seconds: float, solve_part: PartSolve, seed: int = 0, progress=None,
           started: float = 0.0, index: GroupRows | None = None, deterministic: bool = False) -> tuple[int, ...]:
    """Neighbourhoods solved one after the other for `seconds`: the incumbent at the end, `progress` told of each
    improvement that is valid (a neighbourhood's solution never makes a forbidden pick nor passes a limit at the
    rows it may change, so an incumbent over no limit stays so). `index`: the problem's GroupRows (the shared one,
    `lagrange.group_rows`, when not given). `deterministic`: `seconds` are CP-SAT's deterministic units, the
    neighbourhoods' own summed, so that the same neighbourhoods are solved on every machine."""
    if seconds <= 0:
        return tuple(choice)
    deadline, units = time.perf_counter() + seconds * (DETERMINISTIC_WALL if deterministic else 1.0), 0.0

    def left() -> float:  # with one worker the units, and the wall time only as a guard
        return min(seconds - units, deadline - time.perf_counter()) if deterministic else deadline - time.perf_counter()

    index = group_rows(problem) if index is None else index
    random = np.random.default_rng(seed)
    choice = list(choice)
    usage = problem.usage(choice).copy()  # kept as the incumbent moves
    over = usage.violation(problem.limits) > 0
    size = FIRST_SIZE
    # a seed whose neighbourhood found nothing is tried again only once a move reached it, or every seed was tried
    tried = np.zeros(problem.groups, dtype=bool)
    seeds, at = _seeds(problem, index, choice, tried), 0
    while left() > 0.05 and problem.groups:
        if at >= len(seeds):
            tried[:] = False
            seeds, at = _seeds(problem, index, choice, tried), 0
            if not len(seeds):
                break
            size = min(size * 2, LARGEST, problem.groups)
        start = int(seeds[at]) if random.random() < 0.8 else int(random.integers(problem.groups))
        at += 1
        tried[start] = True
        free = grown(index, start, size, random)
        part = neighbourhood(problem, index, choice, free, usage)
        before = part.problem.exchange_of(part.problem.input_choice)
        optimal, found, used = solve_part(part.problem, max(min(STEP_SECONDS, left()), 0.05),
                                          int(random.integers(1 << 30)))
        units += max(used, PART_UNITS)
        size = min(int(size * 1.25) + 1, LARGEST, problem.groups) if optimal else max(int(size / 1.25), SMALLEST)
        if found is not None and part.problem.exchange_of(found) < before:
            _move(index, usage, choice, free, found)
            # the dearest edges are elsewhere now (IOPDDL A: a list kept from the start left seeds at 1.2 G untried)
            tried[free] = False
            seeds, at = _seeds(problem, index, choice, tried), 0
            over = over and usage.violation(problem.limits) > 0
            if progress is not None and not over and not problem.forbidden_in(choice):
                progress("neighbourhoods", problem.exchange_of(choice), 0, time.perf_counter() - started)
    return tuple(choice)
