"""The IOPDDL contest's problem (ASPLOS / EuroSys 2025, XLA auto-sharding) read, scored and handed to the core.

An instance has nodes, each with strategies (a cost, and a memory usage held over the node's half-open interval
`[start, end)`), edges with a cost per pair of their nodes' strategies (pair `s_u * len(costs[v]) + s_v`), and a
usage limit at every time point. `read_instance` reads the contest's JSON (gzip or plain) into an immutable
`Instance`; `evaluate` scores a solution as the contest's evaluator does, with no solver code, so a solver's own
figures are checked rather than trusted; `problem_of` is the instance as the core's `Problem` (nodes -> groups,
costs -> exchange, edges -> pairwise costs, usages -> one row per time point that can reach the limit);
`merged_problem` is the same with the nodes tied by rigid edges as one group each (`rigid`); `solve_instance` is the
one run `ipuplan iopddl` and `benchmarks/iopddl.py` make: build, solve with the core that serves plans
(`solvers.solve`, objective `fit`), score, on one deadline.
"""

from __future__ import annotations

import gzip
import json
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

from ipuplan.errors import PlanError
from ipuplan.model.objective import Objective
from ipuplan.model.problem import FORBIDDEN, Edge, Problem, TableRows, TermTable, ranges
from ipuplan.plan.budgets import Limit
from ipuplan.replan.options import default_workers
from ipuplan.solvers import SolveResult, SolverSettings, solve, wcsp
from ipuplan.solvers.cpsat import WHOLE_MODEL_PAIRS, whole_model_fits
from ipuplan.solvers.deadline import Deadline
from ipuplan.workbench.rigid import Merged, merged

GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True)
class Instance:
    """Read-only arrays. Node `i`'s strategies are entries `strategy_start[i]:strategy_start[i + 1]` of `costs` and
    `usages`; edge `e`'s pair costs are entries `edge_start[e]:edge_start[e + 1]` of `edge_costs`."""

    name: str
    intervals: np.ndarray
    """(nodes, 2): the node holds its usage at every time `t` with `start <= t < end`."""
    strategy_start: np.ndarray
    costs: np.ndarray
    usages: np.ndarray
    edge_nodes: np.ndarray
    """(edges, 2): the nodes `u`, `v` an edge joins, in the order its pair index reads them."""
    edge_start: np.ndarray
    edge_costs: np.ndarray
    usage_limit: int | None
    """None: the instance has no limit."""

    @property
    def nodes(self) -> int:
        return len(self.intervals)

    @property
    def edges(self) -> int:
        return len(self.edge_nodes)

    @cached_property
    def strategy_counts(self) -> np.ndarray:
        """Per node, its strategies (computed once: `edge_matrix` reads it per edge, 1.1 s on IOPDDL A otherwise)."""
        return np.diff(self.strategy_start)

    def node_costs(self, node: int) -> np.ndarray:
        return self.costs[self.strategy_start[node]:self.strategy_start[node + 1]]

    def node_usages(self, node: int) -> np.ndarray:
        return self.usages[self.strategy_start[node]:self.strategy_start[node + 1]]

    def edge_matrix(self, edge: int) -> np.ndarray:
        """The edge's costs as (strategies of u) x (strategies of v)."""
        u, v = self.edge_nodes[edge].tolist()
        flat = self.edge_costs[self.edge_start[edge]:self.edge_start[edge + 1]]
        return flat.reshape(int(self.strategy_counts[u]), int(self.strategy_counts[v]))


@dataclass(frozen=True)
class Evaluation:
    """A solution scored by the contest's definition."""

    cost: int
    """Node costs plus edge costs, exact (forbidden ones, about 1e18 each, included)."""
    valid: bool
    """At every time point the live nodes' usages sum to at most the limit."""
    peak_time: int | None
    """The earliest time point of the highest usage (None: no node is ever live)."""
    peak_usage: int
    forbidden: int
    """Costs at or above `FORBIDDEN` the solution pays (node and edge costs): choices the core must never make."""


def read_instance(path: str | Path) -> Instance:
    """The instance in `path`, gzip-compressed or not; a malformed file is a `PlanError` naming it and the field."""
    path = Path(path)
    try:
        return instance_of(_json_of(path), path.name)
    except PlanError as error:
        raise error.at(source=str(path)) from None


