"""Dataflow inference: which step reads, writes and releases which value.

Plans store only live sets; the rules of PLAN_FORMAT.md ("Dataflow") recover the rest.
Where a rule leaves more than one candidate, the step gets an `Ambiguity` instead of a
guess, and whatever it touches stays frozen in the optimiser.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from math import prod

import numpy as np

from ipuplan.facts.liveness import Liveness, liveness
from ipuplan.plan.format import Plan, Step, Value
from ipuplan.plan.operation import Operation, parse_operation

BODY_ARGUMENT = " (body argument)"
SAME_STORAGE_GROUP = "same storage group"
"""The rule of a conversion's source: not a rule of shapes (`Form`), so compared value by value."""
INTERMEDIATE_PREFIX = "operation "


@dataclass(frozen=True)
class Ambiguity:
    step: int
    message: str
    suspects: tuple[int, ...] = ()
    """Values the step might touch: whatever it involves must stay frozen."""

    def __str__(self) -> str:
        return f"step {self.step}: {self.message}"


@dataclass(frozen=True)
class StepFlow:
    index: int
    reads: tuple[int, ...]
    writes: tuple[int, ...]
    releases: tuple[int, ...]


@dataclass(frozen=True)
class GemmFamily:
    """The steps and values of one lowered matmul (PLAN_FORMAT.md, "How a logical op is lowered")."""

    gemm_step: int
    left: int | None
    right: int | None
    left_source: int | None
    right_source: int | None
    partials: int | None
    sum_step: int | None
    sum_result: int | None


@dataclass(frozen=True)
class Dataflow:
    steps: tuple[StepFlow, ...]
    inputs: tuple[int, ...]
    """Program inputs: live values written by no step (usually all first live at step 0)."""
    bindings: dict[int, tuple[int, ...]]
    """Body argument -> the values of its group it stands for."""
    ambiguities: tuple[Ambiguity, ...]
    families: tuple[GemmFamily, ...]
    formed: frozenset[int] = field(default=frozenset(), repr=False)
    """Values whose precision and shape a rule of shapes read: another value's shape cannot change a step's flow."""

    @cached_property
    def readers(self) -> dict[int, tuple[int, ...]]:
        """Value -> steps that read it; a read of a body argument reads every bound value."""
        found: dict[int, list[int]] = {}
        for flow in self.steps:
            for value_id in flow.reads:
                for target in (value_id, *self.bindings.get(value_id, ())):
                    found.setdefault(target, []).append(flow.index)
        return {v: tuple(sorted(set(s))) for v, s in found.items()}

    @cached_property
    def writers(self) -> dict[int, tuple[int, ...]]:
        found: dict[int, list[int]] = {}
        for flow in self.steps:
            for value_id in flow.writes:
                found.setdefault(value_id, []).append(flow.index)
        return {v: tuple(s) for v, s in found.items()}


def is_body_argument(value: Value) -> bool:
    return value.name.endswith(BODY_ARGUMENT) and value.is_alias


def body_bindings(plan: Plan) -> dict[int, tuple[int, ...]]:
    """Each body argument stands for the values of its `group` (layer 0, layer 1, ...)."""
    by_group: dict[str, list[int]] = {}
    arguments = []
    for value in plan.values:
        if not value.name.endswith(BODY_ARGUMENT):
            by_group.setdefault(value.group, []).append(value.id)
        elif is_body_argument(value):
            arguments.append(value)
    return {v.id: tuple(by_group.get(v.group, ())) for v in arguments}


def layout_group_of(plan: Plan, bindings: Mapping[int, tuple[int, ...]]) -> list[int]:
    """Per value, a representative of its layout group, the values that must share one layout: in-place aliases with
    their root, a body argument with every value of its group (`Dataflow.bindings`). The optimiser's groups
    (`space.rules.layout_groups`) and `check`'s rule that a group is laid out alike read this one definition."""
    parent = list(range(len(plan.values)))

    def find(v: int) -> int:
        while parent[v] != v:
            parent[v] = parent[parent[v]]
            v = parent[v]
        return v

    for value in plan.values:
        # a value its own root joins nothing (most values: a union with itself only compresses paths)
        if value.root != value.id and 0 <= value.root < len(parent):
            parent[find(value.id)] = find(value.root)
    for argument, members in bindings.items():
        for member in members:
            parent[find(argument)] = find(member)
    return _tree_roots(parent)


