"""The per-tile budgets and the one rule every part of ipuplan measures them with.

REPLAN.md, "Budgets": at every step `std <= budget - interleaved_budget` (no standard
overflow), `il <= interleaved_budget`, and `std + il + support_reserve <= budget`. Each of the
three is a `Limit`: a weighted sum of a step's standard and interleaved bytes and the bytes it
may reach. The estimate (fits_budget, overflow), the solvers (their constraints), the greedy
baseline (its excess) and the report (its budget lines) all read these three `Limit`s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from ipuplan.errors import BudgetError

Bytes = TypeVar("Bytes")
"""An int, a numpy array of ints (one per step) or a solver's linear expression."""


@dataclass(frozen=True)
class Limit:
    """`standard * std + interleaved * il <= bytes` at every step."""

    name: str
    standard: int
    interleaved: int
    bytes: int

    def usage(self, standard: Bytes, interleaved: Bytes) -> Bytes:
        """The left-hand side; zero weights are left out and unit weights not multiplied, so solver
        expressions stay as small as the rule."""
        terms = [part if weight == 1 else part * weight
                 for part, weight in ((standard, self.standard), (interleaved, self.interleaved)) if weight]
        return sum(terms[1:], terms[0]) if terms else 0 * standard


@dataclass(frozen=True)
class Budgets:
    """Per-tile limits. The standard region is what the interleaved region leaves
    (`standard_limit`): an assumption consistent with the reference plan, kept in one place."""

    budget_bytes: int
    interleaved_budget_bytes: int
    support_reserve_bytes: int

    @property
    def standard_limit(self) -> int:
        return self.budget_bytes - self.interleaved_budget_bytes

    @property
    def total_limit(self) -> int:
        """Bound on `std_s + il_s` (the raw usage), support reserve taken off."""
        return self.budget_bytes - self.support_reserve_bytes

    @property
    def limits(self) -> tuple[Limit, Limit, Limit]:
        return (
            Limit("standard budget", 1, 0, self.standard_limit),
            Limit("interleaved budget", 0, 1, self.interleaved_budget_bytes),
            Limit("total budget less support reserve", 1, 1, self.total_limit),
        )

    @classmethod
    def of(cls, plan) -> Budgets:
        return cls(plan.budget_bytes, plan.interleaved_budget_bytes, plan.support_reserve_bytes)

    def overridden(self, budget: int | None, interleaved_budget: int | None, support_reserve: int | None) -> Budgets:
        """These budgets with the given fields replaced; refuses budgets that contradict each other, naming each
        figure by where it came from: the plan's field, or the option that overrode it."""
        chosen = Budgets(
            self.budget_bytes if budget is None else budget,
            self.interleaved_budget_bytes if interleaved_budget is None else interleaved_budget,
            self.support_reserve_bytes if support_reserve is None else support_reserve,
        )
        contradiction = chosen.contradiction()
        if contradiction is None:
            return chosen
        message, fields = contradiction
        given = dict(zip(FIELDS, (budget, interleaved_budget, support_reserve)))
        options = [OPTIONS[field] for field in fields if given[field] is not None]
        names = {field: OPTIONS[field] if given[field] is not None else field for field in FIELDS}
        text = message.format(**names)
        raise BudgetError(text, source=", ".join(options)) if options else BudgetError(text, location=fields[0])

    def contradiction(self) -> tuple[str, tuple[str, ...]] | None:
        """(message with a `{field}` slot for each figure's name, the fields involved), or None."""
        figures = dict(zip(FIELDS, (self.budget_bytes, self.interleaved_budget_bytes, self.support_reserve_bytes)))
        negative = [field for field, number in figures.items() if number < 0]
        if negative:
            return f"{{{negative[0]}}} {figures[negative[0]]:,} is negative", (negative[0],)
        budget = f"the budget {self.budget_bytes:,} ({{budget_bytes}}): no room would be left for"
        if self.support_reserve_bytes > self.budget_bytes:
            reserve = f"the support reserve {self.support_reserve_bytes:,} ({{support_reserve_bytes}})"
            return f"{reserve} exceeds {budget} any allocation", ("budget_bytes", "support_reserve_bytes")
        if self.standard_limit < 0:
            interleaved = f"the interleaved budget {self.interleaved_budget_bytes:,} ({{interleaved_budget_bytes}})"
            return f"{interleaved} exceeds {budget} standard memory", ("budget_bytes", "interleaved_budget_bytes")
        return None


FIELDS = ("budget_bytes", "interleaved_budget_bytes", "support_reserve_bytes")
"""The plan's budget fields, in the order of `Budgets`."""
OPTIONS = {"budget_bytes": "--budget", "interleaved_budget_bytes": "--interleaved-budget",
           "support_reserve_bytes": "--support-reserve"}
"""The option that overrides each field."""


def excess(limit: Limit, standard, interleaved):
    """Bytes over `limit` (0 where it is met); ints or numpy arrays."""
    over = limit.usage(standard, interleaved) - limit.bytes
    if isinstance(over, np.ndarray):  # one pass over a fresh array: the solvers ask this of every row set they try
        return np.maximum(over, 0, out=over)
    return over * (over > 0)