def _json_of(path: Path) -> Any:
    try:
        data = path.read_bytes()
        text = gzip.decompress(data) if data.startswith(GZIP_MAGIC) else data
    except OSError as error:  # gzip.BadGzipFile is one
        raise PlanError(f"cannot read: {error.strerror or error}") from None
    except (EOFError, zlib.error) as error:
        raise PlanError(f"cannot read: damaged gzip data ({error})") from None
    try:
        return json.loads(text.decode("utf-8"))
    except UnicodeDecodeError:
        raise PlanError("invalid JSON: not UTF-8 text") from None
    except json.JSONDecodeError as error:
        raise PlanError(f"invalid JSON: {error.msg}", location=f"line {error.lineno} column {error.colno}") from None


def instance_of(raw: Any, name: str = "<instance>") -> Instance:
    """The instance a parsed contest JSON document describes (`{"problem": {"nodes", "edges", "usage_limit"}}`)."""
    if not isinstance(raw, dict):
        raise PlanError("expected a JSON object", location="document")
    problem = _field(raw, "problem", dict, "")
    nodes = _field(problem, "nodes", dict, "problem.")
    edges = _field(problem, "edges", dict, "problem.")
    intervals = _pairs(_field(nodes, "intervals", list, "problem.nodes."), "problem.nodes.intervals")
    strategy_start, costs = _ragged(_field(nodes, "costs", list, "problem.nodes."), "problem.nodes.costs")
    usage_start, usages = _ragged(_field(nodes, "usages", list, "problem.nodes."), "problem.nodes.usages")
    _same_lengths(intervals, strategy_start, usage_start)
    bad = np.flatnonzero(intervals[:, 0] > intervals[:, 1])
    if len(bad):
        raise PlanError("the interval ends before it starts", location=f"problem.nodes.intervals[{bad[0]}]")
    edge_nodes = _pairs(_field(edges, "nodes", list, "problem.edges."), "problem.edges.nodes")
    edge_start, edge_costs = _ragged(_field(edges, "costs", list, "problem.edges."), "problem.edges.costs")
    _check_edges(edge_nodes, edge_start, np.diff(strategy_start))
    _check_usage_sums(strategy_start, usages)
    return Instance(name, *(_frozen(a) for a in (intervals, strategy_start, costs, usages, edge_nodes, edge_start,
                                                   edge_costs)), _usage_limit(problem))


def _field(parent: dict, key: str, kind: type, where: str) -> Any:
    if key not in parent:
        raise PlanError(f"missing field {key!r}", location=where.rstrip(".") or "document")
    if not isinstance(parent[key], kind):
        raise PlanError(f"expected a JSON {'object' if kind is dict else 'array'}", location=f"{where}{key}")
    return parent[key]


def _as_int64(values: list) -> np.ndarray | None:
    """The values as int64 when each is a non-negative JSON integer (not a bool, not a float) below 2**63; else None."""
    if not set(map(type, values)) <= {int}:
        return None
    try:
        array = np.array(values, dtype=np.int64)
    except OverflowError:
        return None
    return None if (array < 0).any() else array


def _integers(values: list, location: str) -> np.ndarray:
    array = _as_int64(values)
    if array is None:
        at = next(k for k, x in enumerate(values) if type(x) is not int or not 0 <= x < 2**63)
        raise PlanError(f"expected a non-negative integer below 2**63, found {json.dumps(values[at])}",
                        location=f"{location}[{at}]")
    return array


def _flat_integers(lists: list, location: str) -> np.ndarray:
    """Every integer of a list of lists, end to end (one conversion: A has 6 M edge costs); the first bad one named."""
    flat = _as_int64(list(chain.from_iterable(lists)))
    if flat is None:
        for k, item in enumerate(lists):
            _integers(item, f"{location}[{k}]")
    return flat


def _ragged(lists: list, location: str) -> tuple[np.ndarray, np.ndarray]:
    """(where each list begins, the total at the end; every entry end to end) of a list of non-empty integer lists."""
    for k, item in enumerate(lists):
        if not isinstance(item, list) or not item:
            raise PlanError("expected a non-empty array of integers", location=f"{location}[{k}]")
    lengths = np.array([len(item) for item in lists], dtype=np.int64)
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64), _flat_integers(lists, location)


