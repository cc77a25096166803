"""The facts of one plan, computed once and passed down: liveness, dataflow, estimate, Gemm, attention and
element-wise families.

Everything after this point in the pipeline (check, candidates, costs, rewrite, report) reads
a `PlanFacts` instead of recomputing: one `optimize` call infers each fact once per plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property

from ipuplan.facts.attention_families import AttentionFamily, recognise_attention
from ipuplan.facts.dataflow import Dataflow, dataflow, rewritten_dataflow
from ipuplan.facts.elementwise_families import ElementwiseFamily, recognise_elementwise, relaid_elementwise
from ipuplan.facts.estimate import Estimate, estimate
from ipuplan.facts.gemm_families import KernelFamily, recognise_families
from ipuplan.facts.liveness import Liveness, liveness, same_live_sets
from ipuplan.plan.budgets import Budgets
from ipuplan.plan.collector import gc_paused
from ipuplan.plan.format import Plan


@dataclass(frozen=True)
class PlanFacts:
    plan: Plan
    budgets: Budgets
    live: Liveness
    flow: Dataflow
    estimate: Estimate
    """Under `budgets` (the plan's own unless overridden)."""
    families: tuple[KernelFamily, ...]
    rejected_families: tuple[tuple[int, str], ...]
    """(Gemm step, reason) for every Gemm that is not a family."""
    attention: tuple[AttentionFamily, ...]
    """The attention products among the Gemms that are not families."""
    rewritten_from: tuple[Plan, Dataflow, tuple[ElementwiseFamily, ...]] | None = field(default=None, compare=False,
                                                                                        repr=False)
    """The plan this one rewrites (`rewritten_facts`), its dataflow and element-wise families, where these were found
    by then: the families this one may reuse (its plan, not its facts, kept: no chain of rewrites stays alive)."""

    @cached_property
    def elementwise(self) -> tuple[ElementwiseFamily, ...]:
        """Every family of element-wise and row-reducing kernels, held or not. Inferred on first use, once: the
        candidate space and `check`'s element-wise rule read it (a fifth of a rewritten plan's re-check at 50k
        values). A rewrite's are its input's where its layouts leave them so (`relaid_elementwise`), when its
        dataflow is the input's very own."""
        with gc_paused():
            if self.rewritten_from is not None:
                before, flow, families = self.rewritten_from
                if self.flow.steps is flow.steps and self.flow.bindings is flow.bindings:  # equal, its readers found
                    return relaid_elementwise(before, families, self.plan, flow)
            return recognise_elementwise(self.plan, self.flow)

    @property
    def amp_aligned(self) -> frozenset[int]:
        return self.estimate.amp_aligned


def plan_facts(plan: Plan, budgets: Budgets | None = None) -> PlanFacts:
    """Infer every fact of `plan` once."""
    with gc_paused():
        return _facts(plan, budgets or Budgets.of(plan))


def rewritten_facts(before: PlanFacts, after: Plan) -> PlanFacts:
    """`plan_facts(after)` of `after`, a rewrite of `before.plan`: the liveness and the steps' dataflow are `before`'s
    where the rewrite left what they read alone (`rewritten_dataflow`); what reads layouts (the estimate, the
    families) is inferred afresh, but the element-wise families the rewrite left alone (`PlanFacts.elementwise`)."""
    with gc_paused():
        live = before.live if same_live_sets(before.plan, after) else liveness(after)
        facts = _facts(after, Budgets.of(after), live, rewritten_dataflow(before.plan, before.flow, after, live))
        families = vars(before).get("elementwise")  # found once the input's space or check asked for them
        return facts if families is None else replace(facts, rewritten_from=(before.plan, before.flow, families))


def _facts(plan: Plan, budgets: Budgets, live: Liveness | None = None, flow: Dataflow | None = None) -> PlanFacts:
    live = live or liveness(plan)
    flow = flow or dataflow(plan, live)
    families, rejected = recognise_families(plan, flow)
    return PlanFacts(
        plan=plan,
        budgets=budgets,
        live=live,
        flow=flow,
        estimate=estimate(plan, budgets, live),
        families=tuple(families),
        rejected_families=tuple(rejected),
        attention=tuple(recognise_attention(plan, flow, tuple(rejected))),
    )
