"""A start for problems with pairwise costs under budgets: Lagrangian relaxation of the rows, a forest solved
exactly, then repaired and improved one group at a time (what the IOPDDL contest's best solvers do, issue 23).

The budgets' rows are priced instead of enforced (per row and limit a price per byte, `RowPrices`). Each round
frees a forest of groups (groups taken in a random order while the edges between them stay a forest), the others
at the best choice so far: the free groups' candidates cost their exchange, their priced bytes and their edges to
fixed groups at those groups' picks, and the forest is solved exactly by min-sum dynamic programming
(`_tree_choice`). The rows still over a limit raise their price (subgradient steps), and each round's choice is
made valid by `relieve` (moves off the rows over a limit, the least exchange per byte relieved, never to a forbidden
pick) and `unforbid` (moves that shed forbidden picks and fit, min-conflicts; also the first step from a start within
the limits that makes forbidden picks) and improved by `descend` (one-group moves priced exactly with every incident
edge, only where every row keeps within its limit). The best choice of the rounds is the start; a round that leaves
an invalid best no better ends them (the start is stuck). Round and move caps, and a clock only when asked
(`deadline`).
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable

import numpy as np

from ipuplan.model.problem import FORBIDDEN, Problem
from ipuplan.solvers.construct import GroupRows, summed_bytes, tie_ranks

ROUNDS = 30
"""Subgradient rounds at most."""
RELIEF_MOVES = 4000
"""`relieve`'s moves at most."""
DESCENT_PASSES = 50
"""Passes of `descend` over its queue at most (each pass that moves lowers the exchange, so it ends anyway)."""
ROUND_GAIN = 0.01
"""Of a valid best's exchange, the least a valid round must take off it to count as progress; the rounds end after
STALE_ROUNDS in a row that do not, valid or past repair (IOPDDL A: 22 rounds after its first valid choice took 1.3% off
in 17 s, where the neighbourhood search then took 50%; M's rounds stay within 1% for up to four rounds before each
large drop)."""
STALE_ROUNDS = 5

def _induced_forest(problem: Problem, incident,
                    order: np.ndarray) -> tuple[np.ndarray, list[tuple[int, int, np.ndarray]]]:
    """Groups taken in `order` while the edges between the taken ones stay a forest; (which are taken, the forest's
    edges as (child, parent, costs with the child's candidates as rows), parents before children)."""
    taken = np.zeros(problem.groups, dtype=bool)
    root_of = list(range(problem.groups))

    def root(g: int) -> int:
        while root_of[g] != g:
            root_of[g] = root_of[root_of[g]]
            g = root_of[g]
        return g

    for g in order.tolist():
        roots = [root(other) for other, _ in incident.get(g, ()) if taken[other]]
        if len(roots) == len(set(roots)):
            taken[g] = True
            for r in roots:
                root_of[r] = g
    forest, seen = [], np.zeros(problem.groups, dtype=bool)
    for top in order.tolist():
        if not taken[top] or seen[top]:
            continue
        seen[top] = True
        stack = [top]
        while stack:
            g = stack.pop()
            for other, costs in incident.get(g, ()):
                if taken[other] and not seen[other]:
                    seen[other] = True
                    forest.append((other, g, costs.T))
                    stack.append(other)
    return taken, forest


def _tree_choice(belief: list[np.ndarray], forest: list[tuple[int, int, np.ndarray]]) -> list[int]:
    """Per group the candidate of the least `belief` (per candidate) plus the forest's edges' costs (min-sum dynamic
    programming, leaves to roots, then back). In floats: only the choice is kept, priced exactly later."""
    belief = list(belief)
    best_for: dict[int, np.ndarray] = {}
    for child, parent, costs in reversed(forest):
        total = belief[child][:, None] + np.minimum(costs, FORBIDDEN)
        best_for[child] = np.argmin(total, axis=0)
        belief[parent] = belief[parent] + total.min(axis=0)
    choice = [int(np.argmin(b)) for b in belief]
    for child, parent, _ in forest:
        choice[child] = int(best_for[child][choice[parent]])
    return choice


