"""The objectives: each lexicographic over its `Term`s (`OBJECTIVES`). `peak` minimises the raw peak, then
exchange bytes, then changed values; `fit` only meets the budgets, with the least exchange bytes, then the
fewest changed values."""

from __future__ import annotations

from enum import Enum


class Term(str, Enum):
    PEAK = "peak"
    """max over steps of standard + interleaved bytes per tile."""
    EXCHANGE = "exchange"
    """bytes the mover steps send between tiles."""
    CHANGED = "changed"
    """values whose layout differs from the input."""


class Objective(str, Enum):
    PEAK = "peak"
    """The smallest raw peak, then the least exchange and the fewest changes at that peak."""
    FIT = "fit"
    """Meet the budgets with the least exchange, then the fewest changes; the peak lands where it lands."""


OBJECTIVES = {
    Objective.PEAK: (Term.PEAK, Term.EXCHANGE, Term.CHANGED),
    Objective.FIT: (Term.EXCHANGE, Term.CHANGED),
}
