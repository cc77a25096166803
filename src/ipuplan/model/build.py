"""The builder of a `Problem` from a plan's facts and its candidate space: per kept step, the bytes no choice
changes and each live free group's bytes per candidate (scratch included), and per choice a cap left out of its
candidates (`space.types.LeftOut`), dominated steps dropped.

Large plans are laid flat: the live entries (a million and more at 50k values), the pairs of a step and a live
group, and the candidates' scratch entries are numpy arrays; Python looks only at each distinct set of a group's
live members, each distinct term and each step."""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import chain, pairwise, repeat
from operator import attrgetter

import numpy as np

from ipuplan.facts.plan_facts import PlanFacts
from ipuplan.model.cost_terms import proxy_exchange
from ipuplan.model.problem import Problem, StepRow, Terms, TermTable, numbered_table, ranges
from ipuplan.plan.collector import gc_paused
from ipuplan.plan.layout import STANDARD
from ipuplan.space.types import CandidateSpace, FreeGroup, LeftOut

Term = tuple[int, np.ndarray, np.ndarray]
"""(group index, standard bytes per choice, interleaved bytes per choice): one element of `Terms`."""

_id, _bytes, _memory_class = attrgetter("id"), attrgetter("bytes"), attrgetter("memory_class")
_candidates, _members, _scratch = attrgetter("candidates"), attrgetter("members"), attrgetter("row_scratch")
_layouts, _value_bytes = attrgetter("layouts"), attrgetter("value_bytes")


def problem_of(facts: PlanFacts, space: CandidateSpace, live: LiveSets | None = None) -> Problem:
    """The space's choices as indices and integers, under the budgets of `facts` (`live`: the space's live sets,
    when known)."""
    with gc_paused():  # tens of thousands of rows and terms, no garbage: the collector would walk the whole plan
        rows, left_out, table = _rows_and_table(facts, space, live)
        return Problem(
            candidate_counts=tuple(len(g.candidates) for g in space.free),
            input_choice=tuple(g.input_index for g in space.free),
            group_sizes=tuple(len(g.members) for g in space.free),
            rows=tuple(rows),
            exchange=proxy_exchange(space),
            limits=facts.budgets.limits,
            steps_total=len(facts.plan.steps),
            left_out=tuple(left_out) if any(left_out) else (),
        ).with_table(table)


@dataclass(frozen=True)
class LiveSets:
    """Which members of each free group are live at each step, and the bytes of the other live values. Each
    distinct set of one group's members is numbered once: a group mostly holds the same set step after step, so
    its bytes are summed once per set, not once per step."""

    standard: np.ndarray
    interleaved: np.ndarray
    """Per step (in plan order), the bytes of its live values no free group holds, per class."""
    step: np.ndarray
    group: np.ndarray
    number: np.ndarray
    """Per (step, live group) pair, by step (its position in the plan) then group: the step, the group, its set."""
    sets: tuple[tuple[int, np.ndarray], ...]
    """Per set, its group and its members' positions in the group, in live order."""


def step_rows(facts: PlanFacts, space: CandidateSpace,
              live: LiveSets | None = None) -> tuple[list[StepRow], list[Terms]]:
    """Per-step constant and variable bytes, and per step the left-out choices' bytes; steps dominated by another
    step are dropped. Equal terms are one object, shared by every row they occur at."""
    return _rows_and_table(facts, space, live)[:2]


def _rows_and_table(facts: PlanFacts, space: CandidateSpace,
                    live: LiveSets | None) -> tuple[list[StepRow], list[Terms], TermTable]:
    """`step_rows`, and their `term_table` laid from the terms' numbers (0.25 s at 50k values, where `term_table`
    would find them again from the rows)."""
    live = live if live is not None else live_sets(facts, space)
    set_terms, set_left_out = _set_terms(space, live.sets), _set_left_outs(space, live.sets)
    position_of = {step.index: k for k, step in enumerate(facts.plan.steps)}
    scratch, left_scratch = _candidate_scratch(space, position_of), _left_out_scratch(space, position_of)
    places = _places(live, len(space.free), sorted(scratch.keys() | left_scratch.keys()))
    cells = _scratch_cells(space, places, scratch, left_scratch, set_terms, set_left_out)
    (term_id, left_out_id, cell_term, cell_left_out), distinct = _numbered(
        set_terms, set_left_out, [term for term, _ in cells], [left_out for _, left_out in cells])
    flat = _flat_rows(facts, live, places, np.array(term_id, dtype=np.int64), np.array(left_out_id, dtype=np.int64),
                      np.array(cell_term, dtype=np.int64), np.array(cell_left_out, dtype=np.int64))
    kept = _undominated(flat)
    steps = facts.plan.steps
    rows = [StepRow(steps[k].index, flat.standard[k], flat.interleaved[k], tuple(map(distinct.__getitem__,
                                                                                     flat.terms[k]))) for k in kept]
    return rows, [tuple(map(distinct.__getitem__, flat.left_out[k])) for k in kept], _kept_table(flat, kept, distinct)


