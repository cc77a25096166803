"""A cost term: what one kind of cost adds to the objective's exchange level, priced over a space's candidates two
ways. `proxy`: per candidate, what the peak phase breaks its ties by (cheap, no pairs). `exact`: into a `Pricing`,
per candidate, per pair of two groups' candidates and as a constant, what the exchange phase minimises and the run
reports. A term knows facts and a space; the `Problem` a backend reads holds only the sum (`Problem.exchange`,
`Problem.edges`), so no backend knows any term. The terms a run sums are `model.cost_terms.COST_TERMS`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ipuplan.model.problem import FORBIDDEN, Edge, Problem
from ipuplan.space.types import CandidateSpace


@dataclass(frozen=True)
class Ledger:
    """Costs being summed: per group a cost per candidate, per pair of groups (lower index first) a cost per pair."""

    unary: list[np.ndarray]
    edges: dict[tuple[int, int], np.ndarray] = field(default_factory=dict)

    def add(self, a: int | None, b: int | None, cost: np.ndarray) -> None:
        """The cost of a choice of group `a` and of group `b` (None: a frozen side): a vector where one group is
        free or both are one group, else a matrix (`a`'s candidates as rows)."""
        if a == b or a is None or b is None:
            self.unary[b if a is None else a] += np.ravel(cost)
        else:
            key, oriented = ((a, b), cost) if a < b else ((b, a), cost.T)
            self.edges[key] = self.edges[key] + oriented if key in self.edges else oriented

    def problem(self, problem: Problem, alive: list[np.ndarray]) -> Problem:
        """`problem` with these costs, the candidates not `alive` forbidden."""
        unary = [u.copy() for u in self.unary]
        for g, mask in enumerate(alive):
            unary[g][~mask] = FORBIDDEN
        return problem.with_table(problem.table, exchange=tuple(tuple(u.tolist()) for u in unary),
                                  edges=tuple(Edge(a, b, matrix) for (a, b), matrix in sorted(self.edges.items())))


@dataclass
class Pricing:
    """The exact costs of every term, summed twice: `priced`, the figure of any choice; `strict`, the same with what a
    term forbids at `FORBIDDEN` (a choice no solver may make, whose figure `priced` still gives); and `constant`, what
    no choice changes."""

    priced: Ledger
    strict: Ledger
    constant: int = 0

    @classmethod
    def zero(cls, counts: tuple[int, ...]) -> Pricing:
        return cls(*(Ledger([np.zeros(n, dtype=np.int64) for n in counts]) for _ in range(2)))

    def add(self, a: int | None, b: int | None, cost: np.ndarray, forbidden: np.ndarray | None = None) -> None:
        """A cost (`Ledger.add`); where `forbidden` (shaped as `cost`), `strict` takes `FORBIDDEN` instead. Both sides
        frozen: a constant."""
        if a is None and b is None:
            self.constant += int(np.sum(cost))
            return
        self.priced.add(a, b, cost)
        self.strict.add(a, b, cost if forbidden is None else np.where(forbidden, FORBIDDEN, cost))


ProxyPrice = Callable[[CandidateSpace], list[np.ndarray]]
"""Per free group of the space, a cost per candidate."""

ExactPrice = Callable[..., None]
"""`(facts, space, alive, pricing)`: adds the term's costs to the pricing; only the `alive` candidates (per group, a
mask) need a right price, the others are forbidden whatever they cost. A `CostTerm.parallel` term's also takes
`processes=`, how many it may price in."""


@dataclass(frozen=True)
class CostTerm:
    """One kind of cost the exchange level sums (`model.cost_terms.COST_TERMS`)."""

    name: str
    proxy: ProxyPrice
    exact: ExactPrice
    parallel: bool = False
    """Whether `exact` takes `processes`: how many it may price in (`model.exchange_cost.step_prices`)."""