def _pairs(items: list, location: str) -> np.ndarray:
    """(len, 2) int64 of a list of two-integer lists."""
    for k, item in enumerate(items):
        if not isinstance(item, list) or len(item) != 2:
            raise PlanError("expected an array of two integers", location=f"{location}[{k}]")
    return _flat_integers(items, location).reshape(-1, 2)


def _same_lengths(intervals: np.ndarray, strategy_start: np.ndarray, usage_start: np.ndarray) -> None:
    if not len(intervals) == len(strategy_start) - 1 == len(usage_start) - 1:
        counts = f"{len(intervals)} intervals, {len(strategy_start) - 1} costs, {len(usage_start) - 1} usages"
        raise PlanError(f"every node needs an interval, costs and usages: {counts}", location="problem.nodes")
    differ = np.flatnonzero(np.diff(strategy_start) != np.diff(usage_start))
    if len(differ):
        k = int(differ[0])
        raise PlanError(f"{usage_start[k + 1] - usage_start[k]} usages for {strategy_start[k + 1] - strategy_start[k]} "
                        "strategies", location=f"problem.nodes.usages[{k}]")


def _check_edges(edge_nodes: np.ndarray, edge_start: np.ndarray, counts: np.ndarray) -> None:
    if len(edge_nodes) != len(edge_start) - 1:
        raise PlanError(f"{len(edge_nodes)} edges but {len(edge_start) - 1} cost arrays", location="problem.edges")
    outside = np.flatnonzero((edge_nodes >= len(counts)).any(axis=1))
    if len(outside):
        raise PlanError(f"no such node (the instance has {len(counts)})", location=f"problem.edges.nodes[{outside[0]}]")
    pairs = counts[edge_nodes[:, 0]] * counts[edge_nodes[:, 1]] if len(edge_nodes) else np.zeros(0, np.int64)
    wrong = np.flatnonzero(np.diff(edge_start) != pairs)
    if len(wrong):
        k = int(wrong[0])
        raise PlanError(f"{edge_start[k + 1] - edge_start[k]} costs for {pairs[k]} strategy pairs",
                        location=f"problem.edges.costs[{k}]")


def _check_usage_sums(strategy_start: np.ndarray, usages: np.ndarray) -> None:
    """Refuse usages whose sum over the nodes live at once may pass 2**63 - 1: every live sum, the core's rows and the
    solver's sums are int64 (two usages of 2**62 wrapped round to a negative sum, and the limit looked met)."""
    most = np.maximum.reduceat(usages, strategy_start[:-1]) if len(strategy_start) > 1 else usages
    if float(most.sum(dtype=np.float64)) >= 2.0**62 and sum(most.tolist()) >= 2**63:
        raise PlanError("the nodes' largest usages sum to 2**63 or more: live usage could not be counted exactly",
                        location="problem.nodes.usages")


def _usage_limit(problem: dict) -> int | None:
    limit = problem.get("usage_limit")
    if limit is not None and (type(limit) is not int or not 0 <= limit < 2**63):
        raise PlanError(f"expected a non-negative integer below 2**63, found {json.dumps(limit)}",
                        location="problem.usage_limit")
    return limit


