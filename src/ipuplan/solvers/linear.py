"""The linear rows a backend writes: per kept step and rule (the peak, each budget), sparse over the columns.

Columns: one boolean per candidate (group `g`'s from `first[g]`), then one integer per shared sum. Model
reduction, done here once for every backend (issue 11):
- Terms that occur at exactly the same rows (groups always live together) are merged where that saves
  entries: their standard (and interleaved) bytes become one integer column, defined once by an
  equality, and each of those rows names that column instead of every candidate of every merged group.
- Each term's cheapest candidate for a rule moves into the row's constant (exactly one is chosen), so
  that candidate's entry vanishes.
- A row that cannot exceed its rule's cap (or, for the peak, the per-step lower bound) is left out.
- A budget counting both classes with weight one is the peak row's own sum: it becomes a cap on the peak
  instead of a second copy of every row (not with soft budgets, whose rows may exceed it).

Pairwise costs (`pair_columns`): per edge one boolean per pair of candidates that may be chosen together (neither
candidate nor the pair forbidden), tied to the candidates' booleans by `sum_j y[i, j] == x_a[i]` and
`sum_i y[i, j] == x_b[j]`: exactly one pair is true, the chosen one, so `sum cost x y` is the edge's cost exactly and
a forbidden pair is excluded by a constraint, never priced. An edge that separates needs none of this: the exact
reductions (`reduce.pairwise`) make it exchange of its candidates before a backend sees it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ipuplan.model.problem import FORBIDDEN, Limit, Problem, TermTable


@dataclass(frozen=True)
class Rule:
    """One kind of row: `standard x std + interleaved x il` against the peak (`limit` None) or a budget."""

    standard: int
    interleaved: int
    limit: int | None
    """Index into the problem's limits; None for the peak rule."""


@dataclass(frozen=True)
class RuleRows:
    """A rule's kept rows as CSR: `sum(coefficients x columns) + constant <= cap` (the peak column apart)."""

    rule: Rule
    rows: np.ndarray
    """Indices of the problem rows kept."""
    constant: np.ndarray
    indptr: np.ndarray
    columns: np.ndarray
    coefficients: np.ndarray

    @property
    def entries(self) -> int:
        return len(self.columns)


@dataclass(frozen=True)
class SharedSums:
    """Merged terms: per shared column, its definition `column = sum(coefficients x booleans)` as CSR."""

    upper: np.ndarray
    indptr: np.ndarray
    columns: np.ndarray
    coefficients: np.ndarray

    @property
    def count(self) -> int:
        return len(self.upper)

    def values(self, booleans: np.ndarray) -> np.ndarray:
        """Each shared column's value when the candidate booleans are `booleans` (0/1 per column)."""
        if not self.count:
            return np.zeros(0, dtype=np.int64)
        return np.add.reduceat(self.coefficients * booleans[self.columns], self.indptr[:-1])


@dataclass(frozen=True)
class Clusters:
    """Terms merged into shared sums: per cluster its rows, its shared columns and its bytes left in the constant."""

    of_term: np.ndarray
    """Per distinct term, its cluster (-1: written directly into the rows)."""
    rows: tuple[np.ndarray, ...]
    standard_column: np.ndarray
    interleaved_column: np.ndarray
    """Per cluster, the index of its shared column per class (-1: the class's bytes never vary)."""
    standard_low: np.ndarray
    interleaved_low: np.ndarray
    """Per cluster, its members' least bytes per class: in the row constants."""
    standard_high: np.ndarray
    interleaved_high: np.ndarray
    """Per cluster, the most its shared columns can hold."""


@dataclass(frozen=True)
class LinearRows:
    first: np.ndarray
    """Per group, its first boolean column."""
    booleans: int
    sums: SharedSums
    rules: tuple[RuleRows, ...]
    peak_cap: int | None
    """The least budget that counts both classes with weight one (folded into the peak), if any."""
    merged_terms: int
    """Distinct terms folded into a shared sum."""
    plain_entries: int
    """Entries the rows would have without merging, leaving out and folding: the model size before reduction."""

    @property
    def entries(self) -> int:
        return sum(r.entries for r in self.rules) + len(self.sums.columns)

    def booleans_of(self, choice: tuple[int, ...]) -> np.ndarray:
        values = np.zeros(self.booleans, dtype=np.int64)
        values[self.first + np.asarray(choice, dtype=np.int64)] = 1
        return values


def rules_of(limits: tuple[Limit, ...], soft: bool) -> tuple[tuple[Rule, ...], int | None]:
    """The peak rule and one rule per budget, less the budgets folded into a cap on the peak."""
    both = [limit.bytes for limit in limits if (limit.standard, limit.interleaved) == (1, 1)]
    kept = tuple(Rule(limit.standard, limit.interleaved, k) for k, limit in enumerate(limits)
                 if soft or (limit.standard, limit.interleaved) != (1, 1))
    return (Rule(1, 1, None), *kept), min(both) if both and not soft else None


