"""Paths of the committed plans, and immutable one-field mutations of a plan."""

from __future__ import annotations

from pathlib import Path

from ipuplan import Plan

MODELS = Path(__file__).resolve().parent.parent / "models"
REFERENCE = MODELS / "vit-so400m-finalist-5.json"
ALL_PLANS = sorted(MODELS.glob("*.json"))


def with_value(plan: Plan, value_id: int, **changes) -> Plan:
    values = list(plan.values)
    values[value_id] = values[value_id].model_copy(update=changes)
    return plan.model_copy(update={"timeline": plan.timeline.model_copy(update={"values": values})})


def with_step(plan: Plan, index: int, **changes) -> Plan:
    steps = list(plan.steps)
    steps[index] = steps[index].model_copy(update=changes)
    return plan.model_copy(update={"timeline": plan.timeline.model_copy(update={"steps": steps})})