class Slack:
    """Per limit and row, the weighted bytes left before the limit (negative where the row is over it), kept as
    moves are made."""

    def __init__(self, problem: Problem, choice, index: GroupRows) -> None:
        usage = problem.usage(choice)
        self.index = index
        self.limits = [(limit.standard, limit.interleaved) for limit in problem.limits]
        self.room = [limit.bytes - (limit.standard * usage.standard + limit.interleaved * usage.interleaved)
                     for limit in problem.limits]

    def added(self, g: int, current: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per limit and distinct term of the group: the room at the term's rows, and per candidate the bytes a switch
        to it adds at each of them (the same at every row of a term: no rows x candidates block, which took 5 GB on
        IOPDDL A kept, and most of the Lagrangian's time built)."""
        found = []
        for term, rows in self.index.segments(g):
            standard, interleaved = self.index.candidates(term)
            for (a, b), room in zip(self.limits, self.room):
                change = a * (standard - standard[current]) + b * (interleaved - interleaved[current])
                found.append((room[rows], change))
        return found

    def fits(self, g: int, current: int) -> np.ndarray:
        """Per candidate of the group: whether a switch to it adds no bytes over a limit at any row."""
        fits = np.ones(self.index.counts[g], dtype=bool)
        for room, added in self.added(g, current):
            fits &= added <= max(int(room.min()), 0)
        return fits

    def relief(self, g: int, current: int) -> np.ndarray:
        """Per candidate of the group: how many bytes over the limits a switch to it removes (negative: adds). The
        bytes a switch leaves over at a term's rows, sum over rows of max(added - room, 0), read off the rooms sorted:
        k x added less the k least rooms, k the rooms below it."""
        gain = np.zeros(self.index.counts[g], dtype=np.int64)
        for room, added in self.added(g, current):
            ordered = np.sort(room)
            below = np.searchsorted(ordered, added)
            gain += int(np.maximum(-room, 0).sum()) - (below * added - np.concatenate([[0], np.cumsum(ordered)])[below])
        return gain

    def move(self, g: int, current: int, chosen: int) -> None:
        rows, standard, interleaved = self.index.switch(g, current, chosen)
        for (a, b), room in zip(self.limits, self.room):
            room[rows] -= a * standard + b * interleaved

    def worst(self) -> int | None:
        """The row furthest over a limit (summed over the limits), None when every row is within them."""
        over = sum(np.maximum(-room, 0) for room in self.room)
        return int(np.argmax(over)) if np.ndim(over) and over.max(initial=0) > 0 else None


def least_bytes(problem: Problem) -> list[int]:
    """Per group the candidate of the least bytes summed over its rows, one forbidden alone only when every one is,
    ties to the cheaper (IOPDDL: within the limit on every instance, at 91% of it, but with thousands of forbidden
    pairs)."""
    return [int(np.lexsort((ties, size, np.asarray(costs) >= FORBIDDEN))[0])
            for size, ties, costs in zip(summed_bytes(problem), tie_ranks(problem), problem.exchange)]


def _unary(problem: Problem) -> list[np.ndarray]:
    return [np.minimum(np.asarray(costs, dtype=np.int64), FORBIDDEN) for costs in problem.exchange]


def _priced(g: int, choice, unary: list[np.ndarray], index: GroupRows) -> np.ndarray:
    """Per candidate of `g`: its exchange with every incident edge priced at the neighbours' picks."""
    return unary[g] + index.pairing.prices(g, choice)


SHED_SHARE = 0.25
"""Of the time a Lagrangian start has left, the most its first shedding of forbidden picks takes (K's least bytes: 10
of some 80 s; A's: 16 s, and still 590 left, which the rounds from the start itself would have had)."""


REPAIR_SHARE = 0.2
"""Of the time a Lagrangian start has left, the most one round's repair takes (`lagrangian`'s `repair`)."""
REPAIR_TRIES = 5
"""Repairs in a row that leave their choice over the limits, after which the rounds go on without: IOPDDL S's rounds
are valid on their own, and its repairs failed at 3-4 s each; K's first two fail, then one in two succeeds."""


RELIEF_SHARE = 0.01
"""Of the time a Lagrangian start has left, the most one round's `relieve` takes: IOPDDL M's first round, its prices
all 0, is 93 T over the limit, and 4,000 moves (21 s of 87) left it there. The prices' step reads the round's tree,
not its relief, so a relief cut short costs the round only its own choice: at 0.1, K's rounds over the limit took
3.5-7 s each and the rounds learnt their prices in 70 s; at 0.01, 2.2 s (the runner `benchmarks/iopddl.py` calls,
alone, one run each: K 5.13 G, was 5.3-6.8 G; M 79.7-79.8 G, was 80.0-80.4 G; A and S as before)."""


def _part_left(deadline: float | None, share: float) -> float | None:
    """`share` of the time before `deadline` (None: no deadline)."""
    if deadline is None:
        return None
    now = time.perf_counter()
    return now + share * max(deadline - now, 0.0)


def _past(deadline: float | None) -> bool:
    return deadline is not None and time.perf_counter() > deadline


def _move(slack: Slack, choice: list[int], g: int, c: int) -> None:
    """Group `g` to candidate `c`, in `choice` and in `slack`."""
    if c != choice[g]:
        slack.move(g, choice[g], c)
        choice[g] = c


def relieve(problem: Problem, choice, index: GroupRows, moves: int = RELIEF_MOVES,
            deadline: float | None = None) -> list[int]:
    """Moves off the row furthest over a limit while one is: of the groups live there, the switch with the least
    exchange added per byte over the limits it removes, never to a forbidden pick (none after `deadline`)."""
    choice, unary, slack = list(choice), _unary(problem), Slack(problem, choice, index)
    for _ in range(moves):
        focus = slack.worst()
        if focus is None or _past(deadline):
            break
        best: tuple[float, int, int] | None = None
        for g in set(problem.table.groups_at(focus).tolist()):
            cost = _priced(g, choice, unary, index)
            gain = slack.relief(g, choice[g])
            usable = (gain > 0) & (cost < FORBIDDEN)
            if not usable.any():
                continue
            ratio = (cost - cost[choice[g]]) / np.maximum(gain, 1)
            c = int(np.flatnonzero(usable)[np.argmin(ratio[usable])])
            if best is None or ratio[c] < best[0]:
                best = (float(ratio[c]), g, c)
        if best is None:
            break
        _, g, c = best
        _move(slack, choice, g, c)
    return choice


def unforbid(problem: Problem, choice, index: GroupRows, passes: int = DESCENT_PASSES,
             deadline: float | None = None) -> list[int]:
    """Moves that shed forbidden picks without adding bytes over a limit at any row (min-conflicts): each group of a
    forbidden pick to its candidate of the fewest forbidden picks at its neighbours' picks, among those with fewer
    than its own that fit, then the least exchange with every incident edge priced (`_shed_alone`); where no such
    move is left, a chain of neighbours moved to agree (`_shed_chain`). The groups a move leaves in a
    forbidden pick are looked at again (none after `deadline`). Never raises the forbidden picks or any row's excess
    (IOPDDL M: the least bytes choice is within the limit with 6,687 forbidden pairs; K: 6,007, of which single moves
    shed all but 153)."""
    choice, unary, slack, pairing = list(choice), _unary(problem), Slack(problem, choice, index), index.pairing
    for sheds in ((_shed_alone,), (_shed_alone, _shed_chain)):  # chains only where no single move is left
        queue, misses = pairing.picks(choice)[1], 0
        for _ in range(passes):
            moved: set[int] = set()
            for g in queue:
                if _past(deadline) or misses >= CHAIN_MISSES:
                    return choice
                if not pairing.at(g, choice):  # an earlier move shed its picks
                    continue
                shifted = next((found for shed in sheds if (found := shed(g, choice, unary, slack, index))), [])
                misses = 0 if shifted else misses + (len(sheds) > 1)
                for group in shifted:
                    moved.update(other for other, _ in pairing.incident.get(group, ()))
                    moved.add(group)
            queue = sorted(g for g in moved if pairing.at(g, choice))
            if not queue:
                break
    return choice


def _shed_alone(g: int, choice: list[int], unary: list[np.ndarray], slack: Slack, index: GroupRows) -> list[int]:
    """Group `g` to its candidate of the fewest forbidden picks, fewer than its own, that fits, then the cheapest
    (`choice` and `slack` changed in place); the groups moved."""
    forbidden = index.pairing.forbidden(g, choice)
    fewer = (forbidden < forbidden[choice[g]]) & slack.fits(g, choice[g])
    if not fewer.any():
        return []
    cost = _priced(g, choice, unary, index)
    at = np.flatnonzero(fewer)
    _move(slack, choice, g, int(at[np.lexsort((cost[at], forbidden[at]))[0]]))
    return [g]


CHAIN_GROUPS = 64
"""Groups one `_shed_chain` may move at most."""
CHAIN_MISSES = 32
"""Groups in a row that no move, chain included, can take off a forbidden pick, after which `unforbid` ends: IOPDDL
A's least bytes keeps 590 picks that chains cannot shed (1 of 155 tries, 35 ms each, to its deadline: 6.4 s of a 60 s
run), where K's chains shed 140 of 162 (22 misses in a row at most before the last of them) and S's 43 of 43. At 32,
not 64, A's first valid choice comes at 9.4 s, not 10.5 s (one run each, alone), with the same cost."""


def _shed_chain(g: int, choice: list[int], unary: list[np.ndarray], slack: Slack, index: GroupRows) -> list[int]:
    """A neighbour `g` makes a forbidden pair with moved to agree with `g`'s pick, then each neighbour that move
    leaves in a forbidden pair moved to agree with it, and so on (an ejection chain: IOPDDL's edges between two
    nodes of one sharding allow one strategy of the second per strategy of the first, so a conflict moves a whole
    chain), each to its candidate of the fewest forbidden picks at its neighbours' picks then the cheapest, at most
    CHAIN_GROUPS groups, every move fitting. Kept when the forbidden picks around the moved groups fell (`choice`
    and `slack` changed in place); the groups moved."""
    pairing = index.pairing
    for h, costs in pairing.incident.get(g, ()):
        if costs[choice[g], choice[h]] < FORBIDDEN:
            continue
        was: dict[int, int] = {}
        frontier = [(h, g, costs.T)]  # (group, the group it must agree with, their costs with its candidates as rows)
        while frontier and len(was) < CHAIN_GROUPS:
            k, parent, matrix = frontier.pop(0)
            if k in was or k == g or matrix[choice[k], choice[parent]] < FORBIDDEN:
                continue
            agree = (matrix[:, choice[parent]] < FORBIDDEN) & slack.fits(k, choice[k])
            if not agree.any():
                break
            forbidden, cost = pairing.forbidden(k, choice), _priced(k, choice, unary, index)
            at = np.flatnonzero(agree)
            was[k] = choice[k]
            _move(slack, choice, k, int(at[np.lexsort((cost[at], forbidden[at]))[0]]))
            frontier += [(other, k, m.T) for other, m in pairing.incident.get(k, ())
                         if other not in was and m[choice[k], choice[other]] >= FORBIDDEN]
        touched = set(was) | {g}
        if was and pairing.picks_among(touched, choice) < pairing.picks_among(touched, _before(choice, was)):
            return list(was)
        for k, c in reversed(list(was.items())):
            _move(slack, choice, k, c)
    return []


def _before(choice: list[int], was: dict[int, int]) -> list[int]:
    """`choice` with the groups of `was` at their picks before."""
    earlier = list(choice)
    for k, c in was.items():
        earlier[k] = c
    return earlier


def descend(problem: Problem, choice, index: GroupRows, passes: int = DESCENT_PASSES,
            deadline: float | None = None) -> list[int]:
    """One-group moves, each to the group's cheapest candidate by its exchange with every incident edge priced at
    the neighbours' picks, among those that add no bytes over a limit at any row it is live at; a move's neighbours
    are looked at again (none after `deadline`). Never raises the exchange, the forbidden picks or any row's
    excess."""
    choice, unary, slack = list(choice), _unary(problem), Slack(problem, choice, index)
    queue = [g for g in range(problem.groups) if problem.candidate_counts[g] > 1]
    for _ in range(passes):
        moved: set[int] = set()
        if _past(deadline):
            break
        for g in queue:
            cost = _priced(g, choice, unary, index)
            cheaper = cost < cost[choice[g]]
            if not cheaper.any() or not (cheaper := cheaper & slack.fits(g, choice[g])).any():
                continue
            best = int(np.flatnonzero(cheaper)[np.argmin(cost[cheaper])])
            _move(slack, choice, g, best)
            moved.add(g)
            moved.update(other for other, _ in index.pairing.incident.get(g, ()))
        if not moved:
            break
        queue = sorted(moved)
    return choice


class RowPrices:
    """Per limit a price per byte at each row, turned into a price per candidate of every group (flat)."""

    def __init__(self, problem: Problem) -> None:
        table = problem.table
        self.table, self.limits = table, problem.limits
        offsets = np.cumsum([0, *problem.candidate_counts])
        of_term = np.repeat(np.arange(table.terms), table.counts)
        self.term_of = of_term
        self.flat = (offsets[table.group[of_term]] + np.arange(len(table.standard))
                     - np.repeat(table.start, table.counts))
        self.candidates = int(offsets[-1])
        self.prices = [np.zeros(len(problem.rows)) for _ in problem.limits]

    def penalty(self) -> np.ndarray:
        total = np.zeros(self.candidates)
        table = self.table
        for limit, price in zip(self.limits, self.prices):
            if not price.any():
                continue
            per_term = table.term_totals(price)
            weighted = limit.standard * table.standard + limit.interleaved * table.interleaved
            total += np.bincount(self.flat, weights=per_term[self.term_of] * weighted, minlength=self.candidates)
        return total

    def step(self, problem: Problem, choice, gap: float) -> bool:
        """One subgradient step towards the rows over their limits, of length `gap` / |excess|^2; whether any was."""
        usage = problem.usage(choice)
        over = [limit.standard * usage.standard + limit.interleaved * usage.interleaved - limit.bytes
                for limit in self.limits]
        norm = sum(float((np.maximum(o, 0).astype(np.float64) ** 2).sum()) for o in over)
        if not norm:
            return False
        for price, o in zip(self.prices, over):
            np.maximum(price + gap / norm * o, 0, out=price)
        return True


def _worth_repairing(key: tuple[int, int, int], best: tuple[int, int, int]) -> bool:
    """Whether a round's choice (its `choice_key`) is over the limits with no forbidden pick, where the best is not
    valid or dearer."""
    return key[0] == 0 and key[1] > 0 and (best[:2] != (0, 0) or key[2] < best[2])


def _repaired(problem: Problem, found: list[int], key: tuple[int, int, int], repair: Callable[..., list[int]],
              index: GroupRows, deadline: float | None) -> tuple[list[int], tuple[int, int, int], bool]:
    """(the better of `found` and its repair, that one's key, whether the repair is valid): a valid repair descended,
    one still over left as it is (it stays behind a valid best)."""
    fixed = repair(found, deadline=_part_left(deadline, REPAIR_SHARE) or np.inf)
    valid = problem.valid(tuple(fixed))
    if valid:
        fixed = descend(problem, fixed, index, deadline=deadline)
    better = min((found, key), (fixed, choice_key(problem, fixed)), key=lambda pair: pair[1])
    return better[0], better[1], valid


def choice_key(problem: Problem, choice) -> tuple[int, int, int]:
    """(forbidden picks, bytes over the limits, exchange): the order of the starts' choices (`wcsp`'s too)."""
    return problem.forbidden_in(choice), problem.usage(choice).violation(problem.limits), problem.exchange_of(choice)


def _conditioned(problem: Problem, taken: np.ndarray, choice, incident, penalty: np.ndarray) -> list[np.ndarray]:
    """Per group, per candidate: its exchange, its rows' prices, and each edge to a group not taken priced at that
    group's pick (floats)."""
    offsets = np.cumsum([0, *problem.candidate_counts])
    belief = []
    for g, costs in enumerate(problem.exchange):
        own = np.minimum(np.asarray(costs, dtype=np.float64), FORBIDDEN) + penalty[offsets[g]:offsets[g + 1]]
        if taken[g]:
            for other, matrix in incident.get(g, ()):
                if not taken[other]:
                    own = own + np.minimum(matrix[:, choice[other]], FORBIDDEN)
        belief.append(own)
    return belief


def group_rows(problem: Problem) -> GroupRows:
    """The problem's `GroupRows`, built once while the problem lives: the starts and the neighbourhood search of one
    solve share it."""
    if _SHARED and _SHARED[0]() is problem:
        return _SHARED[1]
    index = GroupRows(problem)
    # a weak reference: the index (and the blocks it keeps) goes with the problem, not with the next solve
    _SHARED[:] = [weakref.ref(problem, lambda _: _SHARED.clear()), index]
    return index


_SHARED: list = []
"""[a weak reference to the last problem `group_rows` was asked for, its GroupRows]."""


def _gained(key: tuple, best: tuple) -> bool:
    """Whether a round's choice (its `choice_key`) is valid and takes at least ROUND_GAIN off a valid `best`, or
    improves an invalid one at all. A round over the limits whose repair failed is not stale while repairs go on
    (IOPDDL K's rounds: most are over, and the ones repaired take 30% off), but is once they stopped (S: 60 s of such
    rounds)."""
    if best[:2] != (0, 0):
        return key < best
    return key[:2] == (0, 0) and key[2] <= best[2] * (1 - ROUND_GAIN)


def lagrangian(problem: Problem, start, index: GroupRows | None = None, rounds: int = ROUNDS, seed: int = 0,
               deadline: float | None = None, on_valid: Callable[[tuple[int, ...]], None] | None = None,
               repair: Callable[..., list[int]] | None = None, stale_rounds: int | None = None) -> tuple[int, ...]:
    """The best (fewest forbidden picks, least excess, least exchange) of `start` (improved by `descend` when it is
    valid; when the rounds leave none valid, the best's descent) and the rounds' repaired choices (module docstring);
    no round begins after `deadline` (a
    `time.perf_counter` value), nor after one that left an invalid best no better, so that a start that is stuck
    leaves the time to another; `on_valid` hears of the first valid choice. `index`: the problem's GroupRows (the shared
    one, `group_rows`, when not given). `repair(choice, deadline=...)`: a round's choice over a limit, with no
    forbidden pick and cheaper than the best, moved within the limits (`lns.repaired`: IOPDDL K's rounds were all
    over, its best the valid start at 18.9 G, where their repairs are valid at 12-14 G), tried when the best is not
    valid or the choice is cheaper, until a round is valid on its own (S's, from the second on: the rounds' time is
    better spent on more rounds) or REPAIR_TRIES in a row failed; with a deadline, a repair takes at most
    REPAIR_SHARE of the time left. `stale_rounds`: the rounds end after so many in a row without progress
    (`_gained`; None: they do not)."""
    index = group_rows(problem) if index is None else index
    incident, prices = index.pairing.incident, RowPrices(problem)
    random = np.random.default_rng(seed)
    best = (choice_key(problem, start), list(start))
    if best[0][0] and not best[0][1]:  # forbidden picks within the limits (IOPDDL M's, K's least bytes): shed them
        shed = unforbid(problem, start, index, deadline=_part_left(deadline, SHED_SHARE))  # first, kept only when
        if not problem.forbidden_in(tuple(shed)):  # that makes it valid (A's are shed in part, and its cheapest is
            best = (choice_key(problem, shed), shed)  # valid after the first round from the start itself)
    if best[0][:2] == (0, 0):  # valid: improved at once, still valid. Not one with forbidden picks: its descent
        # tightens the rows around them (IOPDDL A's cheapest: 12,422 picks to 594, the rows then full), the rounds fix
        # them from the start itself (from A's cheapest, the first round is valid)
        first = descend(problem, best[1], index, deadline=deadline)
        best = (choice_key(problem, first), first)
    if on_valid is not None and best[0][:2] == (0, 0):
        on_valid(tuple(best[1]))
    scale, failed, unaided, stale = 1.0, 0, False, 0
    for _ in range(rounds):
        if _past(deadline):
            break
        taken, forest = _induced_forest(problem, incident, random.permutation(problem.groups))
        tree = _tree_choice(_conditioned(problem, taken, best[1], incident, prices.penalty()), forest)
        tree = [c if free else b for c, free, b in zip(tree, taken.tolist(), best[1])]
        relieved = relieve(problem, tree, index, deadline=_part_left(deadline, RELIEF_SHARE))
        found = descend(problem, unforbid(problem, relieved, index, deadline=deadline), index, deadline=deadline)
        key = choice_key(problem, found)
        unaided = unaided or key[:2] == (0, 0)
        if repair is not None and not unaided and failed < REPAIR_TRIES and _worth_repairing(key, best[0]):
            found, key, fixed = _repaired(problem, found, key, repair, index, deadline)
            failed = 0 if fixed else failed + 1
        if on_valid is not None and key[:2] == (0, 0) and best[0][:2] != (0, 0):
            on_valid(tuple(found))
        repairing = repair is not None and not unaided and failed < REPAIR_TRIES
        stale = 0 if _gained(key, best[0]) else stale + 1 if key[:2] == (0, 0) or not repairing else stale
        if key < best[0]:
            best = (key, found)
        elif best[0][:2] != (0, 0):
            break
        else:
            scale /= 1.5
        if stale_rounds is not None and stale >= stale_rounds:
            break
        gap = scale * max(best[0][2] - problem.exchange_of(tree), best[0][2] * 0.01, 1)
        prices.step(problem, tree, gap)
    if best[0][:2] != (0, 0):  # still invalid: its descent, last, may still shed forbidden picks
        last = descend(problem, best[1], index, deadline=deadline)
        best = min(best, (choice_key(problem, last), last))
        if on_valid is not None and best[0][:2] == (0, 0):
            on_valid(tuple(best[1]))
    return tuple(best[1])
