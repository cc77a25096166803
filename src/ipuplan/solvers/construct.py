"""Constructive solution: a complete choice in (near) linear time, so a solve never ends with nothing.

Each group starts at its smallest candidate (the least bytes summed over the rows it is live at,
then the least exchange and changes); groups with edges then settle one at a time against their
neighbours' picks (no forbidden pair first, then the same keys, a pair priced at the neighbour's
pick); a greedy repair then moves one group at a time off the row most over budget (or the peak
row; while a forbidden pick is left, off that pick), never to more forbidden picks, scoring every
candidate of a group at once with numpy over the rows that group touches. Deterministic: a move
cap, no clock. The CP-SAT backend hints it, and skips the solve when it provably meets every
term's bound.
"""

from __future__ import annotations

from functools import cached_property
from itertools import chain
from typing import NamedTuple

import numpy as np

from ipuplan.model.objective import Objective
from ipuplan.model.problem import FORBIDDEN, Problem, Usage, pairs_at, ranges

MOVES = 4000
"""Repair moves at least, and a quarter of the groups where more: a deterministic cap (no clock). An unrolled program
needs a move per copy of each fix (282 moves for 4,047 groups at 10k values, about 1,300 for 20,235 at 50k); a
fixed 4,000 stopped the repair short at 200k values, 2.3% above the peak the same program reaches at 50k."""
LOCATED_ROWS = 4 << 20
"""Rows of groups' spans written out that a `GroupRows` keeps (64 MB at most)."""
FRAMED_ROWS = 2 << 20
"""Rows of group sets' `Frame`s that a `GroupRows` keeps (48 MB at most): a repair at 50k values scores 284 sets of
about 5,000 rows each (1.4 M), each about four times, in turn (a cache of the last few sets would never be hit)."""
PASSES = 20
"""Passes over the groups with edges at most while they settle against their neighbours (each pass that moves
one lowers (forbidden picks, bytes or exchange, ...) of the whole choice, so it ends anyway)."""


class Pairing:
    """Per group, its edges' costs with its candidates as rows and the neighbour at the other end, and which of
    its candidates are forbidden on their own; the forbidden picks and pair prices of a choice, group by group."""

    def __init__(self, problem: Problem) -> None:
        self.incident: dict[int, list[tuple[int, np.ndarray]]] = {}
        for edge in problem.edges:
            self.incident.setdefault(edge.a, []).append((edge.b, edge.costs))
            self.incident.setdefault(edge.b, []).append((edge.a, edge.costs.T))
        unary = problem.exchange
        flat = np.fromiter(chain.from_iterable(unary), dtype=np.float64)
        self.alone = {} if not (flat >= FORBIDDEN).any() else {
            g: np.asarray(costs) >= FORBIDDEN for g, costs in enumerate(unary) if max(costs) >= FORBIDDEN}
        self.priced = sorted(set(self.incident) | set(self.alone))
        """Groups whose candidates may differ in forbidden picks or pair costs (none: the repair as without edges)."""
        self.edge_costs = problem.edge_costs
        """The problem's arrays (not the problem: `lagrange.group_rows` keeps this only while the problem lives)."""
        costs, self.ends, _, offsets = self.edge_costs
        self.least = np.minimum.reduceat(costs, offsets) if len(offsets) else np.zeros(0, dtype=np.int64)
        """Per edge, its least pair cost."""

    def forbidden(self, g: int, choice) -> np.ndarray | int:
        """Per candidate of `g`, its forbidden picks (alone, and in a pair with a neighbour's pick); 0 when none."""
        found = self.alone.get(g, 0)
        for other, costs in self.incident.get(g, ()):
            found = found + (costs[:, choice[other]] >= FORBIDDEN)
        return found

    def prices(self, g: int, choice) -> np.ndarray | int:
        """Per candidate of `g`, its pairs' costs at the neighbours' picks (forbidden ones count as FORBIDDEN)."""
        found = 0
        for other, costs in self.incident.get(g, ()):
            found = found + np.minimum(costs[:, choice[other]], FORBIDDEN)
        return found

    def at(self, g: int, choice) -> int:
        """The forbidden picks that involve `g`'s pick: itself alone, and each pair with a neighbour's pick."""
        c = choice[g]
        found = int(self.alone[g][c]) if g in self.alone else 0
        for other, costs in self.incident.get(g, ()):
            found += int(costs[c, choice[other]] >= FORBIDDEN)
        return found

    def picks_among(self, groups: set[int], choice) -> int:
        """The choice's forbidden picks that involve any of `groups` (alone, or in a pair), each once."""
        total = 0
        for g in groups:
            total += int(self.alone[g][choice[g]]) if g in self.alone else 0
            for other, costs in self.incident.get(g, ()):
                if costs[choice[g], choice[other]] >= FORBIDDEN and not (other in groups and other < g):
                    total += 1
        return total

    def picks(self, choice) -> tuple[int, list[int]]:
        """The choice's forbidden picks, and the groups they involve, ascending (every edge's pair at once: a group
        at a time took 0.2 s a call on IOPDDL A)."""
        pairs = pairs_at(self.edge_costs, choice) >= FORBIDDEN
        alone = [g for g, forbidden in self.alone.items() if forbidden[choice[g]]]
        groups = set(self.ends[pairs].ravel().tolist()).union(alone)
        return int(pairs.sum()) + len(alone), sorted(groups)

    def excess(self, choice, groups: int) -> np.ndarray:
        """Per group (of `groups`), what its edges' pairs at `choice` cost over each edge's least pair, summed (every
        edge at once: the neighbourhood search reads it after each move)."""
        extra = (pairs_at(self.edge_costs, choice) - self.least).astype(np.float64)
        return (np.bincount(self.ends[:, 0], extra, minlength=groups)
                + np.bincount(self.ends[:, 1], extra, minlength=groups))