def _frozen(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


def evaluate(instance: Instance, solution) -> Evaluation:
    """The contest's score of `solution` (one strategy index per node): cost = the chosen node costs plus, per edge
    `(u, v)`, entry `s_u * len(costs[v]) + s_v` of its costs; valid when at every time point `t` the usages of the
    nodes with `start <= t < end` sum to at most the limit."""
    chosen = _strategies(instance, solution)
    node_costs = instance.costs[instance.strategy_start[:-1] + chosen]
    u, v = instance.edge_nodes[:, 0], instance.edge_nodes[:, 1]
    pair = chosen[u] * instance.strategy_counts[v] + chosen[v]
    edge_costs = instance.edge_costs[instance.edge_start[:-1] + pair]
    times, usage = usage_over_time(instance, chosen)
    at = int(np.argmax(usage)) if len(usage) else None
    peak_usage = 0 if at is None else int(usage[at])
    peak_time = None if at is None else int(times[at]) if peak_usage > 0 else 0  # before the first event: nothing
    valid = instance.usage_limit is None or peak_usage <= instance.usage_limit
    forbidden = int((node_costs >= FORBIDDEN).sum() + (edge_costs >= FORBIDDEN).sum())
    return Evaluation(sum(node_costs.tolist()) + sum(edge_costs.tolist()), valid, peak_time, peak_usage, forbidden)


def _strategies(instance: Instance, solution) -> np.ndarray:
    """The solution as int64, refused (a `PlanError` at `solution[i]`) unless one strategy index per node."""
    items = list(solution)
    if len(items) != instance.nodes:
        raise PlanError(f"{len(items)} strategies for {instance.nodes} nodes", source="<solution>")
    counts = instance.strategy_counts.tolist()
    for node, (strategy, count) in enumerate(zip(items, counts)):
        if not isinstance(strategy, (int, np.integer)) or isinstance(strategy, bool) or not 0 <= strategy < count:
            raise PlanError(f"expected a strategy index below {count}, found {strategy!r}", location=f"[{node}]",
                            source="<solution>")
    return np.array(items, dtype=np.int64)


def usage_over_time(instance: Instance, chosen: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(times, usage): the summed usage of the nodes live from each time at which some interval starts or ends until
    the next one (the usage changes nowhere else), the last time (every interval ended) left out."""
    times, sums = live_sum(instance, instance.usages[instance.strategy_start[:-1] + chosen])
    return times[:-1], sums[:-1]


def problem_of(instance: Instance) -> Problem:
    """The instance as the core's `Problem`: a group per node, a candidate per strategy, its cost as exchange (costs
    at or above `FORBIDDEN` capped to it: the core never chooses them, and the sums stay within int64), each edge
    a pairwise cost, and the limit as one `Limit` over the rows of `usage_rows`. No input plan: input choices 0."""
    counts = instance.strategy_counts.tolist()
    rows = usage_rows(instance)
    limits = () if instance.usage_limit is None else (Limit("usage", 1, 0, instance.usage_limit),)
    return Problem(candidate_counts=tuple(counts), input_choice=(0,) * instance.nodes,
                   group_sizes=(0,) * instance.nodes,
                   rows=rows, exchange=unary_costs(instance), limits=limits, steps_total=len(rows),
                   edges=pairwise_costs(instance))


def unary_costs(instance: Instance) -> tuple[tuple[int, ...], ...]:
    """Per node, per strategy: its cost plus, for an edge that joins the node to itself, the pair (s, s)."""
    capped = np.minimum(instance.costs, FORBIDDEN)
    for e in np.flatnonzero(instance.edge_nodes[:, 0] == instance.edge_nodes[:, 1]).tolist():
        node = int(instance.edge_nodes[e, 0])
        at = slice(instance.strategy_start[node], instance.strategy_start[node + 1])
        capped[at] = np.minimum(capped[at] + np.minimum(np.diagonal(instance.edge_matrix(e)), FORBIDDEN), FORBIDDEN)
    return tuple(tuple(capped[a:b].tolist()) for a, b in zip(instance.strategy_start[:-1].tolist(),
                                                              instance.strategy_start[1:].tolist()))


def pairwise_costs(instance: Instance) -> tuple[Edge, ...]:
    """An `Edge` per edge joining two nodes, costs capped at `FORBIDDEN` (a self-edge is in `unary_costs`)."""
    return tuple(Edge(u, v, np.minimum(instance.edge_matrix(e), FORBIDDEN))
                 for e, (u, v) in enumerate(instance.edge_nodes.tolist()) if u != v)


def usage_rows(instance: Instance) -> TableRows:
    """A row per time point where the usage can peak and can pass the limit (`row_times`), read from a table of
    spans: a node whose usage is the same for every strategy is a row constant; every other node live at some row is
    one term over the one run of rows its interval covers (A: 29 k spans for 54 M (row, node) pairs). Terms are
    numbered as a reading row by row meets them: by first row, then by node."""
    times = row_times(instance)
    least, most = _usage_extremes(instance)
    varying = np.flatnonzero(most > least)
    first = np.searchsorted(times, instance.intervals[varying, 0])
    end = np.searchsorted(times, instance.intervals[varying, 1])
    live = first < end
    order = np.lexsort((varying[live], first[live]))
    nodes, first, end = varying[live][order], first[live][order], end[live][order]
    counts = instance.strategy_counts[nodes]
    starts = np.cumsum(counts) - counts
    at = ranges(instance.strategy_start[nodes], counts)
    table = TermTable(group=nodes, start=starts, standard=instance.usages[at], interleaved=np.zeros(len(at), np.int64),
                      span_term=np.arange(len(nodes)), span_first=first, span_end=end,
                      constant_standard=_row_constants(instance, times),
                      constant_interleaved=np.zeros(len(times), dtype=np.int64))
    return TableRows(table, times)


def _row_constants(instance: Instance, times: np.ndarray) -> np.ndarray:
    """Per row at `times`, the usage no choice changes: the nodes live there whose strategies all use the same."""
    least, most = _usage_extremes(instance)
    events, constant = live_sum(instance, np.where(most > least, 0, least))
    return constant[np.searchsorted(events, times)]


def merged_problem(instance: Instance) -> Merged | None:
    """The instance as the core's `Problem` with the nodes tied by rigid edges merged, a group per set
    (`rigid.merged`: same rows as `problem_of`, same cost and usage for every choice it lifts); None where no edge is
    rigid or a set can take no strategy, or where the merged model would be too large to solve whole anyway."""
    times = row_times(instance)
    least, most = _usage_extremes(instance)
    return merged(instance, times, _row_constants(instance, times), most > least, at_most_pairs=WHOLE_MODEL_PAIRS)


def row_times(instance: Instance) -> np.ndarray:
    """The time points a limit needs rows at, ascending. The usage changes only where an interval starts or ends,
    and only rises at starts, so its maximum over time is reached at some start of a node that holds memory. Of
    two consecutive such starts, the earlier one's live set is within the later one's (usages are non-negative)
    unless some node ends in between: only the starts followed by an end before the next start are kept. Of
    those, only the ones where the most every live node can use passes the limit (none without a limit)."""
    if instance.usage_limit is None:
        return np.zeros(0, dtype=np.int64)
    most = _usage_extremes(instance)[1]
    holds = (most > 0) & (instance.intervals[:, 0] < instance.intervals[:, 1])
    starts = np.unique(instance.intervals[holds, 0])
    ends = np.sort(instance.intervals[holds, 1])
    following = np.append(starts[1:], np.iinfo(np.int64).max)
    peaks = np.searchsorted(ends, following, side="right") > np.searchsorted(ends, starts, side="right")
    events, most_live = live_sum(instance, most)
    can_pass = most_live[np.searchsorted(events, starts)] > instance.usage_limit
    return starts[peaks & can_pass]


def _usage_extremes(instance: Instance) -> tuple[np.ndarray, np.ndarray]:
    """Per node, the least and the most usage of its strategies."""
    if not instance.nodes:
        return instance.usages, instance.usages
    return (np.minimum.reduceat(instance.usages, instance.strategy_start[:-1]),
            np.maximum.reduceat(instance.usages, instance.strategy_start[:-1]))


def live_sum(instance: Instance, per_node: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(events, sums): every time at which some interval starts or ends, ascending, and the sum of `per_node` over
    the nodes live from it until the next one. Time is counted in events, not time points: an interval end of 1e12
    costs one entry (the time points took 821 MB at 1e8)."""
    events = np.unique(instance.intervals)
    change = np.zeros(len(events), dtype=np.int64)
    np.add.at(change, np.searchsorted(events, instance.intervals[:, 0]), per_node)
    np.add.at(change, np.searchsorted(events, instance.intervals[:, 1]), -per_node)
    return events, np.cumsum(change)


MARGIN = 2.0
"""Seconds of the time limit kept for scoring and writing the solution after the solve (at most a tenth of it)."""


@dataclass(frozen=True)
class InstanceRun:
    """One instance solved: the choice, the core's own result, the contest's score of the choice (the figure that
    counts), and when the first solution came (seconds from the run's start; None: none came)."""

    instance: Instance
    rows: int
    groups: int
    """The groups the core solved for: fewer than the nodes where rigid edges tie some (`merged_problem`)."""
    choice: tuple[int, ...]
    solver_cost: int
    """The core's own figure of the choice (its capped costs): equal to the contest's below `FORBIDDEN`."""
    result: SolveResult
    evaluation: Evaluation
    first_solution_seconds: float | None
    seconds: float

    @property
    def solved(self) -> bool:
        """The choice is a solution the contest accepts: within the limit at every time, no forbidden cost paid."""
        return self.evaluation.valid and not self.evaluation.forbidden

    def summary(self) -> dict:
        """Its figures as `--json` prints them."""
        scored, instance = self.evaluation, self.instance
        return {"instance": instance.name, "nodes": instance.nodes, "edges": instance.edges, "rows": self.rows,
                "groups": self.groups,
                "solver_status": self.result.status.value, "cost": scored.cost, "solver_cost": self.solver_cost,
                "valid": scored.valid,
                "forbidden": scored.forbidden, "peak_usage": scored.peak_usage, "usage_limit": instance.usage_limit,
                "solver_bound": self.result.exchange_bound,
                "first_valid_s": self.first_solution_seconds if self.solved else None,
                "solver_first_s": self.result.first_solution_seconds, "build_s": self.result.build_seconds,
                "wall_s": self.seconds}


TOLD_STEP = 0.005
"""A better solution is told when it takes at least this share off the last one told (a long run's progress, not
every neighbourhood's gain)."""


def solve_instance(instance: Instance, time_limit: float, *, started: float | None = None, workers: int | None = None,
                   seed: int = 0, on_phase: Callable[[str, str], None] | None = None) -> InstanceRun:
    """The least cost within the usage limit, by `time_limit` seconds after `started` (default: now; the contest
    times the whole process), MARGIN of it kept for scoring and writing: the instance as a `Problem` (its nodes that
    follow others merged, `merged_problem`, where that makes the whole model small enough to solve, as on A, B and G:
    elsewhere the neighbourhood search does better on the nodes), solved by the core that serves plans (`solvers.solve`,
    objective `fit`: its reduction counts in the deadline), and the choice lifted to every node and scored by the
    contest's definition (`evaluate`), never by the solver's own figure."""
    deadline = Deadline.starting(time_limit, False, started)
    phase = on_phase or (lambda name, detail: None)
    joined = merged_problem(instance)
    if joined is not None and not whole_model_fits(joined.problem):
        joined = None  # the neighbourhood search moves nodes better than large groups (M: 80.0 G; merged 87.2 G)
    problem = problem_of(instance) if joined is None else joined.problem
    phase("problem built", f"{instance.nodes:,} nodes, {instance.edges:,} edges, {len(problem.rows):,} rows, "
                           f"{problem.groups:,} groups")
    if joined is None and not whole_model_fits(problem) and not wcsp.available():
        phase("note", "toulbar2 is not installed: the start is the Lagrangian's, far weaker on a large instance "
                      "(IOPDDL K: 4.7-5.1 G against 2.5 G); pip install 'ipuplan[toulbar2]'")
    first: list[float] = []
    told: list[int] = []

    def heard(name: str, objective: int, bound: int, seconds: float) -> None:
        # CP-SAT reports only solutions of its model, where the limit is a hard row: every one heard is valid
        if not first:
            first.append(time.perf_counter() - deadline.started)
            phase("solve", f"first solution ({name}), cost {objective:,}: improving")
        elif objective > told[-1] * (1 - TOLD_STEP):
            return
        else:
            phase("solve", f"better solution ({name}), cost {objective:,}")
        told.append(objective)

    margin = min(MARGIN, time_limit / 10)
    settings = SolverSettings(time_limit=max(deadline.left() - margin, 1.0), workers=workers or default_workers(),
                              seed=seed, objective=Objective.FIT, ends_at=deadline.ends_at - margin)
    phase("solve", f"cost within the usage limit, {settings.workers} workers, {settings.time_limit:.1f} s left")
    result = solve(problem, settings, progress=heard)
    phase("solved", result.status.value)
    choice = problem.input_choice if result.peak is None else result.choice
    strategies = tuple(choice) if joined is None else tuple(joined.lift(choice).tolist())
    return InstanceRun(instance, len(problem.rows), problem.groups, strategies, problem.exchange_of(choice), result,
                       evaluate(instance, strategies), first[0] if first else None,
                       time.perf_counter() - deadline.started)