def _kept_table(flat: FlatRows, kept: list[int], distinct: list[Term]) -> TermTable:
    """`term_table` of the kept rows: their terms' numbers (by content already, `_numbered`) renumbered by first
    occurrence, as `term_table` numbers them."""
    lengths = np.fromiter((len(flat.terms[k]) for k in kept), dtype=np.int64, count=len(kept))
    content = np.fromiter(chain.from_iterable(map(flat.terms.__getitem__, kept)), dtype=np.int64,
                          count=int(lengths.sum()))
    numbers, first = np.unique(content, return_index=True)
    by_first = numbers[np.argsort(first)]
    renumbered = np.zeros(len(distinct), dtype=np.int64)
    renumbered[by_first] = np.arange(len(by_first))
    return numbered_table([flat.standard[k] for k in kept], [flat.interleaved[k] for k in kept], lengths,
                          renumbered[content], list(map(distinct.__getitem__, by_first.tolist())))


def live_sets(facts: PlanFacts, space: CandidateSpace) -> LiveSets:
    """The live sets of every step, laid flat once."""
    steps = facts.plan.steps
    lengths = np.fromiter(map(len, (step.live for step in steps)), dtype=np.int64, count=len(steps))
    live = np.fromiter(chain.from_iterable(step.live for step in steps), dtype=np.int64, count=int(lengths.sum()))
    at = np.repeat(np.arange(len(steps)), lengths)
    group, position = _membership(space, len(facts.estimate.values))
    fixed_standard, fixed_interleaved = _fixed_bytes(facts)
    free = group[live] >= 0
    pair_step, pair_group, number, sets = _numbered_sets(at[free], group[live[free]], position[live[free]])
    in_step_order = _radix_order(pair_step)  # stable: a step's pairs stay by group
    return LiveSets(_segment_sums(np.where(free, 0, fixed_standard[live]), lengths),
                    _segment_sums(np.where(free, 0, fixed_interleaved[live]), lengths),
                    pair_step[in_step_order], pair_group[in_step_order], number[in_step_order], sets)


def _membership(space: CandidateSpace, values: int) -> tuple[np.ndarray, np.ndarray]:
    """Per value id, its free group (-1: none) and its position among the group's members."""
    sizes = np.fromiter(map(len, map(_members, space.free)), dtype=np.int64, count=len(space.free))
    members = np.fromiter(chain.from_iterable(map(_members, space.free)), dtype=np.int64, count=int(sizes.sum()))
    group, position = np.full(values, -1, dtype=np.int64), np.zeros(values, dtype=np.int64)
    group[members] = np.repeat(np.arange(len(sizes)), sizes)
    position[members] = np.arange(len(members)) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    return group, position


def _fixed_bytes(facts: PlanFacts) -> tuple[np.ndarray, np.ndarray]:
    """Per value id, its bytes in its class (0 in the other) at the input's layouts."""
    values, computed = facts.plan.values, facts.estimate.values
    ids = list(map(_id, values))
    sizes = np.fromiter(map(_bytes, map(computed.__getitem__, ids)), dtype=np.int64, count=len(ids))
    standard = np.fromiter(map(STANDARD.__eq__, map(_memory_class, values)), dtype=bool, count=len(ids))
    found = np.zeros((2, len(computed)), dtype=np.int64)
    found[0, ids], found[1, ids] = np.where(standard, sizes, 0), np.where(standard, 0, sizes)
    return found[0], found[1]


