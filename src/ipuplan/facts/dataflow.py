"""Dataflow inference: which step reads, writes and releases which value.

Plans store only live sets; the rules of PLAN_FORMAT.md ("Dataflow") recover the rest.
Where a rule leaves more than one candidate, the step gets an `Ambiguity` instead of a
guess, and whatever it touches stays frozen in the optimiser.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from math import prod

from ipuplan.facts.liveness import Liveness, liveness
from ipuplan.plan.format import Plan, Step, Value

BODY_ARGUMENT = " (body argument)"
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
    for value in plan.values:
        if not value.name.endswith(BODY_ARGUMENT):
            by_group.setdefault(value.group, []).append(value.id)
    return {v.id: tuple(by_group.get(v.group, ())) for v in plan.values if is_body_argument(v)}


def in_place_results(plan: Plan, live: Liveness, ambiguities: list[Ambiguity]) -> dict[int, list[int]]:
    """Step -> never-live values named `operation N result 0`, N = the step's source.

    Several in-place steps of one source cannot be told apart: each becomes an ambiguity.
    """
    by_name: dict[str, list[int]] = {}
    for value in plan.values:
        if not live.is_live(value.id) and not is_body_argument(value):
            by_name.setdefault(value.name, []).append(value.id)
    steps_of_source: dict[int, list[Step]] = {}
    for step in plan.steps:
        if step.parsed_operation.is_in_place:
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
        self.in_place = in_place_results(plan, live, self.ambiguities)
        self.sharing_storage: dict[int, list[int]] = {}
        for value in plan.values:
            self.sharing_storage.setdefault(value.root, []).append(value.id)

    def readable(self, step: Step, result: int) -> list[int]:
        """Values whose storage is live at `step` and that were written before it, except `result`.

        Every value sharing a live root is live here; an alias (an in-place version of its root)
        is readable once written, the root itself always (bound or an input).
        """
        written_at = self.written_at
        return [
            v
            for root in step.live
            for v in self.sharing_storage.get(root, ())
            if v != result and (v == root or written_at.get(v, -1) < step.index)
        ]

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
        values = self.plan.values
        readable, made = self.readable(step, result), values[result]
        candidates: list[int] = []
        for same in rules:
            candidates = self.preferred(step, result, [v for v in readable if same(values[v], made)])
            if candidates:
                break
        if len(candidates) == 1:
            return candidates[0]
        found = ", ".join(map(str, candidates)) or "none"
        suspects = candidates or self.suspects(step, readable, made, could_be or _same_precision_and_rank)
        self.ambiguities.append(Ambiguity(step.index, f"{label} of value {result}: candidates {found}", (result, *suspects)))
        return None

    def preferred(self, step: Step, result: int, candidates: list[int]) -> list[int]:
        """Narrowed to the values dying here, then of the result's name, then inside or outside the loop."""
        values = self.plan.values
        in_loop = step.execution_count > 1
        candidates = self.narrow(
            candidates,
            lambda c: c in self.live.dies_at[step.index],
            lambda c: values[c].name == values[result].name,
            lambda c: is_body_argument(values[c]) == in_loop,
        )
        return self.latest_versions(candidates)

    def suspects(self, step: Step, readable: list[int], made: Value, could_be) -> list[int]:
        """The `readable` values the step could have read to make `made` (or, failing a rule, any live value)."""
        values = self.plan.values
        alike = [v for v in readable if could_be(values[v], made)]
        return sorted(alike) if alike or could_be is not _same_precision_and_rank else list(step.live)

    def latest_versions(self, candidates: list[int]) -> list[int]:
        """In-place aliases of one storage are one tensor: keep its most recently written version."""
        latest: dict[int, int] = {}
        for candidate in candidates:
            root = self.plan.values[candidate].root
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
        values = self.plan.values
        read_groups = {values[d].storage_group for d in dying}
        return [
            v
            for v in self.live.born_at[step.index]
            if values[v].name.startswith(INTERMEDIATE_PREFIX)
            or (v not in dying and values[v].storage_group in read_groups)
        ]

    def flow(self, step: Step) -> StepFlow:
        operation = step.parsed_operation
        writes = self.results(step)
        dying = [v for v in self.live.dies_at[step.index] if v not in writes]
        in_place = self.in_place.get(step.index, [])
        releases = tuple(dying) if operation.kind == "Repeat" else ()
        reads = set() if releases else set(dying)
        reads.update(self.plan.values[v].root for v in in_place)
        if operation.conversion is not None or (operation.kind == "Copy" and not dying):
            sources = set(self.mover_sources(step, writes))
            reads = (reads | sources) - {self.plan.values[v].root for v in sources if self.plan.values[v].is_alias}
        for value_id in [*writes, *in_place]:
            self.written_at.setdefault(value_id, step.index)
        return StepFlow(step.index, tuple(sorted(reads)), tuple(sorted([*writes, *in_place])), releases)

    def mover_sources(self, step: Step, writes: list[int]) -> Iterable[int]:
        operation = step.parsed_operation
        could_be = None
        if operation.conversion is not None:
            rules, label = ((lambda a, b: a.storage_group == b.storage_group),), "source"
        elif operation.has_view:
            rules, label = (_same_elements_and_precision,), "view source"
        elif operation.copy_offsets:
            rules, label = (_slice_of,), "slice source"
        else:  # a whole copy; failing one of the same shape, a crop of padding along one axis
            rules, label, could_be = (_same_shape_and_precision, _cropped_on_one_axis), "copy source", _differs_on_one_axis
        for result in writes:
            found = self.source_of(step, result, rules, label, could_be)
            if found is not None:
                yield found

    def run(self) -> Dataflow:
        steps = tuple(self.flow(step) for step in self.plan.steps)
        written = {v for flow in steps for v in flow.writes}
        inputs = tuple(v for born in self.live.born_at for v in born if v not in written)
        families = gemm_families(self.plan, steps, self.ambiguities)
        return Dataflow(steps, inputs, self.bindings, tuple(self.ambiguities), families)


