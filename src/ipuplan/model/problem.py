"""The `Problem` solvers see: the per-step rows every solver sums, and their table.

A `Problem` is indices and integers only (no plan, no layout): per free group the number of
candidates and which one is the input; per kept step the constant bytes of each class and, per
live group, its bytes per candidate; per candidate its exchange bytes, and per `Edge` between two groups the cost of
each pair of their candidates; the budget `Limit`s; and, per kept step, the bytes of the legal choices a cap left out
of a group's candidates (bound-only: no solver picks one, `Problem.relaxation` counts them so that a bound covers the
whole scope). A cost at or above `FORBIDDEN` is a choice no solver may make.
`model.build` makes one from a plan's facts and candidate space; a solver imports only this.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from itertools import chain, compress, pairwise
from operator import itemgetter

import numpy as np

from ipuplan.model.objective import OBJECTIVES, Objective, Term
from ipuplan.plan.budgets import Limit, excess

FORBIDDEN = 10**15
"""A cost (of a candidate or of a pair) at or above this is a choice that must never be made. IOPDDL instances write
such choices at about 1e18; a solver never prices them, it leaves them out."""

SAFE_OBJECTIVE = 2**53
"""The most an objective's coefficients may sum to in magnitude when it is one weighted sum of two terms. Below it
every value the objective or a partial sum of it takes is an exact double (CP-SAT reports objective values and
bounds as doubles, HiGHS computes in doubles; 2**53 + 1 is not a double) and 1024 times below int64's end, where
CP-SAT refuses a linear expression whose terms' extremes may overflow. A per-coefficient cap (say 2**40) would not
do: a million coefficients of 2**40 each still overflow together."""

Terms = tuple[tuple[int, np.ndarray, np.ndarray], ...]
"""(group index, standard bytes per choice, interleaved bytes per choice), per group live at a row."""


@dataclass(frozen=True)
class StepRow:
    """One kept step: constant bytes per class and, per free group, bytes per candidate per class."""

    step: int
    standard: int
    interleaved: int
    terms: Terms
    """(group index, standard bytes per candidate, interleaved bytes per candidate)."""


@dataclass(frozen=True)
class Usage:
    """Per-row standard and interleaved bytes under one choice."""

    standard: np.ndarray
    interleaved: np.ndarray

    @property
    def peak(self) -> int:
        return int((self.standard + self.interleaved).max(initial=0))

    def copy(self) -> Usage:
        """Its own arrays, for a caller that moves them as its choice moves."""
        return Usage(self.standard.copy(), self.interleaved.copy())

    def excess(self, limits: tuple[Limit, ...]) -> np.ndarray:
        """Per row, bytes over the budgets summed over the limits (0 where everything fits)."""
        over = np.zeros_like(self.standard)
        for limit in limits:
            over += excess(limit, self.standard, self.interleaved)
        return over

    def violation(self, limits: tuple[Limit, ...]) -> int:
        return int(self.excess(limits).sum())

    def worst_excess(self, limits: tuple[Limit, ...]) -> tuple[int, ...]:
        """Per limit, the most any row exceeds it: what that budget lacks for the choice to fit."""
        return tuple(int(excess(limit, self.standard, self.interleaved).max(initial=0)) for limit in limits)


def spread(first: np.ndarray, end: np.ndarray, weights: np.ndarray, rows: int) -> np.ndarray:
    """Per row, the sum of the `weights` of the spans `[first, end)` that cover it: running totals, each span adding
    its weight at its first row and taking it away after its last (exact int64, linear in spans and rows)."""
    change = np.zeros(rows + 1, dtype=np.int64)
    np.add.at(change, first, weights)
    np.subtract.at(change, end, weights)
    return np.cumsum(change[:rows])


def ranges(start: np.ndarray, length: np.ndarray) -> np.ndarray:
    """`start[k], start[k] + 1, ..., start[k] + length[k] - 1` for every k, end to end: spans written out row by row,
    or terms' candidates picked out of the arrays they share."""
    return np.repeat(start - (np.cumsum(length) - length), length) + np.arange(int(length.sum()))