def _tree_roots(parent: list[int]) -> list[int]:
    """Per node of a forest given by `parent` (a root its own parent), its root: every parent replaced by its own
    until none changes, a few numpy passes where a `find` per node is a Python loop over 50k values."""
    roots = np.array(parent, dtype=np.int64)
    while True:
        higher = roots[roots]
        if np.array_equal(higher, roots):
            return roots.tolist()
        roots = higher


def in_place_results(plan: Plan, live: Liveness, ambiguities: list[Ambiguity],
                     bindings: dict[int, tuple[int, ...]]) -> dict[int, list[int]]:
    """Step -> never-live values named `operation N result 0`, N = the step's source (`bindings`: the plan's
    `body_bindings`, whose body arguments are never results).

    Several in-place steps of one source cannot be told apart: each becomes an ambiguity.
    """
    by_name: dict[str, list[int]] = {}
    for value in plan.values:
        if not live.is_live(value.id) and value.id not in bindings:
            by_name.setdefault(value.name, []).append(value.id)
    in_place = {text: parse_operation(text).is_in_place for text in {step.operation for step in plan.steps}}
    steps_of_source: dict[int, list[Step]] = {}
    for step in plan.steps:
        if in_place[step.operation]:
            steps_of_source.setdefault(step.source, []).append(step)
    results: dict[int, list[int]] = {}
    for source, steps in steps_of_source.items():
        candidates = by_name.get(f"operation {source} result 0", [])
        if len(steps) > 1 and candidates:
            for step in steps:
                message = f"{len(steps)} in-place steps share source {source}"
                ambiguities.append(Ambiguity(step.index, message, tuple(step.live) + tuple(candidates)))
            continue
        results[steps[0].index] = candidates
    return results