def gemm_families(plan: Plan, steps: tuple[StepFlow, ...], ambiguities: list[Ambiguity]) -> tuple[GemmFamily, ...]:
    """For every Gemm step: its operands, their sources, its partials and the step that reduces them."""
    writer = {v: flow for flow in steps for v in flow.writes}
    readers: dict[int, list[StepFlow]] = {}
    for flow in steps:
        for v in flow.reads:
            readers.setdefault(v, []).append(flow)
    gemms = (flow for flow in steps if plan.steps[flow.index].parsed_operation.kind == "Gemm")
    return tuple(_family(plan, flow, writer, readers, ambiguities) for flow in gemms)


def _family(plan: Plan, gemm: StepFlow, writer: dict[int, StepFlow], readers: dict[int, list[StepFlow]],
            ambiguities: list[Ambiguity]) -> GemmFamily:
    values = plan.values
    operands = list(gemm.reads)
    if len(operands) != 2 or len(gemm.writes) != 1:
        message = f"Gemm reads {len(operands)} and writes {len(gemm.writes)}"
        ambiguities.append(Ambiguity(gemm.index, message, tuple(plan.steps[gemm.index].live)))
    left = next((v for v in operands if values[v].parsed_layout.order_kind.startswith("Amp")), None)
    right = next((v for v in operands if v != left), None)
    partials = gemm.writes[0] if gemm.writes else None
    sum_flow = next((f for f in readers.get(partials, ()) if f.index > gemm.index), None)

    def source(value_id: int | None) -> int | None:
        flow = writer.get(value_id)
        return flow.reads[0] if flow is not None and len(flow.reads) == 1 else None

    return GemmFamily(
        gemm_step=gemm.index,
        left=left,
        right=right,
        left_source=source(left),
        right_source=source(right),
        partials=partials,
        sum_step=sum_flow.index if sum_flow else None,
        sum_result=sum_flow.writes[0] if sum_flow and len(sum_flow.writes) == 1 else None,
    )


def _same_precision_and_rank(a: Value, b: Value) -> bool:
    return a.precision == b.precision and len(a.shape) == len(b.shape)


def _same_shape_and_precision(a: Value, b: Value) -> bool:
    return a.precision == b.precision and a.shape == b.shape


def _differs_on_one_axis(a: Value, b: Value) -> bool:
    """Same precision and rank, the same size on every axis but one."""
    return _same_precision_and_rank(a, b) and sum(x != y for x, y in zip(a.shape, b.shape)) == 1


def _cropped_on_one_axis(a: Value, b: Value) -> bool:
    """`b` could be `a` without its padding along one axis (e.g. `[16,729,784]` -> `[16,729,768]`)."""
    return _differs_on_one_axis(a, b) and all(x >= y for x, y in zip(a.shape, b.shape))


def _same_elements_and_precision(a: Value, b: Value) -> bool:
    return a.precision == b.precision and prod(a.shape) == prod(b.shape)


def _slice_of(a: Value, b: Value) -> bool:
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