def span_maxima(per_row: np.ndarray, first: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per span `[first, end)` (none empty), the most of `per_row` over it: a sparse table of maxima over runs of
    2^k rows, each span read as two runs that cover it."""
    levels = [per_row]
    while 2 ** len(levels) <= len(per_row):
        half, last = 2 ** (len(levels) - 1), levels[-1]
        levels.append(np.maximum(last[:-half], last[half:]))
    if not len(first):
        return np.zeros(0, dtype=per_row.dtype)
    k = np.floor(np.log2(end - first)).astype(np.int64)
    found = np.empty(len(first), dtype=per_row.dtype)
    for level in np.unique(k).tolist():
        at = np.flatnonzero(k == level)
        found[at] = np.maximum(levels[level][first[at]], levels[level][end[at] - 2 ** level])
    return found


@dataclass(frozen=True)
class TermTable:
    """The rows' terms laid flat: each distinct term (a group's bytes per candidate) once, and the spans of
    consecutive rows it occurs at.

    A term occurs at a run of rows (a value live from one step to a later one): its spans, not its occurrences, are
    what sums over the rows read, as running totals (`spread`). IOPDDL A's 54 M occurrences are 29 k spans; at 50k
    values a million occurrences are some 50k spans.
    """

    group: np.ndarray
    """Per distinct term, its group."""
    start: np.ndarray
    """Per distinct term, where its candidates begin in `standard` / `interleaved`."""
    standard: np.ndarray
    interleaved: np.ndarray
    """Every distinct term's bytes per candidate, end to end."""
    span_term: np.ndarray
    """Per span (a run of consecutive rows a distinct term occurs at), its term."""
    span_first: np.ndarray
    span_end: np.ndarray
    """Per span, its first row and the row after its last."""
    constant_standard: np.ndarray
    constant_interleaved: np.ndarray
    """Per row, the bytes no choice changes."""

    @property
    def rows(self) -> int:
        return len(self.constant_standard)

    @property
    def terms(self) -> int:
        return len(self.group)

    @cached_property
    def counts(self) -> np.ndarray:
        """Per distinct term, its number of candidates."""
        return np.diff(np.append(self.start, len(self.standard)))

    @cached_property
    def live_rows(self) -> np.ndarray:
        """Per distinct term, the rows it occurs at."""
        found = np.zeros(self.terms, dtype=np.int64)
        np.add.at(found, self.span_term, self.span_end - self.span_first)
        return found

    @property
    def occurrence_count(self) -> int:
        """(row, term) occurrences: what the rows would hold written out one by one."""
        return int(self.live_rows.sum())

    @cached_property
    def occurrences(self) -> tuple[np.ndarray, np.ndarray]:
        """(row, term) of every occurrence, by row, then by group within a row: the spans written out, for the
        callers that look at each (a plan's model rows; never needed on IOPDDL's 54 M)."""
        lengths = self.span_end - self.span_first
        row, term = ranges(self.span_first, lengths), np.repeat(self.span_term, lengths)
        order = np.lexsort((self.group[term], row))
        return row[order], term[order]

    def with_occurrences(self, occurrences: tuple[np.ndarray, np.ndarray]) -> TermTable:
        """This table, its `occurrences` given (laid out already, in that order): the one place they are handed
        over rather than laid out from the spans."""
        self.__dict__["occurrences"] = occurrences
        return self

    def with_candidates(self, start: np.ndarray, standard: np.ndarray, interleaved: np.ndarray) -> TermTable:
        """The same terms over the same spans (and occurrences, when laid out) with other candidates' bytes."""
        changed = replace(self, start=start, standard=standard, interleaved=interleaved)
        return changed.with_occurrences(self.occurrences) if "occurrences" in self.__dict__ else changed

    @property
    def row(self) -> np.ndarray:
        """Per occurrence (`occurrences`), its row."""
        return self.occurrences[0]

    @property
    def term(self) -> np.ndarray:
        """Per occurrence (`occurrences`), its distinct term."""
        return self.occurrences[1]

    @cached_property
    def contents(self) -> np.ndarray:
        """Per distinct term, a number shared by exactly the terms of equal bytes per candidate (of any group)."""
        found = np.zeros(self.terms, dtype=np.int64)
        counts, numbered = self.counts, 0
        for count in np.unique(counts).tolist():
            terms = np.flatnonzero(counts == count)
            at = self.start[terms][:, None] + np.arange(count)
            both = np.ascontiguousarray(np.hstack([self.standard[at], self.interleaved[at]]))
            # each term's bytes as one opaque item: a sort of 1-D items, not unique's row-wise sort (1.2 s at 200k)
            _, inverse = np.unique(both.view(np.dtype((np.void, both.itemsize * 2 * count))).ravel(),
                                   return_inverse=True)
            found[terms] = numbered + inverse.ravel()
            numbered += int(inverse.max(initial=-1)) + 1
        return found

    def row_sums(self, per_occurrence: np.ndarray) -> np.ndarray:
        """Per row, the sum of a per-occurrence figure."""
        return np.bincount(self.row, weights=per_occurrence, minlength=self.rows).astype(np.int64)

    def term_sums(self, per_term: np.ndarray) -> np.ndarray:
        """Per row, the sum of a per-distinct-term figure over the terms that occur there (running totals)."""
        return spread(self.span_first, self.span_end, np.asarray(per_term, dtype=np.int64)[self.span_term], self.rows)

    def term_totals(self, per_row: np.ndarray) -> np.ndarray:
        """Per distinct term, the sum of a per-row figure over the rows it occurs at (prefix sums, in floats)."""
        running = np.concatenate([[0.0], np.cumsum(per_row, dtype=np.float64)])
        found = np.zeros(self.terms)
        np.add.at(found, self.span_term, running[self.span_end] - running[self.span_first])
        return found

    def usage(self, choice) -> Usage:
        """Per row, the bytes of each class under `choice`: each distinct term's pick found once, then summed over
        its spans (IOPDDL: 29k distinct terms, 54 M occurrences, 29 k spans)."""
        picked = self.start + np.asarray(choice, dtype=np.int64)[self.group]
        return Usage(self.constant_standard + self._span_sums(self.standard[picked]),
                     self.constant_interleaved + self._span_sums(self.interleaved[picked]))

    def _span_sums(self, per_term: np.ndarray) -> np.ndarray:
        """`term_sums`, with no pass when every figure is 0."""
        return self.term_sums(per_term) if per_term.any() else np.zeros(self.rows, dtype=np.int64)

    def extremes(self, standard: int = 1, interleaved: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """Per distinct term, the least and the most of `standard x std + interleaved x il` over its candidates."""
        if not self.terms:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        weighted = standard * self.standard + interleaved * self.interleaved
        return np.minimum.reduceat(weighted, self.start), np.maximum.reduceat(weighted, self.start)

    def row_bounds(self, standard: int = 1, interleaved: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """Per row, the least and the most of `standard x std + interleaved x il` any choice gives."""
        low, high = self.extremes(standard, interleaved)
        constant = standard * self.constant_standard + interleaved * self.constant_interleaved
        return constant + self.term_sums(low), constant + self.term_sums(high)

    @property
    def candidate_entries(self) -> int:
        """Each candidate of each term at each row it occurs at: the rows' entries before any reduction."""
        return int((self.counts * self.live_rows).sum())

    def terms_at(self, row: int) -> np.ndarray:
        """The terms that occur at `row`, by group."""
        terms = self.span_term[(self.span_first <= row) & (self.span_end > row)]
        return terms[np.argsort(self.group[terms], kind="stable")]

    def groups_at(self, row: int) -> np.ndarray:
        """The groups of the terms that occur at `row`, ascending."""
        return self.group[self.terms_at(row)]


def spans_of(row: np.ndarray, term: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(term, first row, row after the last) of each run of consecutive rows a term occurs at, by term then row."""
    order = np.lexsort((row, term))
    rows, terms = row[order], term[order]
    new = np.ones(len(order), dtype=bool)
    new[1:] = (terms[1:] != terms[:-1]) | (rows[1:] != rows[:-1] + 1)
    starts = np.flatnonzero(new)
    ends = np.append(starts[1:], len(order))[:len(starts)] - 1
    return terms[starts], rows[starts], rows[ends] + 1


def term_table(rows: tuple[StepRow, ...]) -> TermTable:
    """The rows' terms, equal ones (by content) stored once, numbered by first occurrence. The occurrences are
    laid flat by identity in C loops (a few thousand distinct objects over a million occurrences at 50k values); so
    are the distinct term objects, by their group and arrays (a relaxation's rows are new term objects over mostly
    shared arrays); only distinct arrays are looked at in Python. The spans come from the occurrences, which the
    table keeps (laid out already)."""
    lengths = np.fromiter(map(len, (row.terms for row in rows)), dtype=np.int64, count=len(rows))
    identities = np.fromiter(map(id, _occurrences(rows)), dtype=np.int64, count=int(lengths.sum()))
    distinct = np.unique(identities)  # a plain sort, then a search per occurrence: half of unique's inverse
    inverse = np.searchsorted(distinct, identities)
    del identities
    first = np.full(len(distinct), len(inverse), dtype=np.int64)
    np.minimum.at(first, inverse, np.arange(len(inverse)))
    order = np.argsort(first, kind="stable")
    picked = np.zeros(len(inverse), dtype=bool)
    picked[first] = True
    objects = list(compress(_occurrences(rows), picked.tobytes()))  # each distinct object, by first occurrence
    numbers, distinct = _content_numbers(objects)
    number = np.empty(len(first), dtype=np.int64)
    number[order] = numbers
    term = number[inverse.reshape(-1)] if len(number) else np.zeros(0, dtype=np.int64)
    return numbered_table([row.standard for row in rows], [row.interleaved for row in rows], lengths, term, distinct)


def numbered_table(standard: Sequence[int], interleaved: Sequence[int], lengths: np.ndarray, term: np.ndarray,
                   distinct: Sequence[tuple[int, np.ndarray, np.ndarray]]) -> TermTable:
    """The table of rows given by their constant bytes, their terms' counts (`lengths`) and, row after row, each
    term's number (`term`, numbered by first occurrence) in `distinct`, one term per content."""
    counts = [len(s) for _, s, _ in distinct]
    empty = np.zeros(0, dtype=np.int64)
    row = np.repeat(np.arange(len(lengths)), lengths)
    table = TermTable(
        group=np.array([g for g, _, _ in distinct], dtype=np.int64),
        start=np.cumsum([0, *counts[:-1]], dtype=np.int64) if distinct else empty,
        standard=np.concatenate([s for _, s, _ in distinct]).astype(np.int64) if distinct else empty,
        interleaved=np.concatenate([i for _, _, i in distinct]).astype(np.int64) if distinct else empty,
        **dict(zip(("span_term", "span_first", "span_end"), spans_of(row, term))),
        constant_standard=np.array(standard, dtype=np.int64),
        constant_interleaved=np.array(interleaved, dtype=np.int64))
    return table.with_occurrences((row, term))


def row_steps(rows: Sequence[StepRow]) -> np.ndarray:
    """Each row's step, without making a row of `TableRows`."""
    return rows.steps if isinstance(rows, TableRows) else np.array([row.step for row in rows], dtype=np.int64)


class TableRows(Sequence):
    """A problem's rows read from its table, each `StepRow` made when asked: rows given as spans (IOPDDL's 20 k rows
    hold 54 M terms, its table 29 k spans) are never written out whole. Each distinct term is one object, shared by
    every row it occurs at, as `term_table` expects of rows."""

    def __init__(self, table: TermTable, steps: np.ndarray) -> None:
        if len(steps) != table.rows:
            raise ValueError(f"{len(steps)} steps for {table.rows} rows")
        self.table, self.steps = table, np.asarray(steps, dtype=np.int64)

    @cached_property
    def _terms(self) -> list[tuple[int, np.ndarray, np.ndarray]]:
        table = self.table
        return [(g, table.standard[a:a + n], table.interleaved[a:a + n])
                for g, a, n in zip(table.group.tolist(), table.start.tolist(), table.counts.tolist())]

    def __len__(self) -> int:
        return self.table.rows

    def __getitem__(self, index):
        if isinstance(index, slice):
            return tuple(self[r] for r in range(*index.indices(len(self))))
        r = range(len(self))[index]
        table, terms = self.table, self.table.terms_at(r)
        return StepRow(int(self.steps[r]), int(table.constant_standard[r]), int(table.constant_interleaved[r]),
                       tuple(map(self._terms.__getitem__, terms.tolist())))

    def __iter__(self):
        row, term = self.table.occurrences
        bounds = np.searchsorted(row, np.arange(len(self) + 1)).tolist()
        terms = term.tolist()
        for r, (a, b) in enumerate(pairwise(bounds)):
            yield StepRow(int(self.steps[r]), int(self.table.constant_standard[r]),
                          int(self.table.constant_interleaved[r]), tuple(map(self._terms.__getitem__, terms[a:b])))


def _occurrences(rows: tuple[StepRow, ...]):
    return chain.from_iterable(row.terms for row in rows)


def _content_numbers(objects: list[tuple[int, np.ndarray, np.ndarray]]) -> tuple[np.ndarray, list]:
    """Per term object, the number of its content (by first occurrence), and per number its first object. Objects
    of one group over the same two arrays are one content without a look at the arrays."""
    group = np.fromiter(map(itemgetter(0), objects), dtype=np.int64, count=len(objects))
    standard, interleaved = (np.fromiter(map(id, map(itemgetter(k), objects)), dtype=np.int64, count=len(objects))
                             for k in (1, 2))
    order = np.lexsort((interleaved, standard, group))  # stable: the first of equal ones leads them
    new = np.ones(len(order), dtype=bool)
    new[1:] = (np.diff(group[order]) != 0) | (np.diff(standard[order]) != 0) | (np.diff(interleaved[order]) != 0)
    leader = np.empty(len(order), dtype=np.int64)
    leader[order] = order[np.flatnonzero(new)][np.cumsum(new) - 1]
    leaders = np.flatnonzero(leader == np.arange(len(order)))  # ascending: by first occurrence
    by_content: dict[tuple[int, bytes, bytes], int] = {}
    content = np.fromiter((by_content.setdefault((g, s.tobytes(), i.tobytes()), len(by_content))
                           for g, s, i in map(objects.__getitem__, leaders.tolist())), dtype=np.int64,
                          count=len(leaders))
    firsts = np.unique(content, return_index=True)[1]
    return content[np.searchsorted(leaders, leader)], [objects[k] for k in leaders[firsts].tolist()]


@dataclass(frozen=True, eq=False)
class Edge:
    """A cost per pair of candidates of two groups: what the pair (choice[a], choice[b]) adds to the exchange."""

    a: int
    b: int
    """Group indices, distinct."""
    costs: np.ndarray
    """int64, shape (candidate_counts[a], candidate_counts[b])."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "costs", np.asarray(self.costs, dtype=np.int64))
        if self.a == self.b or self.costs.ndim != 2:
            raise ValueError(f"an edge joins two distinct groups with a matrix: {self.a}, {self.b}, {self.costs.shape}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Edge) and (self.a, self.b) == (other.a, other.b) and np.array_equal(self.costs,
                                                                                                      other.costs)

    def __hash__(self) -> int:
        return hash((self.a, self.b, self.costs.shape, self.costs.tobytes()))

    def oriented(self, group: int) -> np.ndarray:
        """The costs with `group`'s candidates as rows."""
        return self.costs if group == self.a else self.costs.T

    def other(self, group: int) -> int:
        return self.b if group == self.a else self.a


def pairs_at(edge_costs: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], choice) -> np.ndarray:
    """Each edge's cost at the pair `choice` makes, read from a problem's `edge_costs` (a holder of those arrays need
    not keep the problem alive)."""
    costs, ends, columns, offsets = edge_costs
    chosen = np.asarray(choice, dtype=np.int64)
    return costs[offsets + chosen[ends[:, 0]] * columns + chosen[ends[:, 1]]]


@dataclass(frozen=True)
class Problem:
    """What a solver sees. Choice `c` of group `g` is an index into its candidates."""

    candidate_counts: tuple[int, ...]
    input_choice: tuple[int, ...]
    group_sizes: tuple[int, ...]
    """Values per group: what a change of that group's choice costs in changed values."""
    rows: Sequence[StepRow]
    """Per kept step, its row: a tuple of `StepRow`s, or `TableRows` (rows read from their table)."""
    exchange: tuple[tuple[int, ...], ...]
    """Per group, exchange bytes per candidate."""
    limits: tuple[Limit, ...]
    """The budget rule (empty: no budgets)."""
    steps_total: int
    left_out: tuple[Terms, ...] = ()
    """Bound-only choices, per row of `rows`: (group, standard, interleaved bytes per choice) of the legal choices a
    cap left out of a group's candidates. No solver picks one; `relaxation` counts them. Empty: none left out."""
    edges: tuple[Edge, ...] = ()
    """Pairwise exchange: per edge, the cost of each pair of its two groups' candidates (empty: none)."""

    def __post_init__(self) -> None:
        for edge in self.edges:
            if edge.costs.shape != (self.candidate_counts[edge.a], self.candidate_counts[edge.b]):
                raise ValueError(f"edge {edge.a}-{edge.b}: costs {edge.costs.shape} for candidate counts "
                                 f"{self.candidate_counts[edge.a]}, {self.candidate_counts[edge.b]}")

    @property
    def groups(self) -> int:
        return len(self.candidate_counts)

    @cached_property
    def candidate_starts(self) -> np.ndarray:
        """Where each group's candidates begin with every group's laid end to end (the layout of `flat_exchange` and
        of the solvers' per-candidate arrays). Shared: not to be written."""
        counts = np.array(self.candidate_counts, dtype=np.int64)
        return np.cumsum(counts) - counts

    @cached_property
    def candidate_groups(self) -> np.ndarray:
        """Per candidate, laid end to end, its group. Shared: not to be written."""
        return np.repeat(np.arange(self.groups, dtype=np.int64), self.candidate_counts)

    @cached_property
    def flat_exchange(self) -> np.ndarray:
        """`exchange` laid end to end (int64). Shared: not to be written."""
        return np.fromiter(chain.from_iterable(self.exchange), dtype=np.int64, count=sum(self.candidate_counts))

    def without_budgets(self) -> Problem:
        return self.with_limits(())

    def with_limits(self, limits: tuple[Limit, ...]) -> Problem:
        """The same rows under other budgets; their table, once built, is shared rather than built again."""
        return self.with_same_rows(limits=limits)

    def without_left_out(self) -> Problem:
        """The same rows with no left-out choice; their table, once built, shared (1 s at 200k values)."""
        return self.with_same_rows(left_out=())

    def with_same_rows(self, **fields) -> Problem:
        """This problem with other `fields` but its rows: their table, once built, is shared, not laid flat again."""
        return self.with_table(self.__dict__.get("table"), **fields)

    def with_table(self, table: TermTable | None, **fields) -> Problem:
        """This problem with other `fields`, whose rows' table is `table` (None: built when first asked for). The one
        place a table is handed over: a cached property is otherwise built from the rows."""
        changed = replace(self, **fields)
        if table is not None:
            changed.__dict__["table"] = table
        return changed

    @cached_property
    def table(self) -> TermTable:
        return self.rows.table if isinstance(self.rows, TableRows) else term_table(self.rows)

    def usage(self, choice: tuple[int, ...]) -> Usage:
        return self.table.usage(choice)

    def fingerprint(self) -> str:
        """sha256 of every integer the solver sees: two runs with the same fingerprint solved the same model."""
        digest = hashlib.sha256(repr((self.candidate_counts, self.input_choice, self.group_sizes, self.exchange,
                                      self.limits, self.steps_total)).encode())
        digest.update(row_steps(self.rows).astype("<i8").tobytes())
        for terms in self.left_out:
            for g, standard, interleaved in terms:
                digest.update(np.array([g, len(standard)], dtype="<i8").tobytes())
                digest.update(standard.astype("<i8").tobytes() + interleaved.astype("<i8").tobytes())
        for edge in self.edges:  # no edge: the digest of a problem written before edges existed
            digest.update(np.array([edge.a, edge.b, *edge.costs.shape], dtype="<i8").tobytes())
            digest.update(edge.costs.astype("<i8").tobytes())
        table = self.table
        for figures in (table.group, table.start, table.standard, table.interleaved, table.row, table.term,
                        table.constant_standard, table.constant_interleaved):
            digest.update(figures.astype("<i8").tobytes())
        return digest.hexdigest()

    @cached_property
    def row_peaks(self) -> tuple[np.ndarray, np.ndarray]:
        """Per row, the least and the most standard + interleaved bytes any choice gives."""
        return self.table.row_bounds()

    def lower_bound(self) -> int:
        """Every free group at its smallest candidate, step by step: no choice can do better."""
        return int(self.row_peaks[0].max(initial=0))

    def upper_bound(self) -> int:
        return int(self.row_peaks[1].max(initial=0))

    def exchange_of(self, choice: tuple[int, ...]) -> int:
        """Each group's exchange at its candidate plus each edge's cost at the pair chosen (exact integers)."""
        return sum(int(self.exchange[g][c]) for g, c in enumerate(choice)) + sum(self.pairs_at(choice).tolist())

    def forbidden_in(self, choice: tuple[int, ...]) -> int:
        """How many of the choice's candidates and pairs cost `FORBIDDEN` or more: 0 for a choice that may be made."""
        return sum(self.exchange[g][c] >= FORBIDDEN for g, c in enumerate(choice)) + int(
            (self.pairs_at(choice) >= FORBIDDEN).sum())

    def pairs_at(self, choice) -> np.ndarray:
        """Each edge's cost at the pair `choice` makes (every edge at once: an edge at a time, 40 ms a call on IOPDDL
        A's 55k edges)."""
        return pairs_at(self.edge_costs, choice)

    @cached_property
    def edge_costs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every edge's costs end to end, each edge's two groups, its columns and where its costs begin."""
        sizes = np.array([edge.costs.size for edge in self.edges], dtype=np.int64)
        costs = [np.asarray(edge.costs, dtype=np.int64).ravel() for edge in self.edges]
        return (np.concatenate(costs) if costs else np.zeros(0, dtype=np.int64),
                np.array([(edge.a, edge.b) for edge in self.edges], dtype=np.int64).reshape(-1, 2),
                np.array([edge.costs.shape[1] for edge in self.edges], dtype=np.int64), np.cumsum(sizes) - sizes)

    def objective_key(self, choice: tuple[int, ...], objective: Objective,
                      exchange_of: Callable[[tuple[int, ...]], int] | None = None) -> tuple[int, ...]:
        """The choice's figures in the objective's order (`objective.OBJECTIVES`), what choices are compared by
        (`exchange_of`: an exchange other than this problem's, the exact one)."""
        figures = {Term.PEAK: lambda: self.usage(choice).peak, Term.CHANGED: lambda: self.changed_of(choice),
                   Term.EXCHANGE: lambda: (exchange_of or self.exchange_of)(choice)}
        return tuple(figures[term]() for term in OBJECTIVES[objective])

    def valid(self, choice: tuple[int, ...]) -> bool:
        """A choice is valid when it makes no forbidden pick and meets every limit: the one definition every solver
        and phase asks."""
        return not self.forbidden_in(choice) and not self.usage(choice).violation(self.limits)

    @cached_property
    def tie_weight(self) -> int:
        """What one exchange byte weighs against one changed value in `exchange x weight + changed values`,
        the objective's terms after the peak as one figure: more than every value changing at once, so the
        exchange decides and the changed values only break its ties."""
        return sum(self.group_sizes) + 1

    @cached_property
    def ties_combine(self) -> bool:
        """Whether `exchange x tie_weight + changed values` may be one objective: the magnitudes of its coefficients
        (each allowed candidate's and pair's exchange x weight, each candidate's changed values) sum to at most
        `SAFE_OBJECTIVE`. Otherwise the two terms are minimised one after the other, the exchange fixed at what
        the first found (issue 20: CP-SAT refused a combined objective of the 12-layer plans, exit 70)."""
        unary = np.fromiter(chain.from_iterable(self.exchange), dtype=np.float64)
        exchange = float(unary[unary < FORBIDDEN].sum()) + sum(
            float(edge.costs[edge.costs < FORBIDDEN].sum(dtype=np.float64)) for edge in self.edges)
        changed = sum(size * (count - 1) for size, count in zip(self.group_sizes, self.candidate_counts))
        return exchange * self.tie_weight + changed <= SAFE_OBJECTIVE * (1 - 1e-9)

    def changed_of(self, choice: tuple[int, ...]) -> int:
        return sum(size for size, c, i in zip(self.group_sizes, choice, self.input_choice) if c != i)

    def relaxation(self, alive: dict[int, np.ndarray]) -> Problem | None:
        """The problem with one more candidate for each group with `alive` left-out choices (`alive_left_out`): per
        row and class the least bytes of those choices, no exchange (a row or column of zeros on each of its edges).
        Every such choice has at least those bytes at every row, so the relaxation's least peak bounds that of every
        choice of the whole scope that `alive` keeps, and budgets it cannot meet, none of those meets. None when no
        left-out choice is alive."""
        virtual = frozenset(g for g, mask in alive.items() if mask.any())
        if not virtual:
            return None
        rows = tuple(_with_virtual(row, left_out, alive, virtual, self.candidate_counts)
                     for row, left_out in zip(self.rows, self.left_out))
        edges = tuple(Edge(e.a, e.b, np.pad(e.costs, ((0, int(e.a in virtual)), (0, int(e.b in virtual)))))
                      for e in self.edges)
        return replace(self, candidate_counts=tuple(n + (g in virtual) for g, n in enumerate(self.candidate_counts)),
                       rows=rows, exchange=tuple((*costs, 0) if g in virtual else costs
                                                 for g, costs in enumerate(self.exchange)), left_out=(), edges=edges)


def relaxed_lower_bound(problem: Problem, alive: dict[int, np.ndarray]) -> int | None:
    """`problem.relaxation(alive).lower_bound()` without building the relaxation's rows (1.7 s at 50k values): per
    row, each group with alive left-out choices at the least of its kept candidates and its one more candidate (per
    class the least bytes of its alive choices there, nothing where it has no left-out entry), every other group at
    its least. None where `relaxation` is None."""
    virtual = np.zeros(problem.groups, dtype=bool)
    for g, mask in alive.items():
        virtual[g] = mask.any()
    if not virtual.any():
        return None
    table = problem.table
    groups = table.group[table.term]
    picked = np.flatnonzero(virtual[groups])  # the kept terms of those groups, one per (row, group)
    keys = table.row[picked] * problem.groups + groups[picked]
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    extra = np.zeros(len(picked), dtype=np.int64)
    for r, left_out in enumerate(problem.left_out):
        for g, standard, interleaved in left_out:
            at = int(np.searchsorted(ordered, r * problem.groups + g))
            if virtual[g] and at < len(order) and ordered[at] == r * problem.groups + g:
                extra[order[at]] = int(standard[alive[g]].min()) + int(interleaved[alive[g]].min())
    least = table.extremes()[0][table.term[picked]]
    floor = problem.row_peaks[0].copy()
    np.subtract.at(floor, table.row[picked], np.maximum(least - extra, 0))
    return int(floor.max(initial=0))


def _with_virtual(row: StepRow, left_out: Terms, alive: dict[int, np.ndarray], virtual: frozenset[int],
                  counts: tuple[int, ...]) -> StepRow:
    """The row with one more candidate per `virtual` group: the least bytes per class here of its alive choices."""
    terms = {g: (s, i) for g, s, i in row.terms}
    least = {g: (int(s[alive[g]].min()), int(i[alive[g]].min())) for g, s, i in left_out if g in virtual}
    for g in virtual.intersection(terms).union(least):
        zero = np.zeros(counts[g], dtype=np.int64)
        standard, interleaved = terms.get(g, (zero, zero))
        extra = least.get(g, (0, 0))
        terms[g] = (np.append(standard, extra[0]), np.append(interleaved, extra[1]))
    return StepRow(row.step, row.standard, row.interleaved, tuple((g, *terms[g]) for g in sorted(terms)))


def alive_left_out(problem: Problem, peak: int | None) -> dict[int, np.ndarray]:
    """Per group with left-out choices, which of them may still be part of a choice with a peak below `peak` (None:
    any peak) that meets the budgets (`_stable_alive`: a left-out choice's slot is its group at one row, where the
    least of the group counts its kept candidates, which never drop, and its choices still alive)."""
    flat = _LeftOut(problem)
    alive = np.ones(flat.choices, dtype=bool)
    rules = [(*flat.weighted_rows(problem, a, b), cap) for a, b, cap in _rules(problem, peak, strictly_below=True)]
    _stable_alive(flat.slots, rules, alive)
    return {g: alive[flat.offsets[g]:flat.offsets[g] + flat.sizes[g]] for g in flat.groups}


def _rules(problem: Problem, peak: int | None, strictly_below: bool = False) -> list[tuple[int, int, int]]:
    """Each budget as (standard weight, interleaved weight, most bytes), and the peak's cap when there is one."""
    rules = [(limit.standard, limit.interleaved, limit.bytes) for limit in problem.limits]
    if peak is not None:
        rules.append((1, 1, peak - 1 if strictly_below else peak))
    return rules


@dataclass(frozen=True)
class _Slots:
    """Choices that may drop, by slot (what one group holds at some rows): each slot's entries end to end, each
    entry a choice (an index into the alive mask); and the spans of consecutive rows each slot occurs at."""

    start: np.ndarray
    lengths: np.ndarray
    choice: np.ndarray
    """Per entry, its choice."""
    span_slot: np.ndarray
    span_first: np.ndarray
    span_end: np.ndarray
    """Per span, its slot, its first row and the row after its last."""
    rows: int


_NONE = np.iinfo(np.int64).max


def _stable_alive(slots: _Slots, rules: list[tuple[np.ndarray, np.ndarray, np.ndarray, int]],
                  alive: np.ndarray) -> None:
    """The one rule both `alive_within` and `alive_left_out` drop by: under each rule (per row, bytes no slot holds;
    per slot, a least its choices cannot go below, `_NONE` for none; per entry, its bytes; the cap), a choice drops
    when some row its slot occurs at, with every other slot there at its least still alive, would pass the cap.
    Repeated, every row at once, until nothing more drops (dropping is monotone: the order of the drops does not
    change where it ends). A relaxation: every choice of a choice meeting the rules stays."""
    dropped = True
    lowest = [_segment_least(entry_bytes, slots) for _, _, entry_bytes, _ in rules]  # of all entries, dropped or not
    while dropped:
        dropped = False
        for (base, fixed, entry_bytes, cap), least_of_all in zip(rules, lowest):
            over = _over(slots, base, fixed, entry_bytes, cap, alive, least_of_all)
            if over.any():
                alive[slots.choice[over]] = False
                dropped = True


def _over(slots: _Slots, base: np.ndarray, fixed: np.ndarray, entry_bytes: np.ndarray, cap: int,
          alive: np.ndarray, least_of_all: np.ndarray) -> np.ndarray:
    """Per entry, whether it is alive and its slot's fullest row, the others at their least alive, passes `cap` with
    it (a slot whose entries all dropped counts at `least_of_all`, its least: the rows stay a relaxation)."""
    live = alive[slots.choice]
    least = np.minimum(fixed, _segment_least(np.where(live, entry_bytes, _NONE), slots))
    least = np.where(least == _NONE, least_of_all, least)
    floor = base + spread(slots.span_first, slots.span_end, least[slots.span_slot], slots.rows)
    worst = np.full(len(slots.start), np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(worst, slots.span_slot, span_maxima(floor, slots.span_first, slots.span_end))
    return live & (np.repeat(worst - least, slots.lengths) + entry_bytes > cap)


def _segment_least(entry_bytes: np.ndarray, slots: _Slots) -> np.ndarray:
    """Per slot, the least of its entries (`_NONE` for a slot without entries)."""
    least = np.full(len(slots.start), _NONE, dtype=np.int64)
    filled = slots.lengths > 0
    if filled.any():
        least[filled] = np.minimum.reduceat(entry_bytes, slots.start[filled])
    return least


class _LeftOut:
    """Every row's left-out terms laid flat: per occurrence (row order) its row, group and its choices' place among
    all groups' left-out choices end to end; each occurrence one slot (`_Slots`) at its one row."""

    def __init__(self, problem: Problem) -> None:
        occurrences = [(r, term) for r, terms in enumerate(problem.left_out) for term in terms]
        self.row = np.array([r for r, _ in occurrences], dtype=np.int64)
        self.group = np.array([term[0] for _, term in occurrences], dtype=np.int64)
        self.groups = sorted(set(self.group.tolist()))
        self.sizes = {g: 0 for g in self.groups}
        for _, (g, s, _) in occurrences:
            self.sizes[g] = len(s)
        self.offsets = dict(zip(self.groups, np.cumsum([0, *(self.sizes[g] for g in self.groups)]).tolist()))
        self.choices = sum(self.sizes.values())
        lengths = np.array([len(term[1]) for _, term in occurrences], dtype=np.int64)
        starts = np.cumsum(lengths) - lengths
        at = np.repeat(np.array([self.offsets[g] for g in self.group.tolist()], dtype=np.int64), lengths) + (
            np.arange(int(lengths.sum())) - np.repeat(starts, lengths))
        self.slots = _Slots(starts, lengths, at, np.arange(len(self.row)), self.row, self.row + 1, len(problem.rows))
        empty = np.zeros(0, dtype=np.int64)
        self.standard, self.interleaved = (np.concatenate([term[k] for _, term in occurrences]).astype(np.int64)
                                           if occurrences else empty for k in (1, 2))
        """Every occurrence's choices' bytes, end to end, per class: laid flat once for every rule."""

    def weighted_rows(self, problem: Problem, a: int, b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Under the rule `a x standard + b x interleaved`: per row, its bytes no left-out choice changes less its
        left-out groups' least kept there; per occurrence, that least; per occurrence's choice, its bytes (each
        term's least from the table at once: a least per term of every row took 2.3 s at 10k values)."""
        table = problem.table
        least = table.extremes(a, b)[0][table.term]  # per table occurrence, its term's least
        kept = table.row_sums(least) + a * table.constant_standard + b * table.constant_interleaved
        own = np.zeros(len(self.row), dtype=np.int64)
        if len(self.row) and table.terms:
            groups = table.group[table.term]
            # each left-out occurrence's group among its row's kept terms (rows and groups both ascend in the table)
            keys = table.row * (problem.groups + 1) + groups
            wanted = self.row * (problem.groups + 1) + self.group
            order = np.argsort(keys, kind="stable")
            found = np.searchsorted(keys[order], wanted)
            hit = found < len(keys)
            hit[hit] = keys[order[found[hit]]] == wanted[hit]
            own[hit] = least[order[found[hit]]]
        base = kept - np.bincount(self.row, weights=own, minlength=table.rows).astype(np.int64)
        return base, own, a * self.standard + b * self.interleaved


def solution_fingerprint(choice: tuple[int, ...]) -> str:
    """sha256 of the chosen candidate per free group: two runs with equal fingerprints chose the same layouts."""
    return hashlib.sha256(repr(tuple(choice)).encode()).hexdigest()


def alive_within(problem: Problem, peak: int | None = None) -> list[np.ndarray]:
    """Per group, the candidates that may be part of a choice meeting the budgets with a peak of at most `peak` (None:
    any peak), by `_stable_alive`: a slot is a distinct term of the table (a group's bytes per candidate at the rows
    it occurs at). A relaxation: every candidate of every such choice stays."""
    table = problem.table
    offsets = np.cumsum([0, *problem.candidate_counts])
    alive = np.ones(offsets[-1], dtype=bool)  # every group's candidates end to end
    rules = _rules(problem, peak)
    if table.terms and rules:
        owner = np.repeat(np.arange(table.terms), table.counts)
        entry = offsets[table.group[owner]] + np.arange(len(owner)) - table.start[owner]  # each entry's candidate
        slots = _Slots(table.start, table.counts, entry, table.span_term, table.span_first, table.span_end, table.rows)
        none = np.full(table.terms, _NONE, dtype=np.int64)
        _stable_alive(slots, [(a * table.constant_standard + b * table.constant_interleaved, none,
                               a * table.standard + b * table.interleaved, cap) for a, b, cap in rules], alive)
    return [alive[offsets[g]:offsets[g + 1]] for g in range(problem.groups)]