class _Inference:
    """Working state of one inference pass; `run` returns the immutable Dataflow."""

    def __init__(self, plan: Plan, live: Liveness) -> None:
        self.plan = plan
        self.live = live
        self.bindings = body_bindings(plan)
        self.ambiguities: list[Ambiguity] = []
        self.written_at: dict[int, int] = {}
        self.in_place = in_place_results(plan, live, self.ambiguities, self.bindings)
        self.sharing_storage: dict[int, list[int]] = {}
        self.storage_group_members: dict[int, list[int]] = {}
        for value in plan.values:
            self.sharing_storage.setdefault(value.root, []).append(value.id)
            self.storage_group_members.setdefault(value.storage_group, []).append(value.id)
        # what the rules read of each value, read once from the models
        self.roots = [value.root for value in plan.values]
        self.storage_groups = [value.storage_group for value in plan.values]
        self.names = [value.name for value in plan.values]
        self.forms, self.form_of = _forms(plan.values)
        self.judged: dict[tuple, frozenset[int]] = {}
        """(rule, a form) -> the forms it pairs with that one."""
        self.formed: set[int] = set()

    def readable(self, step: Step, result: int) -> list[int]:
        """Values whose storage is live at `step` and that were written before it, except `result`.

        Every value sharing a live root is live here; an alias (an in-place version of its root)
        is readable once written, the root itself always (bound or an input).
        """
        written_at, sharing, index = self.written_at, self.sharing_storage, step.index
        return [
            v
            for root in step.live
            for v in sharing.get(root, ())
            if v != result and (v == root or written_at.get(v, -1) < index)
        ]

    def same_storage(self, step: Step, result: int) -> list[int]:
        """The values of `alike(SAME_STORAGE_GROUP, readable(step, result), result)`, each once, in its order among
        the versions of one storage (all that `preferred` and `latest_versions` read of the order): found among the
        result's storage group, a value or two, not the step's live set, some fifty (9k conversions at 50k values)."""
        members = self.storage_group_members[self.storage_groups[result]]
        if len(members) > len(step.live):
            return self.alike(SAME_STORAGE_GROUP, self.readable(step, result), result)
        live, roots, written_at, index = step.live, self.roots, self.written_at, step.index
        return [v for v in members
                if v != result and roots[v] in live and (v == roots[v] or written_at.get(v, -1) < index)]

    def alike(self, same, readable: list[int], result: int) -> list[int]:
        """The `readable` values that `same` pairs with `result`. A rule of shapes is judged once per pair of forms
        (a large plan has a few dozen); storage groups are compared value by value."""
        if same == SAME_STORAGE_GROUP:
            group, groups = self.storage_groups[result], self.storage_groups
            return [v for v in readable if groups[v] == group]
        self.formed.update(readable)
        self.formed.add(result)
        key = (same, self.form_of[result])
        pairing = self.judged.get(key)
        if pairing is None:
            made = self.forms[key[1]]
            pairing = self.judged[key] = frozenset(f for f, form in enumerate(self.forms) if same(form, made))
        form_of = self.form_of
        return [v for v in readable if form_of[v] in pairing]

    def narrow(self, candidates: list[int], *preferences) -> list[int]:
        for prefer in preferences:
            preferred = [c for c in candidates if prefer(c)]
            if preferred:
                candidates = preferred
        return candidates

    def source_of(self, step: Step, result: int, rules: tuple, label: str, could_be=None) -> int | None:
        """The one value a mover step read to make `result`, or None (and an ambiguity).

        `rules` are tried in order until one finds candidates; `could_be` says which values an
        unresolved step may have read (they stay frozen), by default any of the result's
        precision and rank.
        """
        readable: list[int] | None = None  # found for a rule of shapes or an ambiguity only
        candidates: list[int] = []
        for same in rules:
            if same == SAME_STORAGE_GROUP:
                alike = self.same_storage(step, result)
            else:
                readable = self.readable(step, result) if readable is None else readable
                alike = self.alike(same, readable, result)
            candidates = self.preferred(step, result, alike)
            if candidates:
                break
        if len(candidates) == 1:
            return candidates[0]
        readable = self.readable(step, result) if readable is None else readable
        found = ", ".join(map(str, candidates)) or "none"
        suspects = candidates or self.suspects(step, readable, result, could_be or _same_precision_and_rank)
        self.ambiguities.append(Ambiguity(step.index, f"{label} of value {result}: candidates {found}",
                                          (result, *suspects)))
        return None

    def preferred(self, step: Step, result: int, candidates: list[int]) -> list[int]:
        """Narrowed to the values dying here, then of the result's name, then inside or outside the loop, then of the
        result's storage group (a parameter's gathered copy, scope `program`, names its parameter's group)."""
        names, bindings, in_loop, groups = self.names, self.bindings, step.execution_count > 1, self.storage_groups
        candidates = self.narrow(
            candidates,
            lambda c: c in self.live.dies_at[step.index],
            lambda c: names[c] == names[result],
            lambda c: (c in bindings) == in_loop,  # the body arguments
            lambda c: groups[c] == groups[result],
        )
        return self.latest_versions(candidates)

    def suspects(self, step: Step, readable: list[int], result: int, could_be) -> list[int]:
        """The `readable` values the step could have read to make `result` (or, failing a rule, any live value)."""
        alike = self.alike(could_be, readable, result)
        return sorted(alike) if alike or could_be is not _same_precision_and_rank else list(step.live)

    def latest_versions(self, candidates: list[int]) -> list[int]:
        """In-place aliases of one storage are one tensor: keep its most recently written version."""
        latest: dict[int, int] = {}
        for candidate in candidates:
            root = self.roots[candidate]
            current = latest.get(root)
            if current is None or self.written_at.get(candidate, -1) > self.written_at.get(current, -1):
                latest[root] = candidate
        return sorted(latest.values())

    def results(self, step: Step) -> list[int]:
        """Values first live at `step` that it writes; the others are program inputs arriving there.

        A value is written by the step where it is first live when it is an intermediate
        (named `operation N result M ...`) or a conversion of a value dying at that step
        (same storage group); a named parameter first live there is a program input.
        """
        dying = set(self.live.dies_at[step.index])
        names, groups = self.names, self.storage_groups
        read_groups = {groups[d] for d in dying}
        return [
            v
            for v in self.live.born_at[step.index]
            if names[v].startswith(INTERMEDIATE_PREFIX) or (v not in dying and groups[v] in read_groups)
        ]

    def flow(self, step: Step) -> StepFlow:
        index = step.index
        kind, converts, moves = self.operation(step.operation)
        writes = self.results(step)
        dying = [v for v in self.live.dies_at[index] if v not in writes]
        in_place = self.in_place.get(index, [])
        releases = tuple(dying) if kind == "Repeat" else ()
        reads = set() if releases else set(dying)
        roots = self.roots
        if in_place:
            reads.update(roots[v] for v in in_place)
        if converts or (kind == "Copy" and not dying):
            sources = set(self.mover_sources(step, writes, *moves))
            reads = (reads | sources) - {roots[v] for v in sources if roots[v] != v}
        written = [*writes, *in_place]
        for value_id in written:
            self.written_at.setdefault(value_id, index)
        return StepFlow(index, tuple(sorted(reads)), tuple(sorted(written)), releases)

    def operation(self, text: str) -> tuple[str, bool, tuple]:
        """(kind, whether a conversion, `mover_rules`) of an operation, worked out once per distinct text (a large plan
        repeats a few dozen)."""
        kind, _, converts, moves = _operation_read(text)
        return kind, converts, moves

    def mover_sources(self, step: Step, writes: list[int], rules: tuple, label: str, could_be) -> Iterable[int]:
        for result in writes:
            found = self.source_of(step, result, rules, label, could_be)
            if found is not None:
                yield found

    def run(self) -> Dataflow:
        steps = tuple(self.flow(step) for step in self.plan.steps)
        written = {v for flow in steps for v in flow.writes}
        inputs = tuple(v for born in self.live.born_at for v in born if v not in written)
        families = gemm_families(self.plan, steps, self.ambiguities)
        return Dataflow(steps, inputs, self.bindings, tuple(self.ambiguities), families, frozenset(self.formed))


