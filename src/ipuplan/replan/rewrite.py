"""Rewrite: apply chosen layouts, recompute every derived field, and prove the result legal.

A plan is only returned from here after `check` finds nothing and the contract of
REPLAN.md ("What the output must satisfy") holds against the input.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial
from typing import Self, TypeVar

from ipuplan.errors import IpuplanError
from ipuplan.facts.estimate import Estimate, ValueBytes, estimate
from ipuplan.facts.plan_facts import PlanFacts, rewritten_facts
from ipuplan.plan.budgets import Budgets
from ipuplan.plan.collector import gc_paused
from ipuplan.plan.forked import Forked
from ipuplan.plan.format import Plan, Step, Value
from ipuplan.plan.layout import format_layout
from ipuplan.replan.against import check_violations, rewrite_violations
from ipuplan.replan.gathers import with_gathers
from ipuplan.space.types import CandidateSpace

Model = TypeVar("Model", Value, Step)


class IllegalRewrite(IpuplanError):
    """The optimiser produced a plan that fails its own checks: a bug, never written out."""

    exit_code = 70


def with_budgets(plan: Plan, budgets: Budgets) -> Plan:
    return plan.model_copy(
        update={
            "budget_bytes": budgets.budget_bytes,
            "interleaved_budget_bytes": budgets.interleaved_budget_bytes,
            "support_reserve_bytes": budgets.support_reserve_bytes,
        }
    )


def with_derived_fields(plan: Plan, result: Estimate | None = None) -> Plan:
    """The plan with every number the estimate defines recomputed (`result`: its estimate, if known)."""
    result = result or estimate(plan)
    values = [_with_bytes(value, b) for value, b in zip(plan.values, result.values)]
    steps = [_with_class_bytes(step, "usage", std, il)
             for step, std, il in zip(plan.steps, result.standard, result.interleaved)]
    return plan.model_copy(
        update={
            "timeline": plan.timeline.model_copy(update={"values": values, "steps": steps}),
            "peak": plan.peak.model_copy(update=dict(result.peak)),  # unknown keys kept
            "total_peak_step": result.total_peak_step,
            "standard_peak_step": result.standard_peak_step,
            "interleaved_peak_step": result.interleaved_peak_step,
            "effective_peak_bytes": result.effective_peak_bytes,
            "standard_contiguous_overflow_bytes": result.standard_contiguous_overflow_bytes,
            "fits_budget": result.fits_budget,
        }
    )


def _with_bytes(value: Value, sizes: ValueBytes) -> Value:
    if (value.shard_bytes, value.aligned_bytes, value.bytes) == (sizes.shard_bytes, sizes.aligned_bytes, sizes.bytes):
        return value
    return value.model_copy(update={"shard_bytes": sizes.shard_bytes, "aligned_bytes": sizes.aligned_bytes,
                                    "bytes": sizes.bytes})


def _with_class_bytes(step: Step, field: str, standard: int, interleaved: int) -> Step:
    """`step` with its `usage` or `scratch` bytes (the field's unknown keys kept); `step` itself when they are
    already those. The numbers are compared, not the models: comparing two pydantic models costs more than copying
    one."""
    given = getattr(step, field)
    if given.standard == standard and given.interleaved == interleaved:
        return step
    return step.model_copy(update={field: given.model_copy(update={"standard": standard, "interleaved": interleaved})})


def _updated(model: Model, update: dict[str, object]) -> Model:
    """`model` with `update` applied; `model` itself when that changes nothing.

    Most values and steps of a large plan keep their numbers and layouts: sharing them
    spares a copy of each (the dumped plan is the same either way).
    """
    if all(getattr(model, key) == new for key, new in update.items()):
        return model
    return model.model_copy(update=update)


def apply_choice(plan: Plan, space: CandidateSpace, choice: tuple[int, ...]) -> Plan:
    """New layouts, classes, shapes, operation strings and scratch for the chosen candidates."""
    values = list(plan.values)
    steps = list(plan.steps)
    texts: dict[int, str] = {}  # by identity: the space shares its layouts, and hashing one walks its whole tree
    for group, chosen in zip(space.free, choice):
        candidate = group.candidates[chosen]
        for position, member in enumerate(group.members):
            layout = candidate.layouts[position]
            text = texts.get(id(layout))
            if text is None:
                text = texts[id(layout)] = format_layout(layout)
            update = {"layout": text, "memory_class": layout.memory_class}
            if candidate.shapes:
                update["shape"] = list(candidate.shapes[position])
            values[member] = _updated(values[member], update)
        for step, standard, interleaved in candidate.scratch:
            steps[step] = _with_class_bytes(steps[step], "scratch", standard, interleaved)
        for step, text in candidate.operations:
            steps[step] = _updated(steps[step], {"operation": text})
    return plan.model_copy(update={"timeline": plan.timeline.model_copy(update={"values": values, "steps": steps})})


def rewrite(facts: PlanFacts, space: CandidateSpace, choice: tuple[int, ...], budgets: Budgets) -> PlanFacts:
    """The rewritten plan's facts, the plan re-checked by its own estimate; raises IllegalRewrite
    rather than return a plan that fails (`rewrite_checking`, checked here)."""
    with rewrite_checking(facts, space, choice, budgets, fork=False) as checking:
        return checking.checked()


@dataclass(frozen=True)
class Checking:
    """A rewritten plan's facts while its output contract is checked (`against`): the plan alone (`check`) maybe in
    a forked copy of the process (`plan.forked`), what the run reports of the plan worked out meanwhile, then the
    rules that compare it with the input; the plan is returned only once `checked`. A context manager: left before
    `checked`, the check is ended."""

    facts: PlanFacts
    alone: Forked[list[str]]
    """`check_violations` of the plan, being found."""
    compared: Forked[list[str]]
    """`rewrite_violations` against the input, found here when `checked` is asked."""

    def checked(self) -> PlanFacts:
        """The facts, once the check found nothing; IllegalRewrite otherwise."""
        problems = [*self.compared.result(), *self.alone.result()]
        if problems:
            shown = "; ".join(problems[:3]) + (f"; ... ({len(problems) - 3} more)" if len(problems) > 3 else "")
            raise IllegalRewrite(f"rewritten plan fails its checks ({len(problems)}): {shown}")
        return self.facts

    @classmethod
    def already(cls, facts: PlanFacts) -> Checking:
        """Facts checked before (the input returned unchanged, checked when the run was prepared)."""
        return cls(facts, Forked(list, fork=False), Forked(list, fork=False))

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info) -> None:
        self.alone.cancel()


def rewrite_checking(facts: PlanFacts, space: CandidateSpace, choice: tuple[int, ...], budgets: Budgets,
                     fork: bool) -> Checking:
    """The rewritten plan's facts, its check begun (`check` in a forked copy when `fork`).

    The facts are inferred once, from the plan before its derived fields are written: the
    estimate, liveness and dataflow read layouts, shapes and live sets, never derived numbers. What of them reads
    only what the rewrite left alone is the input's (`rewritten_facts`).
    """
    with gc_paused():
        applied = with_gathers(apply_choice(with_budgets(facts.plan, budgets), space, choice), space, choice,
                               facts.live.born_at)
        inferred = rewritten_facts(facts, applied)
        rewritten = replace(inferred, plan=with_derived_fields(applied, inferred.estimate))
    # the whole output contract of the run's scope, from outside the optimiser (`against`'s two parts), against
    # the run's own facts and space: a choice the space did not offer is refused here, not written
    return Checking(rewritten, Forked(check_violations, rewritten.plan, rewritten, fork=fork),
                    Forked(partial(rewrite_violations, before_facts=facts, space=space), facts.plan, rewritten.plan,
                           space.scope, fork=False))