def _term_rows(table: TermTable) -> list[np.ndarray]:
    """Per distinct term, the rows it occurs at (ascending)."""
    order = np.lexsort((table.row, table.term))
    bounds = np.searchsorted(table.term[order], np.arange(table.terms + 1))
    rows = table.row[order]
    return [rows[bounds[t]:bounds[t + 1]] for t in range(table.terms)]


def _merged(table: TermTable, term_rows: list[np.ndarray], rules: int) -> list[np.ndarray]:
    """Sets of distinct terms with the same rows where one shared sum per class costs fewer entries."""
    together: dict[bytes, list[int]] = {}
    for t, rows in enumerate(term_rows):
        together.setdefault(rows.tobytes(), []).append(t)
    varying = table.counts - 1
    merged = []
    for terms in together.values():
        rows, entries = len(term_rows[terms[0]]), int(varying[terms].sum())
        if 2 * entries + 2 * rules * rows < rules * rows * entries:
            merged.append(np.array(terms, dtype=np.int64))
    return merged


def _definition(table: TermTable, first: np.ndarray, members: np.ndarray, figures: np.ndarray):
    """(columns, coefficients, least, most) of one class's bytes summed over the members, less their minima."""
    columns, coefficients, least, most = [], [], 0, 0
    for t in members.tolist():
        values = figures[table.start[t]:table.start[t] + table.counts[t]]
        offset = values - values.min()
        keep = np.flatnonzero(offset)
        columns.append(first[table.group[t]] + keep)
        coefficients.append(offset[keep])
        least += int(values.min())
        most += int(offset.max())
    return np.concatenate(columns), np.concatenate(coefficients), least, most


def _clusters(table: TermTable, first: np.ndarray, term_rows: list[np.ndarray],
              merged: list[np.ndarray]) -> tuple[Clusters, SharedSums]:
    of_term = np.full(table.terms, -1, dtype=np.int64)
    column_of = {True: [], False: []}
    low = {True: [], False: []}
    high = {True: [], False: []}
    indptr, columns, coefficients, upper = [0], [], [], []
    for k, members in enumerate(merged):
        of_term[members] = k
        for standard, figures in ((True, table.standard), (False, table.interleaved)):
            column, coefficient, least, most = _definition(table, first, members, figures)
            low[standard].append(least)
            high[standard].append(most)
            column_of[standard].append(len(upper) if most else -1)
            if most:
                columns.append(column)
                coefficients.append(coefficient)
                indptr.append(indptr[-1] + len(column))
                upper.append(most)

    def array(values) -> np.ndarray:
        return np.array(values, dtype=np.int64)

    empty = array([])
    clusters = Clusters(of_term, tuple(term_rows[int(m[0])] for m in merged), array(column_of[True]),
                        array(column_of[False]), array(low[True]), array(low[False]), array(high[True]),
                        array(high[False]))
    sums = SharedSums(array(upper), array(indptr), np.concatenate(columns) if columns else empty,
                      np.concatenate(coefficients) if coefficients else empty)
    return clusters, sums


def _direct_entries(table: TermTable, first: np.ndarray, rule: Rule, direct: np.ndarray):
    """(row, column, coefficient) of every varying candidate of the directly written occurrences, and per
    occurrence of the table its least and most bytes under the rule."""
    weighted = rule.standard * table.standard + rule.interleaved * table.interleaved
    low, high = table.extremes(rule.standard, rule.interleaved)
    offset = weighted - np.repeat(low, table.counts)
    nonzero = np.flatnonzero(offset)
    candidate = nonzero - np.repeat(table.start, table.counts)[nonzero]
    column = first[np.repeat(table.group, table.counts)[nonzero]] + candidate
    per_term = np.bincount(np.repeat(np.arange(table.terms), table.counts)[nonzero], minlength=table.terms)
    begins = np.cumsum(per_term) - per_term
    terms = table.term[direct]
    counts = per_term[terms]
    within = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    at = np.repeat(begins[terms], counts) + within
    return (np.repeat(table.row[direct], counts), column[at], offset[nonzero][at]), low[table.term], high[table.term]