def mover_rules(operation: Operation) -> tuple[tuple, str, object]:
    """(rules, label, could_be) of `_Inference.source_of` for a mover's source."""
    if operation.conversion is not None:
        return (SAME_STORAGE_GROUP,), "source", None
    if operation.has_view:
        return (_same_elements_and_precision,), "view source", None
    if operation.copy_offsets:
        return (_slice_of,), "slice source", None
    # a whole copy; failing one of the same shape, a crop of padding along one axis
    return (_same_shape_and_precision, _cropped_on_one_axis), "copy source", _differs_on_one_axis


def rewritten_dataflow(before: Plan, flow: Dataflow, after: Plan, live: Liveness) -> Dataflow:
    """`dataflow(after, live)` of `after`, a rewrite of `before` whose dataflow is `flow`: `flow`'s steps where the
    rewrite changed nothing the rules read (names, storage, live sets, what each operation moves, the shapes a rule of
    shapes read), else inferred afresh. A rewrite changes layouts, mostly: at 50k values the inference is 0.65 s of
    the re-check. The Gemm families are found again either way, as the left operand is the one laid out for Amp (their
    ambiguities read the steps' flows only, and are `flow`'s)."""
    if not _read_alike(before, after, flow.formed):
        return dataflow(after, live)
    return replace(flow, families=_relaid_families(after, flow))


def _relaid_families(plan: Plan, flow: Dataflow) -> tuple[GemmFamily, ...]:
    """`gemm_families(plan, flow.steps, [])` where `flow` is the dataflow of a plan whose steps `plan`'s read alike,
    so of the same Gemm steps: `flow.families` with what reads a layout found again, the left operand (the one laid
    out for Amp), and so the right one and their sources, without the whole search (0.06 s at 50k values)."""
    steps = flow.steps
    if any(step.index != position for position, step in enumerate(steps)):  # a family's step is found by position
        return gemm_families(plan, steps, [])
    values, writer = plan.values, None
    relaid = []
    for family in flow.families:
        operands = steps[family.gemm_step].reads
        left = _amp_operand(values, operands)
        if left != family.left:
            writer = _writer_of(steps) if writer is None else writer
            right = next((v for v in operands if v != left), None)
            family = replace(family, left=left, right=right, left_source=_source(writer, left),
                             right_source=_source(writer, right))
        relaid.append(family)
    return tuple(relaid)


def _read_alike(before: Plan, after: Plan, formed: frozenset[int]) -> bool:
    """Whether the inference reads the same of both plans (a value or step the rewrite left alone is the very same
    object)."""
    if len(before.values) != len(after.values) or len(before.steps) != len(after.steps):
        return False
    return (all(old is new or _value_read(old, old.id in formed) == _value_read(new, old.id in formed)
                for old, new in zip(before.values, after.values))
            and all(old is new or _step_read(old) == _step_read(new) for old, new in zip(before.steps, after.steps)))


def _value_read(value: Value, formed: bool) -> tuple:
    """What the inference reads of a value: its shape only where a rule of shapes read it."""
    return (value.id, value.root, value.name, value.group, value.storage_group, value.precision,
            tuple(value.shape) if formed else None)


def _step_read(step: Step) -> tuple:
    """What the inference reads of a step: of its operation, what `_Inference.operation` and `in_place_results`
    read."""
    return (step.index, step.source, step.execution_count, tuple(step.live), *_operation_read(step.operation))


@lru_cache(maxsize=4096)
def _operation_read(text: str) -> tuple:
    """What the inference reads of an operation (kind, in place, a conversion, `mover_rules`), worked out once per
    text: a large plan repeats a few dozen texts over its steps (`_Inference.operation`, `gemm_families`,
    `_step_read`)."""
    operation = parse_operation(text)
    return operation.kind, operation.is_in_place, operation.conversion is not None, mover_rules(operation)