class Frame(NamedTuple):
    """What scoring a set of groups' candidates reads that no choice changes (`GroupRows.frame`)."""

    rows: np.ndarray
    """Each group's rows (`GroupRows.located`), end to end."""
    terms: np.ndarray
    """The group's term at each of those rows."""
    starts: np.ndarray
    """Where that term's candidates start in the table."""
    lengths: np.ndarray
    """Per group, its rows."""
    offsets: np.ndarray
    """Per group, where its rows start."""
    counts: np.ndarray
    """Per group, its candidates."""
    candidate: np.ndarray
    """Per candidate of each group in turn, its index in its group."""


class GroupRows:
    """Per group, the rows it is live at and its term at each, read from the table's spans when asked."""

    def __init__(self, problem: Problem) -> None:
        self.table, self.counts, self.limits = problem.table, problem.candidate_counts, problem.limits
        self.pairing = Pairing(problem)
        groups = self.table.group[self.table.span_term]
        self.spans = np.lexsort((self.table.span_first, groups))
        self.bounds = np.searchsorted(groups[self.spans], np.arange(problem.groups + 1))
        self._located: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._located_rows = 0
        self._frames: dict[tuple[int, ...], Frame] = {}
        self._framed_rows = 0

    def switch(self, g: int, current: int, chosen: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """What group `g` switching from candidate `current` to `chosen` adds: (its rows, standard bytes there,
        interleaved bytes there). The one row update every tracker of a choice's usage applies."""
        rows, terms = self.located(g)
        table, start = self.table, self.table.start[terms]
        return (rows, table.standard[start + chosen] - table.standard[start + current],
                table.interleaved[start + chosen] - table.interleaved[start + current])

    def moved(self, usage: Usage, g: int, current: int, chosen: int) -> np.ndarray:
        """`usage` (changed in place) after group `g` switches from `current` to `chosen`; the rows it changed."""
        rows, standard, interleaved = self.switch(g, current, chosen)
        usage.standard[rows] += standard
        usage.interleaved[rows] += interleaved
        return rows

    def located(self, g: int) -> tuple[np.ndarray, np.ndarray]:
        """(rows, terms): each row group `g` is live at, ascending, and its term there (its spans written out). Kept
        once written out, up to `LOCATED_ROWS` rows in all: the searches move and read the same groups again and
        again (a repair's scoring reads its group sets' `Frame`s instead)."""
        found = self._located.get(g)
        if found is None:
            found = self._written_out(self.spans[self.bounds[g]:self.bounds[g + 1]])[:2]
            if self._located_rows + len(found[0]) <= LOCATED_ROWS:
                for kept in found:  # shared from now on
                    kept.setflags(write=False)
                self._located[g] = found
                self._located_rows += len(found[0])
        return found

    def frame(self, groups: list[int]) -> Frame:
        """The `Frame` of `groups` (in that order). Kept, up to `FRAMED_ROWS` rows in all: a repair scores the same
        sets again (1,138 calls on 284 sets at 50k values), and the table they are read from never changes."""
        key = tuple(groups)
        found = self._frames.get(key)
        if found is None:
            found = self._framed(key)
            if self._framed_rows + len(found.rows) <= FRAMED_ROWS:
                for kept in found:  # shared from now on
                    kept.setflags(write=False)
                self._frames[key] = found
                self._framed_rows += len(found.rows)
        return found

    def _framed(self, groups: tuple[int, ...]) -> Frame:
        """The `Frame` of `groups`, written out: every group's spans at once, end to end (as `located` writes one
        group's; a group at a time, through `located`, took 2.5 times as long at 50k values)."""
        chosen = np.array(groups, dtype=np.int64)
        first, spanned = self.bounds[chosen], self.bounds[chosen + 1] - self.bounds[chosen]
        rows, terms, span_rows = self._written_out(self.spans[ranges(first, spanned)])
        before = np.concatenate([[0], np.cumsum(span_rows)])  # rows before each span
        ends = np.cumsum(spanned)
        lengths = before[ends] - before[ends - spanned]
        counts = np.array([self.counts[g] for g in groups], dtype=np.int64)
        candidate = ranges(np.zeros(len(counts), dtype=np.int64), counts)  # each candidate's index in its group
        return Frame(rows, terms, self.table.start[terms], lengths, np.cumsum(lengths) - lengths, counts, candidate)

    def _written_out(self, spans: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rows, terms, rows per span) of `spans` (indices of the table's spans), each span's rows in turn."""
        table = self.table
        first = table.span_first[spans]
        lengths = table.span_end[spans] - first
        return ranges(first, lengths), np.repeat(table.span_term[spans], lengths), lengths

    def segments(self, g: int) -> list[tuple[int, np.ndarray]]:
        """Per distinct term of group `g`, the term and the rows it holds the group's bytes at (IOPDDL: one term)."""
        rows, terms = self.located(g)
        if not len(terms):
            return []
        if (terms == terms[0]).all():
            return [(int(terms[0]), rows)]
        order = np.argsort(terms, kind="stable")
        cuts = np.flatnonzero(np.diff(terms[order])) + 1
        return [(int(terms[part[0]]), rows[part]) for part in np.split(order, cuts)]

    def candidates(self, term: int) -> tuple[np.ndarray, np.ndarray]:
        """The term's (standard, interleaved) bytes per candidate."""
        a = int(self.table.start[term])
        n = int(self.table.counts[term])
        return self.table.standard[a:a + n], self.table.interleaved[a:a + n]

    @cached_property
    def most(self) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
        """Per distinct term, the most total bytes any of its candidates has, and per limit the most usage."""
        table = self.table
        if not table.terms:
            return np.zeros(0, dtype=np.int64), tuple(np.zeros(0, dtype=np.int64) for _ in self.limits)
        usages = (table.standard + table.interleaved,
                  *(limit.usage(table.standard, table.interleaved) for limit in self.limits))
        most = [np.maximum.reduceat(usage, table.start) for usage in usages]
        return most[0], tuple(most[1:])


def changed_costs(problem: Problem) -> list[np.ndarray]:
    """Per group, per candidate: the values it changes (the group's size, 0 at its input)."""
    return _per_group(problem, _flat_changed_costs(problem))


def _per_group(problem: Problem, flat: np.ndarray) -> list[np.ndarray]:
    """`flat` (laid as `Problem.candidate_starts`) split into each group's."""
    return np.split(flat, problem.candidate_starts[1:]) if problem.groups else []


def _flat_changed_costs(problem: Problem) -> np.ndarray:
    """`changed_costs`, every group's end to end."""
    group = problem.candidate_groups
    place = np.arange(len(group)) - problem.candidate_starts[group]
    return np.where(place == np.array(problem.input_choice, dtype=np.int64)[group], 0,
                    np.array(problem.group_sizes, dtype=np.int64)[group])


def tie_ranks(problem: Problem) -> list[np.ndarray]:
    """Per group, per candidate: its rank among the group's candidates by (exchange bytes, changed values), equal
    pairs equal ranks. It orders them as exchange x `tie_weight` + changed values does (the weight is more than all
    changes together), with no product that could wrap in int64."""
    return _per_group(problem, flat_tie_ranks(problem))


def flat_tie_ranks(problem: Problem) -> np.ndarray:
    """`tie_ranks`, every group's end to end (as `Problem.candidate_starts` lays them)."""
    group, exchange, changed = problem.candidate_groups, problem.flat_exchange, _flat_changed_costs(problem)
    order = np.lexsort((changed, exchange, group))
    keys = np.stack([group, exchange, changed])[:, order]
    new = np.concatenate([[True], (keys[:, 1:] != keys[:, :-1]).any(axis=0)])
    dense = np.cumsum(new) - 1
    rank = np.empty_like(dense)
    rank[order] = dense - dense[np.searchsorted(group[order], group[order])]
    return rank


def tie_bound(problem: Problem) -> tuple[int, int]:
    """The least (exchange bytes, changed values) any choice can have, in that order: each group and each edge at
    its cheapest, then each group's fewest changes among its cheapest candidates (none where its input is one of
    them, else its size). Laid flat: a loop over 20k groups' arrays took 0.2 s at 50k values; summed as Python
    integers, which do not wrap."""
    edges = sum(int(edge.costs.min()) for edge in problem.edges)
    if not problem.groups:
        return edges, 0
    starts, exchange = problem.candidate_starts, problem.flat_exchange
    cheapest = np.minimum.reduceat(exchange, starts)
    moved = exchange[starts + np.array(problem.input_choice, dtype=np.int64)] != cheapest
    return sum(cheapest.tolist()) + edges, sum(np.array(problem.group_sizes, dtype=np.int64)[moved].tolist())


def tie_value(problem: Problem, choice: tuple[int, ...]) -> tuple[int, int]:
    """(exchange bytes, changed values) of the choice: the objective's terms after the peak, in order."""
    return problem.exchange_of(choice), problem.changed_of(choice)


def summed_bytes(problem: Problem) -> list[np.ndarray]:
    """Per group, per candidate: its bytes summed over every row it is live at."""
    return _per_group(problem, _flat_summed_bytes(problem))


def _flat_summed_bytes(problem: Problem) -> np.ndarray:
    """`summed_bytes`, every group's end to end."""
    table = problem.table
    live, counts = table.live_rows, table.counts
    candidate = np.arange(len(table.standard)) - np.repeat(table.start, counts)
    where = np.repeat(problem.candidate_starts[table.group], counts) + candidate
    weights = (table.standard + table.interleaved) * np.repeat(live, counts)
    return np.bincount(where, weights=weights, minlength=sum(problem.candidate_counts)).astype(np.int64)


def _smallest(problem: Problem, objective: Objective, pairing: Pairing) -> list[int]:
    """Per group its smallest candidate (with `fit` the cheapest) that is not forbidden, ties to the cheaper, then
    the lower index: one sort of every candidate by group, then those keys (a sort per group took 0.1 s at 50k
    values)."""
    if not problem.groups:
        return []
    starts, counts = problem.candidate_starts, problem.candidate_counts
    size, tie = _flat_summed_bytes(problem), flat_tie_ranks(problem)
    forbidden = np.zeros(len(size), dtype=bool)
    for g, alone in pairing.alone.items():
        forbidden[starts[g]:starts[g] + counts[g]] = alone
    keys = (size, tie) if objective == Objective.PEAK else (tie, size)
    order = np.lexsort((*reversed(keys), forbidden, problem.candidate_groups))  # stable: index last
    return (order[starts] - starts).tolist()


def cheapest(problem: Problem) -> list[int]:
    """Per group its cheapest candidate not forbidden alone (`fit`'s `_smallest`)."""
    return _smallest(problem, Objective.FIT, Pairing(problem))


def _settled(problem: Problem, choice: list[int], objective: Objective, pairing: Pairing) -> list[int]:
    """The groups with edges moved, one at a time, to their best candidate against their neighbours' picks: the
    fewest forbidden picks, then (bytes, exchange with the pairs priced, changes), with `fit` exchange first."""
    choice = list(choice)
    sizes, changes = summed_bytes(problem), changed_costs(problem)
    for _ in range(PASSES):
        moved = False
        for g in pairing.incident:
            exchange = (np.minimum(np.asarray(problem.exchange[g], dtype=np.int64), FORBIDDEN)
                        + pairing.prices(g, choice))
            keys = (sizes[g], exchange, changes[g]) if objective == Objective.PEAK else (exchange, changes[g], sizes[g])
            keys = (pairing.forbidden(g, choice) + np.zeros(len(exchange), dtype=np.int64), *keys)
            best = int(np.lexsort(tuple(reversed(keys)))[0])
            if tuple(int(k[best]) for k in keys) < tuple(int(k[choice[g]]) for k in keys):
                choice[g], moved = best, True
        if not moved:
            break
    return choice


class Standing:
    """One move's view of every row: the totals, the peak and how many rows reach it, and the total excess."""

    def __init__(self, problem: Problem, standard: np.ndarray, interleaved: np.ndarray) -> None:
        self.limits = problem.limits
        self.total = standard + interleaved
        self.over = Usage(standard, interleaved).excess(problem.limits)
        self.excess = int(self.over.sum())
        self.cutoff, self.held = self.total.max(initial=0) + 1, 0
        self._peak()

    def _peak(self) -> None:
        self.peak = int(self.total.max(initial=-1))
        self.at_peak = int(np.count_nonzero(self.total == self.peak))

    def moved(self, rows: np.ndarray, standard: np.ndarray, interleaved: np.ndarray) -> None:
        """The view after a move changed the bytes at `rows` (distinct) to `standard` and `interleaved` there: only
        those rows' totals and excess computed again (every row's excess, per move, was the repair's largest cost at
        200k values); the peak is one pass over the totals."""
        self.total[rows] = standard + interleaved
        over = Usage(standard, interleaved).excess(self.limits)
        self.excess += int(over.sum()) - int(self.over[rows].sum())
        self.over[rows] = over
        self._peak()

    @property
    def key(self) -> tuple[int, int, int]:
        """(total excess, peak, rows at the peak): what a move must lower."""
        return self.excess, self.peak, self.at_peak

    def highest(self, rows: int) -> tuple[np.ndarray, np.ndarray]:
        """The distinct totals of (at least) the `rows` highest rows, ascending, each with its count over every row:
        a sort of those rows only (a sort of every row per move was 2.7 s of 7.4 at 50k values), found above the
        last move's cutoff while that still holds enough of them and not many more (a partition per move was 0.3 s
        of the repair's 1.5 at 50k values)."""
        if rows >= len(self.total):
            return np.unique(self.total, return_counts=True)
        above = self.total >= self.cutoff
        count = np.count_nonzero(above)
        if not rows <= count <= 4 * max(rows, self.held):
            self.cutoff = np.partition(self.total, len(self.total) - rows)[len(self.total) - rows]
            above = self.total >= self.cutoff
            self.held = np.count_nonzero(above)  # more than `rows` where many rows tie at the cutoff
        return np.unique(self.total[above], return_counts=True)


def _segments(ufunc: np.ufunc, figures: np.ndarray, starts: np.ndarray, lengths: np.ndarray, empty: int) -> np.ndarray:
    """Per segment (`lengths` figures from each of `starts`, end to end), `ufunc`'s reduction of its figures, `empty`
    for a segment of none: `reduceat` would read an empty segment as the next one's first figure (a group live at no
    row, IOPDDL's nodes of one usage, only reaches the repair through its forbidden picks)."""
    found = np.full(len(starts), empty, dtype=np.int64)
    filled = lengths > 0
    if filled.any():
        found[filled] = ufunc.reduceat(figures, starts[filled])
    return found


def _tops_without(standing: Standing, totals: np.ndarray, offsets: np.ndarray,
                  lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per group (its `lengths` rows' `totals` end to end, each group's first at `offsets`): the highest total of the
    rows not its own and how many rows reach it (-1, 0 when none is left). The distinct totals of more rows than any
    group has are looked at from the highest down, for all groups at once, until each has rows left outside its own."""
    values, counts = standing.highest(int(lengths.max(initial=0)) + 1)
    top = np.full(len(offsets), -1, dtype=np.int64)
    left = np.zeros(len(offsets), dtype=np.int64)
    open_ = np.ones(len(offsets), dtype=bool)
    for k in range(len(values) - 1, -1, -1):
        outside = counts[k] - _segments(np.add, totals == values[k], offsets, lengths, 0)
        found = open_ & (outside > 0)
        top[found], left[found] = values[k], outside[found]
        open_ &= ~found
        if not open_.any():
            break
    return top, left


def _scores(problem: Problem, index: GroupRows, groups: list[int], choice: list[int], standard: np.ndarray,
            interleaved: np.ndarray, standing: Standing) -> np.ndarray:
    """Per candidate of each of `groups` in turn (a column each): (total excess, peak, rows at that peak) after
    switching that group there, every group's candidates scored in one numpy pass over the rows they touch that
    can tell them apart (`_telling`)."""
    table, frame = index.table, index.frame(groups)
    rows, terms, lengths, offsets, counts = frame.rows, frame.terms, frame.lengths, frame.offsets, frame.counts
    # per (group, row): the row's bytes without the group's current pick
    picked = frame.starts + np.repeat(np.array([choice[g] for g in groups], dtype=np.int64), lengths)
    base_std, base_il = standard[rows] - table.standard[picked], interleaved[rows] - table.interleaved[picked]
    top, at_top = _tops_without(standing, standing.total[rows], offsets, lengths)
    telling = _telling(index, terms, base_std, base_il, np.repeat(top, lengths))
    outside = standing.excess - _segments(np.add, standing.over[rows], offsets, lengths, 0)
    kept = _segments(np.add, telling, offsets, lengths, 0)
    term_starts, base_std, base_il = frame.starts[telling], base_std[telling], base_il[telling]
    # per (group, candidate, kept row), candidate-major within each group: one segment per (group, candidate)
    segment_lengths = np.repeat(kept, counts)
    starts = np.cumsum(segment_lengths) - segment_lengths
    at = ranges(np.repeat(np.cumsum(kept) - kept, counts), segment_lengths)  # each segment's kept rows
    pick = term_starts[at] + np.repeat(frame.candidate, segment_lengths)
    new_std, new_il = base_std[at] + table.standard[pick], base_il[at] + table.interleaved[pick]
    new_total = new_std + new_il
    top, at_top = np.repeat(top, counts), np.repeat(at_top, counts)
    peak = np.maximum(top, _segments(np.maximum, new_total, starts, segment_lengths, -1))
    at_peak = np.where(peak == top, at_top, 0) + _segments(np.add, new_total >= np.repeat(peak, segment_lengths),
                                                            starts, segment_lengths, 0)
    violation = np.repeat(outside, counts) + _segments(np.add, Usage(new_std, new_il).excess(problem.limits), starts,
                                                       segment_lengths, 0)
    return np.stack([violation, peak, at_peak])


def _telling(index: GroupRows, terms: np.ndarray, base_std: np.ndarray, base_il: np.ndarray,
             top: np.ndarray) -> np.ndarray:
    """Which of a group's rows (their terms, bytes without the group's pick, and the group's highest total outside
    its rows) can change a candidate's score: a row where no candidate reaches that total nor breaks a limit adds
    nothing to the peak, the rows at it or the excess, whatever the group picks (at 50k values 39 groups of a row
    touch 82k (row, candidate) entries a move, mostly such rows)."""
    most_total, most_usage = index.most
    telling = base_std + base_il + most_total[terms] >= top
    for limit, most in zip(index.limits, most_usage):
        telling |= limit.usage(base_std, base_il) + most[terms] > limit.bytes
    return telling


def repair(problem: Problem, choice: list[int], index: GroupRows, moves: int = MOVES) -> list[int]:
    """Greedy single switches off the focus row (while a forbidden pick is left, off the groups it involves) while
    (forbidden picks, excess, peak, rows at the peak) strictly drops: the first group's first candidate of the
    least such key; at most `moves` switches, or a quarter of the groups where that is more (`MOVES`)."""
    choice = list(choice)
    usage = problem.usage(choice).copy()
    standard, interleaved = usage.standard, usage.interleaved
    pairing = index.pairing
    forbidden = pairing.picks(choice)[0] if pairing.priced else 0
    standing = Standing(problem, standard, interleaved)
    for _ in range(max(moves, problem.groups // 4)):
        focus = int(np.argmax(standing.over)) if standing.excess else int(np.argmax(standing.total))
        groups = pairing.picks(choice)[1] if forbidden else problem.table.groups_at(focus).tolist()
        if not groups:
            break
        scores = _scores(problem, index, groups, choice, standard, interleaved, standing)
        owner = np.repeat(np.arange(len(groups)), [problem.candidate_counts[g] for g in groups])
        if pairing.priced:  # forbidden picks after each switch come first
            after = np.concatenate([np.broadcast_to(forbidden - pairing.at(g, choice) + pairing.forbidden(g, choice),
                                                    problem.candidate_counts[g]) for g in groups])
            scores = np.vstack([after, scores])
        best = int(np.lexsort(scores[::-1])[0])
        key = tuple(int(x) for x in scores[:, best])
        if key >= ((forbidden, *standing.key) if pairing.priced else standing.key):
            break
        g = groups[int(owner[best])]
        c = best - int(np.searchsorted(owner, owner[best]))
        forbidden = key[0] if pairing.priced else 0
        rows = index.moved(usage, g, choice[g], c)
        standing.moved(rows, standard[rows], interleaved[rows])
        choice[g] = c
    return choice


def construct(problem: Problem, objective: Objective = Objective.PEAK, moves: int = MOVES,
              given: tuple[int, ...] | None = None) -> tuple[int, ...]:
    """Every group at its smallest candidate, the groups with edges settled against their neighbours (or the `given`
    choice, constructed before), then repaired greedily across the rows."""
    if not problem.groups:
        return ()
    index = GroupRows(problem)
    choice = list(given) if given is not None else _smallest(problem, objective, index.pairing)
    if problem.edges and given is None:
        choice = _settled(problem, choice, objective, index.pairing)
    return tuple(repair(problem, choice, index, moves) if problem.rows else choice)