def _segment_sums(figures: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The sums of consecutive runs of `figures` of the given lengths (exact integers, unlike `bincount`)."""
    ends = np.cumsum(lengths)
    running = np.append(0, np.cumsum(figures))
    return running[ends] - running[ends - lengths]


def _lexicographic(*keys: np.ndarray) -> np.ndarray:
    """The stable order of entries by non-negative integer `keys`, the first the most significant."""
    spans = [int(key.max(initial=0)) + 1 for key in keys]
    if math.prod(spans) >= 2**63:
        return np.lexsort(keys[::-1])
    combined = np.zeros(len(keys[0]), dtype=np.int64)
    for key, span in zip(keys, spans):
        combined = combined * span + key
    return _radix_order(combined)


def _radix_order(key: np.ndarray) -> np.ndarray:
    """The stable order of non-negative integers `key`, by one pass per 16 bits: numpy sorts 16-bit integers by
    radix but wider ones by timsort, six times slower on a million keys."""
    top = int(key.max(initial=0))
    order = np.argsort((key & 0xFFFF).astype(np.uint16), kind="stable")
    shift = 16
    while top >> shift:
        order = order[np.argsort(((key[order] >> shift) & 0xFFFF).astype(np.uint16), kind="stable")]
        shift += 16
    return order


def _numbered_sets(step: np.ndarray, group: np.ndarray, position: np.ndarray) -> tuple[
        np.ndarray, np.ndarray, np.ndarray, tuple[tuple[int, np.ndarray], ...]]:
    """Per (step, group) pair of the live entries: its step, its group and the number of its set of positions; and
    per number, the set. A pair holding the same set as the group's pair before it takes its number without a look
    at a key: only where a group's set changes is one made."""
    order = _radix_order(group)  # stable: the entries are by step already, a step's in live order
    step, group, position = step[order], group[order], position[order]
    starts = np.flatnonzero((np.diff(group, prepend=-1) != 0) | (np.diff(step, prepend=-1) != 0))
    lengths = np.diff(np.append(starts, len(position)))
    back = np.arange(len(position)) - np.repeat(lengths, lengths)  # the same place in the pair before, if as long
    moved = np.logical_or.reduceat((back < 0) | (position != position[np.maximum(back, 0)]), starts) if len(
        starts) else np.zeros(0, dtype=bool)
    repeated = np.zeros(len(starts), dtype=bool)
    repeated[1:] = (group[starts[1:]] == group[starts[:-1]]) & (lengths[1:] == lengths[:-1]) & ~moved[1:]
    heads = np.flatnonzero(~repeated)
    numbers: dict[tuple[int, bytes], int] = {}
    sets, head_number = [], []
    for g, a, b in zip(group[starts[heads]].tolist(), starts[heads].tolist(), (starts + lengths)[heads].tolist()):
        key = (g, position[a:b].tobytes())
        if key not in numbers:
            numbers[key] = len(sets)
            sets.append((g, position[a:b]))
        head_number.append(numbers[key])
    number = np.array(head_number, dtype=np.int64)[np.cumsum(~repeated) - 1]
    return step[starts], group[starts], number, tuple(sets)


def _set_terms(space: CandidateSpace, sets: tuple[tuple[int, np.ndarray], ...]) -> list[Term]:
    """Per set, its group's bytes per candidate per class. The repeated groups of an unrolled plan have candidates
    of equal bytes (`Candidate.shifted` shares their layouts and bytes) and equal sets: each is summed once."""
    kinds = _kinds(space)
    seen: dict[int, list] = {}
    matrices: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    sums: dict[tuple[int, bytes], tuple[np.ndarray, np.ndarray]] = {}
    found = []
    for g, positions in sets:
        key = (kinds[g], positions.tobytes())
        if key not in sums:
            if kinds[g] not in matrices:
                matrices[kinds[g]] = _member_bytes(space.free[g], seen)
            standard, interleaved = matrices[kinds[g]]
            sums[key] = (standard[:, positions].sum(axis=1), interleaved[:, positions].sum(axis=1))
        found.append((g, *sums[key]))
    return found


def _kinds(space: CandidateSpace) -> list[int]:
    """Per group, a number equal for groups whose candidates hold the same layouts and bytes objects."""
    candidates = list(chain.from_iterable(map(_candidates, space.free)))
    identities = np.stack([np.fromiter(map(id, map(_layouts, candidates)), dtype=np.int64, count=len(candidates)),
                           np.fromiter(map(id, map(_value_bytes, candidates)), dtype=np.int64,
                                       count=len(candidates))], axis=1)
    ends = np.cumsum(np.fromiter(map(len, map(_candidates, space.free)), dtype=np.int64, count=len(space.free)))
    numbers: dict[bytes, int] = {}
    return [numbers.setdefault(identities[a:b].tobytes(), len(numbers))
            for a, b in zip([0, *ends[:-1].tolist()], ends.tolist())]


def _member_bytes(group: FreeGroup, seen: dict[int, list]) -> tuple[np.ndarray, np.ndarray]:
    """Candidates x members: each member's bytes under each candidate in its class, per class (0 in the other).
    Candidates share their layouts and bytes tuples (`seen`, by identity): each is read once."""
    sizes = np.array([_read(seen, c.value_bytes, _sizes) for c in group.candidates], dtype=np.int64)
    standard = np.array([_read(seen, c.layouts, _standard) for c in group.candidates], dtype=bool)
    return np.where(standard, sizes, 0), np.where(standard, 0, sizes)


def _read(seen: dict[int, list], objects: tuple, read) -> list:
    key = id(objects)
    if key not in seen:
        seen[key] = read(objects)
    return seen[key]


def _sizes(value_bytes: tuple) -> list[int]:
    return list(map(_bytes, value_bytes))


def _standard(layouts: tuple) -> list[bool]:
    return list(map(STANDARD.__eq__, map(_memory_class, layouts)))


def _set_left_outs(space: CandidateSpace, sets: tuple[tuple[int, np.ndarray], ...]) -> list[Term | None]:
    """Per set, the bytes of its members under each left-out choice of its group (None: none left out), each once
    for the repeated groups of an unrolled plan (`LeftOut.shifted` shares the bytes)."""
    sums: dict[tuple[int, int, bytes], tuple[np.ndarray, np.ndarray]] = {}
    found = []
    for g, positions in sets:
        left_out = space.free[g].left_out
        if left_out is None:
            found.append(None)
            continue
        key = (id(left_out.bytes), id(left_out.standard), positions.tobytes())
        if key not in sums:
            sums[key] = _left_out_bytes(left_out, positions)
        found.append((g, *sums[key]))
    return found


def _left_out_bytes(left_out: LeftOut, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The bytes of the members at `positions`, per class, under each left-out choice."""
    standard = np.asarray(left_out.standard, dtype=bool)[positions]
    chosen = left_out.bytes[:, positions]
    return chosen[:, standard].sum(axis=1, dtype=np.int64), chosen[:, ~standard].sum(axis=1, dtype=np.int64)


@dataclass(frozen=True)
class Places:
    """The (step position, group) pairs where a choice of the group changes the step's scratch, by step then
    group."""

    step: np.ndarray
    group: np.ndarray
    at: np.ndarray
    """Per place, where its pair is among the live pairs (`LiveSets`), or where it would go."""
    number: np.ndarray
    """Per place, the group's set live there (-1: none of its members is)."""


def _places(live: LiveSets, groups: int, places: list[tuple[int, int]]) -> Places:
    """The (step position, group) `places`, sorted, found among the live pairs."""
    found = np.array(places, dtype=np.int64).reshape(-1, 2)
    pairs = live.step * groups + live.group  # ascending: the pairs are by step, then group
    wanted = found[:, 0] * groups + found[:, 1]
    at = np.searchsorted(pairs, wanted)
    here = np.append(pairs, -1)[at] == wanted  # a place after the last pair is no pair's
    return Places(found[:, 0], found[:, 1], at, np.where(here, np.append(live.number, -1)[at], -1))


Cell = tuple[Term, Term | None]
"""At a place, the group's term and its left-out choices' term (None: none left out), scratch included."""


def _scratch_cells(space: CandidateSpace, places: Places, scratch: dict, left_scratch: dict, set_terms: list[Term],
                   set_left_out: list[Term | None]) -> list[Cell]:
    """The terms at the places: the group's set's bytes there (none when not live) plus its scratch under each
    choice (`_candidate_scratch`) or each left-out choice (`_left_out_scratch`)."""
    cells = []
    for k, g, number in zip(places.step.tolist(), places.group.tolist(), places.number.tolist()):
        group = space.free[g]
        standard, interleaved = scratch.get((k, g)) or _no_scratch(len(group.candidates))
        if number >= 0:
            standard, interleaved = set_terms[number][1] + standard, set_terms[number][2] + interleaved
        cells.append(((g, standard, interleaved), None if group.left_out is None else _left_out_with(
            g, group.left_out, None if number < 0 else set_left_out[number], left_scratch.get((k, g)))))
    return cells


def _no_scratch(candidates: int) -> tuple[np.ndarray, np.ndarray]:
    return np.zeros(candidates, dtype=np.int64), np.zeros(candidates, dtype=np.int64)


def _candidate_scratch(space: CandidateSpace, position_of: dict[int, int]) -> dict[
        tuple[int, int], tuple[np.ndarray, np.ndarray]]:
    """Per (step position, group) some candidate names in its scratch, the scratch under each candidate (one that
    does not name the step leaves none; one that names it twice, its last). Laid flat: a 50k-value plan's
    candidates hold a quarter million entries."""
    counts = np.fromiter(map(len, map(_candidates, space.free)), dtype=np.int64, count=len(space.free))
    scratch = list(map(_scratch, chain.from_iterable(map(_candidates, space.free))))
    lengths = np.fromiter(map(len, scratch), dtype=np.int64, count=len(scratch))
    entries = np.fromiter(chain.from_iterable(chain.from_iterable(scratch)), dtype=np.int64,
                          count=3 * int(lengths.sum())).reshape(-1, 3)
    owner = np.repeat(np.arange(len(scratch)), lengths)
    group = np.repeat(np.arange(len(counts)), counts)[owner]
    choice = owner - (np.cumsum(counts) - counts)[group]
    k = np.fromiter(map(position_of.get, entries[:, 0].tolist(), repeat(-1)), dtype=np.int64, count=len(entries))
    named = k >= 0  # a step the plan does not have is no step's scratch
    order = np.flatnonzero(named)[_lexicographic(group[named], k[named])]  # stable: a candidate's own order kept
    group, choice, k, entries = group[order], choice[order], k[order], entries[order]
    starts = np.flatnonzero((np.diff(group, prepend=-1) != 0) | (np.diff(k, prepend=-1) != 0))
    widths = counts[group[starts]]
    offsets = np.cumsum(widths) - widths
    place = np.repeat(offsets, np.diff(np.append(starts, len(group)))) + choice
    last = len(place) - 1 - np.unique(place[::-1], return_index=True)[1]
    standard, interleaved = np.zeros((2, int(widths.sum())), dtype=np.int64)
    standard[place[last]], interleaved[place[last]] = entries[last, 1], entries[last, 2]
    return {(c, g): (standard[o:o + w], interleaved[o:o + w]) for c, g, o, w in zip(
        k[starts].tolist(), group[starts].tolist(), offsets.tolist(), widths.tolist())}


def _left_out_scratch(space: CandidateSpace, position_of: dict[int, int]) -> dict[
        tuple[int, int], tuple[np.ndarray, np.ndarray]]:
    """Per (step position, group with left-out choices) the group's left-out scratch names, that scratch under each
    left-out choice (summed over the entries naming the step)."""
    found: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
    for g, group in enumerate(space.free):
        for index, standard, interleaved in () if group.left_out is None else group.left_out.scratch:
            if index in position_of:
                key = (position_of[index], g)
                before = found.get(key, _no_scratch(group.left_out.count))
                found[key] = (before[0] + standard, before[1] + interleaved)
    return found


def _left_out_with(g: int, left_out: LeftOut, live: Term | None,
                   scratch: tuple[np.ndarray, np.ndarray] | None) -> Term:
    """The left-out choices' term of a step: its live members' bytes (none when not live) plus its scratch."""
    standard, interleaved = _no_scratch(left_out.count) if live is None else live[1:]
    if scratch is not None:
        standard, interleaved = standard + scratch[0], interleaved + scratch[1]
    return g, standard, interleaved


def _numbered(*lists: list[Term | None]) -> tuple[list[list[int]], list[Term]]:
    """Per list, per term, the number of its content (-1 for None); and per number, the first term of that
    content."""
    numbers: dict[tuple[int, bytes, bytes], int] = {}
    distinct: list[Term] = []
    found = []
    for terms in lists:
        found.append([])
        for term in terms:
            if term is None:
                found[-1].append(-1)
                continue
            key = (term[0], term[1].tobytes(), term[2].tobytes())
            if key not in numbers:
                numbers[key] = len(distinct)
                distinct.append(term)
            found[-1].append(numbers[key])
    return found, distinct


@dataclass(frozen=True)
class FlatRows:
    """Every step's row by the numbers of its terms' contents, groups ascending."""

    standard: list[int]
    interleaved: list[int]
    """Per step, the bytes no choice changes."""
    terms: list[tuple[int, ...]]
    left_out: list[tuple[int, ...]]
    """Per step, its terms and its left-out choices' terms."""


def _flat_rows(facts: PlanFacts, live: LiveSets, places: Places, term_id: np.ndarray, left_out_id: np.ndarray,
               cell_terms: np.ndarray, cell_left_out: np.ndarray) -> FlatRows:
    """The live pairs' terms (per set, `term_id` and `left_out_id`: -1 for none) with the terms of the places in
    their place; a step's own scratch counts unless a choice's scratch replaces it."""
    steps = facts.plan.steps
    terms, left_out = term_id[live.number], left_out_id[live.number]
    here = places.number >= 0
    terms[places.at[here]], left_out[places.at[here]] = cell_terms[here], cell_left_out[here]
    at, new = places.at[~here], ~here  # inserted in order: the places are by step then group, as the pairs
    step = np.insert(live.step, at, places.step[new])
    terms, left_out = np.insert(terms, at, cell_terms[new]), np.insert(left_out, at, cell_left_out[new])
    held = left_out >= 0
    own = np.ones(len(steps), dtype=bool)
    own[places.step] = False
    scratch = np.array([(s.scratch.standard, s.scratch.interleaved) for s in steps], dtype=np.int64).reshape(-1, 2)
    return FlatRows((live.standard + np.where(own, scratch[:, 0], 0)).tolist(),
                    (live.interleaved + np.where(own, scratch[:, 1], 0)).tolist(),
                    _runs(terms.tolist(), np.searchsorted(step, np.arange(len(steps) + 1)).tolist()),
                    _runs(left_out[held].tolist(), np.searchsorted(step[held], np.arange(len(steps) + 1)).tolist()))


def _runs(figures: list[int], bounds: list[int]) -> list[tuple[int, ...]]:
    """The figures from each bound to the next."""
    return [tuple(figures[a:b]) for a, b in pairwise(bounds)]


def _undominated(rows: FlatRows) -> list[int]:
    """The steps kept: a step is dropped when its every term (the left-out choices' too) is matched by an identical
    term of a step with more constant bytes."""
    best: dict[tuple, list[int]] = {}
    standard, interleaved = rows.standard, rows.interleaved
    for r, key in enumerate(zip(rows.terms, rows.left_out)):
        front = best.get(key)
        if front is None:
            best[key] = [r]
            continue
        if any(standard[o] >= standard[r] and interleaved[o] >= interleaved[r] for o in front):
            continue
        front[:] = [o for o in front if not (standard[r] >= standard[o] and interleaved[r] >= interleaved[o])]
        front.append(r)
    return sorted(r for front in best.values() for r in front)


def widened_problem(facts: PlanFacts, narrow: Problem, space: CandidateSpace, chosen: dict[int, np.ndarray],
                    live: LiveSets | None = None) -> Problem:
    """The problem of `space`: `narrow`'s space with the left-out choices `chosen` (per group, a mask) made
    candidates after the kept ones (`space.scopes.with_promoted`), read off `narrow`'s rows (`promoted_problem`: at
    50k values 8,550 of 31,920 rows change; building them again took 1 s). Built again (`problem_of`) where a
    promotion made fewer candidates than it was asked for, or the rows do not read off."""
    promoted = {g: mask for g, mask in chosen.items() if mask.any()} if narrow.left_out else {}
    if tuple(len(group.candidates) for group in space.free) == _promoted_counts(narrow, promoted):
        found = promoted_problem(narrow, promoted, proxy_exchange(space))
        if found is not None:
            return found
    return problem_of(facts, space, live)


def _promoted_counts(narrow: Problem, promoted: dict[int, np.ndarray]) -> tuple[int, ...]:
    return tuple(n + int(promoted[g].sum()) if g in promoted else n for g, n in enumerate(narrow.candidate_counts))


def promoted_problem(narrow: Problem, promoted: dict[int, np.ndarray],
                     exchange: tuple[tuple[int, ...], ...]) -> Problem | None:
    """`narrow` with each group's left-out choices `promoted` (a mask) appended to its candidates, whose exchange is
    then `exchange`. A promoted choice's bytes at a row are its left-out bytes there: the group's term there becomes
    its term followed by the chosen entries of its left-out term, and the rest stay left out. Every row's terms map
    one to one, so the rows `narrow` kept are the ones to keep. None where the rows do not read off: pairwise edges,
    rows given as a table, a left-out term without its group's term at its row."""
    if narrow.edges or not isinstance(narrow.rows, tuple):
        return None
    rows, left_out = list(narrow.rows), list(narrow.left_out)
    made: dict[tuple[int, int], tuple[Term, Term | None]] = {}
    changed: list[tuple[int, int, Term]] = []
    for r, held in enumerate(narrow.left_out):
        if not any(left[0] in promoted for left in held):
            continue
        row = rows[r]
        terms = {term[0]: term for term in row.terms}
        if any(left[0] in promoted and left[0] not in terms for left in held):
            return None
        widened = {left[0]: _promoted_terms(made, terms[left[0]], left, promoted[left[0]])
                   for left in held if left[0] in promoted}
        changed += [(r, k, widened[term[0]][0]) for k, term in enumerate(row.terms) if term[0] in widened]
        rows[r] = StepRow(row.step, row.standard, row.interleaved,
                          tuple(widened[term[0]][0] if term[0] in widened else term for term in row.terms))
        left_out[r] = tuple(left for left in (widened[left[0]][1] if left[0] in widened else left for left in held)
                            if left is not None)
    return narrow.with_table(_widened_table(narrow, promoted, changed), candidate_counts=_promoted_counts(
        narrow, promoted), rows=tuple(rows), exchange=exchange, left_out=tuple(left_out) if any(left_out) else ())


def _widened_table(narrow: Problem, promoted: dict[int, np.ndarray],
                   changed: list[tuple[int, int, Term]]) -> TermTable | None:
    """`narrow`'s table (when built, its occurrences laid out) with each promoted group's terms widened as at the
    `changed` (row, place in the row, widened term): the same spans, where every such term became one widened term
    at every row it occurs at (else None: the table is laid flat from the rows when first asked for)."""
    table = narrow.__dict__.get("table")
    if table is None or "occurrences" not in table.__dict__ or not changed:
        return None
    rows, places, terms = zip(*changed)
    numbers = table.term[np.searchsorted(table.row, np.array(rows)) + np.array(places)]
    if not np.array_equal(table.group[numbers], [term[0] for term in terms]):  # the occurrences are not the rows'
        return None
    widened: dict[int, Term] = {}
    for k, term in zip(numbers.tolist(), terms):
        if widened.setdefault(k, term) is not term:
            return None
    promoted_terms = np.flatnonzero(np.isin(table.group, list(promoted)))
    if set(promoted_terms.tolist()) != widened.keys() or not np.array_equal(
            np.bincount(numbers, minlength=table.terms)[promoted_terms], table.live_rows[promoted_terms]):
        return None
    lengths = table.counts.copy()
    lengths[list(widened)] = [len(term[1]) for term in widened.values()]
    start = np.cumsum(lengths) - lengths
    kept = np.ones(table.terms, dtype=bool)
    kept[list(widened)] = False
    standard, interleaved = np.zeros((2, int(lengths.sum())), dtype=np.int64)
    to, read = ranges(start[kept], lengths[kept]), ranges(table.start[kept], lengths[kept])
    standard[to], interleaved[to] = table.standard[read], table.interleaved[read]
    for k, (_, term_standard, term_interleaved) in widened.items():
        standard[start[k]:start[k] + lengths[k]], interleaved[start[k]:start[k] + lengths[k]] = (term_standard,
                                                                                                 term_interleaved)
    return table.with_candidates(start, standard, interleaved)


def _promoted_terms(made: dict, term: Term, left: Term, mask: np.ndarray) -> tuple[Term, Term | None]:
    """A row's term and left-out term of a group whose left-out choices `mask` became candidates: the chosen ones'
    bytes appended to the term, the others' left out (None: none is). Made once per pair of terms (shared, as
    `step_rows` shares equal terms)."""
    key = (id(term), id(left))
    if key not in made:
        g, kept = term[0], ~mask
        made[key] = ((g, np.concatenate([term[1], left[1][mask]]), np.concatenate([term[2], left[2][mask]])),
                     (g, left[1][kept], left[2][kept]) if kept.any() else None)
    return made[key]