def _rule_rows(problem: Problem, first: np.ndarray, clusters: Clusters, rule: Rule, floor: int) -> RuleRows:
    """The rule's rows that can exceed its cap (for the peak: the per-step lower bound), entries by row."""
    table, booleans = problem.table, int(sum(problem.candidate_counts))
    merged = clusters.of_term[table.term] >= 0
    direct = np.flatnonzero(~merged)
    (rows, columns, coefficients), low, high = _direct_entries(table, first, rule, direct)
    a, b = rule.standard, rule.interleaved
    constant = a * table.constant_standard + b * table.constant_interleaved + table.row_sums(np.where(merged, 0, low))
    most = constant + table.row_sums(np.where(merged, 0, high - low))
    row_parts, column_parts, coefficient_parts = [rows], [columns], [coefficients]
    for k, cluster_rows in enumerate(clusters.rows):
        constant[cluster_rows] += a * clusters.standard_low[k] + b * clusters.interleaved_low[k]
        most[cluster_rows] += a * (clusters.standard_low[k] + clusters.standard_high[k]) + b * (
            clusters.interleaved_low[k] + clusters.interleaved_high[k])
        for weight, column in ((a, clusters.standard_column[k]), (b, clusters.interleaved_column[k])):
            if weight and column >= 0:
                row_parts.append(cluster_rows)
                column_parts.append(np.full(len(cluster_rows), booleans + column))
                coefficient_parts.append(np.full(len(cluster_rows), weight))
    rows, columns, coefficients = (np.concatenate(p).astype(np.int64)
                                   for p in (row_parts, column_parts, coefficient_parts))
    cap = floor if rule.limit is None else problem.limits[rule.limit].bytes
    keep = most > cap
    order = np.argsort(rows, kind="stable")
    order = order[keep[rows[order]]]
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=table.rows)[keep])]).astype(np.int64)
    kept = np.flatnonzero(keep)
    return RuleRows(rule, kept, constant[kept], indptr, columns[order], coefficients[order])


def linear_rows(problem: Problem, soft: bool = False) -> LinearRows:
    """The problem's rows, reduced (module docstring), ready for any backend."""
    table = problem.table
    first = np.cumsum([0, *problem.candidate_counts[:-1]], dtype=np.int64) if problem.groups else np.zeros(0, np.int64)
    rules, peak_cap = rules_of(problem.limits, soft)
    term_rows = _term_rows(table)
    clusters, sums = _clusters(table, first, term_rows, _merged(table, term_rows, len(rules)))
    floor = problem.lower_bound()
    built = tuple(_rule_rows(problem, first, clusters, rule, floor) for rule in rules)
    plain = table.candidate_entries * (1 + len(problem.limits))
    return LinearRows(first, int(sum(problem.candidate_counts)), sums, built, peak_cap,
                      int((clusters.of_term >= 0).sum()), plain)


@dataclass(frozen=True)
class PairColumns:
    """Per edge, one boolean per pair of candidates that may be chosen together, as columns after the others."""

    left: np.ndarray
    right: np.ndarray
    """Per pair, the boolean columns of its two candidates."""
    cost: np.ndarray
    """Per pair, its cost."""
    equalities: tuple[tuple[int, np.ndarray], ...]
    """(a candidate's boolean column, the pairs of one edge it is part of): the pairs' sum equals the boolean."""
    forbidden: np.ndarray
    """Boolean columns of the candidates forbidden alone: always false."""

    @property
    def count(self) -> int:
        return len(self.cost)

    def values(self, booleans: np.ndarray) -> np.ndarray:
        """Each pair's value when the candidate booleans are `booleans`."""
        return booleans[self.left] * booleans[self.right]


def pair_columns(problem: Problem, first: np.ndarray) -> PairColumns:
    """The pair booleans of every edge of the problem (module docstring) over the candidate columns from `first`."""
    if not problem.edges and max(map(max, problem.exchange), default=0) < FORBIDDEN:
        empty = np.zeros(0, dtype=np.int64)
        return PairColumns(empty, empty, empty, (), empty)
    unary = [np.asarray(costs) >= FORBIDDEN for costs in problem.exchange]
    left, right, cost, equalities, start = [], [], [], [], 0
    for edge in problem.edges:
        allowed = (edge.costs < FORBIDDEN) & ~unary[edge.a][:, None] & ~unary[edge.b][None, :]
        i, j = np.nonzero(allowed)
        pairs = start + np.arange(len(i))
        left.append(first[edge.a] + i)
        right.append(first[edge.b] + j)
        cost.append(edge.costs[i, j])
        by_right = np.argsort(j, kind="stable")
        for group, side, order in ((edge.a, i, np.arange(len(i))), (edge.b, j, by_right)):
            bounds = np.searchsorted(side[order], np.arange(problem.candidate_counts[group] + 1))
            equalities += [(int(first[group]) + k, pairs[order[bounds[k]:bounds[k + 1]]])
                           for k in range(problem.candidate_counts[group])]
        start += len(i)
    forbidden = np.concatenate([first[g] + np.flatnonzero(mask) for g, mask in enumerate(unary)]) if unary else []

    def joined(parts) -> np.ndarray:
        return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, dtype=np.int64)

    return PairColumns(joined(left), joined(right), joined(cost), tuple(equalities),
                       np.asarray(forbidden, dtype=np.int64))