def gemm_families(plan: Plan, steps: tuple[StepFlow, ...], ambiguities: list[Ambiguity]) -> tuple[GemmFamily, ...]:
    """For every Gemm step: its operands, their sources, its partials and the step that reduces them."""
    writer = _writer_of(steps)
    readers: dict[int, list[StepFlow]] = {}
    for flow in steps:
        for v in flow.reads:
            readers.setdefault(v, []).append(flow)
    plan_steps = plan.steps
    gemms = (flow for flow in steps if _operation_read(plan_steps[flow.index].operation)[0] == "Gemm")
    return tuple(_family(plan, flow, writer, readers, ambiguities) for flow in gemms)


def _writer_of(steps: tuple[StepFlow, ...]) -> dict[int, StepFlow]:
    """Value -> the (last) step that writes it."""
    return {v: flow for flow in steps for v in flow.writes}


def _amp_operand(values: list[Value], operands: Iterable[int]) -> int | None:
    """The first of a Gemm's operands laid out for Amp: its left one."""
    return next((v for v in operands if values[v].parsed_layout.order_kind.startswith("Amp")), None)


def _source(writer: dict[int, StepFlow], value_id: int | None) -> int | None:
    """What the step writing `value_id` reads, where it reads one value only."""
    flow = writer.get(value_id)
    return flow.reads[0] if flow is not None and len(flow.reads) == 1 else None


def _family(plan: Plan, gemm: StepFlow, writer: dict[int, StepFlow], readers: dict[int, list[StepFlow]],
            ambiguities: list[Ambiguity]) -> GemmFamily:
    values = plan.values
    operands = list(gemm.reads)
    if len(operands) != 2 or len(gemm.writes) != 1:
        message = f"Gemm reads {len(operands)} and writes {len(gemm.writes)}"
        ambiguities.append(Ambiguity(gemm.index, message, tuple(plan.steps[gemm.index].live)))
    left = _amp_operand(values, operands)
    right = next((v for v in operands if v != left), None)
    partials = gemm.writes[0] if gemm.writes else None
    sum_flow = next((f for f in readers.get(partials, ()) if f.index > gemm.index), None)
    return GemmFamily(
        gemm_step=gemm.index,
        left=left,
        right=right,
        left_source=_source(writer, left),
        right_source=_source(writer, right),
        partials=partials,
        sum_step=sum_flow.index if sum_flow else None,
        sum_result=sum_flow.writes[0] if sum_flow and len(sum_flow.writes) == 1 else None,
    )


@dataclass(frozen=True)
class Form:
    """What the rules of shapes read of a value."""

    precision: str
    shape: tuple[int, ...]


def _forms(values: list[Value]) -> tuple[list[Form], list[int]]:
    """The distinct forms of `values` (a large plan has a few dozen), and each value's index among them."""
    index: dict[tuple, int] = {}
    form_of = [index.setdefault((v.precision, tuple(v.shape)), len(index)) for v in values]
    return [Form(*key) for key in index], form_of


def _same_precision_and_rank(a: Form, b: Form) -> bool:
    return a.precision == b.precision and len(a.shape) == len(b.shape)


def _same_shape_and_precision(a: Form, b: Form) -> bool:
    return a.precision == b.precision and a.shape == b.shape


def _differs_on_one_axis(a: Form, b: Form) -> bool:
    """Same precision and rank, the same size on every axis but one."""
    return _same_precision_and_rank(a, b) and sum(x != y for x, y in zip(a.shape, b.shape)) == 1


def _cropped_on_one_axis(a: Form, b: Form) -> bool:
    """`b` could be `a` without its padding along one axis (e.g. `[16,729,784]` -> `[16,729,768]`)."""
    return _differs_on_one_axis(a, b) and all(x >= y for x, y in zip(a.shape, b.shape))


def _same_elements_and_precision(a: Form, b: Form) -> bool:
    return a.precision == b.precision and prod(a.shape) == prod(b.shape)


def _slice_of(a: Form, b: Form) -> bool:
    """`b` could be a slice of `a`: same precision and rank, `a` larger along some dimension."""
    return (
        a.precision == b.precision
        and len(a.shape) == len(b.shape)
        and a.shape != b.shape
        and all(x >= y for x, y in zip(a.shape, b.shape))
    )


def dataflow(plan: Plan, live: Liveness | None = None) -> Dataflow:
    """Infer reads, writes, releases, bindings and Gemm families of every step.

    `live` is the plan's liveness, when the caller has it already.
    """
    return _Inference(plan, live or liveness(plan)).run()
