"""`OptimizeOptions`: the one list of settings shared by `optimize`, `explore`, both CLI commands
and the exploration fingerprint. The CLI builds its options from these fields (name, type,
bounds, help), so an option is spelled once, here.
"""

from __future__ import annotations

import hashlib
import os
from enum import Enum
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator

from ipuplan.errors import IpuplanError, PlanError
from ipuplan.model.objective import Objective
from ipuplan.plan.budgets import Budgets
from ipuplan.plan.format import MAX_BYTES, Plan, parse_byte_size, read_input
from ipuplan.solvers import Backend, SolverSettings
from ipuplan.space.scopes import Scope, scopes_in_words


class BadOption(IpuplanError, ValueError):
    """An option value outside what ipuplan accepts (exit 2)."""


def default_workers() -> int:
    return max(1, min(8, os.cpu_count() or 1))


class ExactExchange(str, Enum):
    """Whether `optimize` prices the exact exchange after the peak (`pipeline.exchange_phase`)."""

    AUTO = "auto"
    ALWAYS = "always"
    NEVER = "never"


EXACT_AUTO_CANDIDATES = 20_000
"""The most candidates (that can meet the peak) `auto` prices pairwise: the reference plan has 827, a 10,032-value
plan 51,585, whose pricing and solve took 12 s of a 36 s run (issue 20's targets)."""


def byte_size(value: object) -> object:
    """A size given as text (`8G`, `512M`, `1000`) in bytes, at least 1; numbers pass to the field's own checks."""
    if not isinstance(value, str):
        return value
    size = parse_byte_size(value)
    if size < 1:
        raise ValueError(f"{value!r} is no size to run in (at least 1 byte)")
    return size


class OptimizeOptions(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_enum_values=False)

    scope: Annotated[Scope, Field(
        description=f"Freedom level: {scopes_in_words()}.")] = (
        Scope.FULL
    )
    solver: Annotated[Backend, Field(description="Solver backend (highs needs ipuplan[highs]).")] = Backend.CPSAT
    time_limit: Annotated[
        float, Field(ge=0.1, le=86400.0, description=(
            "Seconds for the whole run, one deadline: its preparation, the peak, the exact exchange and, "
            "when the budgets cannot be met, the explanation and best effort share it. With --workers 1 "
            "each phase's share is in CP-SAT's deterministic units: the same bytes on every machine, "
            "and a slow or busy one takes longer."))
    ] = 10.0
    workers: Annotated[
        int | None, Field(ge=1, le=256, description="Solver workers; 1 = deterministic, same bytes every run.")
    ] = None
    seed: Annotated[int, Field(ge=0, le=2**31 - 1, description="Solver random seed.")] = 0
    budget: Annotated[int | None, Field(ge=0, le=MAX_BYTES, description="Override budget_bytes (per tile).")] = None
    interleaved_budget: Annotated[
        int | None, Field(ge=0, le=MAX_BYTES, description="Override interleaved_budget_bytes.")
    ] = None
    support_reserve: Annotated[
        int | None, Field(ge=0, le=MAX_BYTES, description="Override support_reserve_bytes.")
    ] = None
    objective: Annotated[Objective, Field(
        description="peak: the smallest peak; fit: meet the budgets with the least exchange "
                    "(docs/EXCHANGE.md).")] = Objective.PEAK
    exact_exchange: Annotated[ExactExchange, Field(
        description="After the peak, minimise the plan's exact exchange, every pair of candidates priced: auto (when "
                    f"at most {EXACT_AUTO_CANDIDATES:,} candidates can meet the peak), always, or never (the "
                    "optimiser's proxy only).")] = ExactExchange.AUTO
    best_effort: Annotated[bool, Field(
        description="When the budgets cannot be met, still write the plan with the least excess (exit 3).")] = False
    keep_classes: Annotated[bool, Field(
        description="Keep every value's memory class (scope full: leave out the classes level).")] = False
    freeze: Annotated[tuple[str, ...], Field(
        description="Keep the layout of the values whose name matches this glob (repeatable).",
        json_schema_extra={"metavar": "NAME_GLOB"})] = ()
    pin_file: Annotated[Path | None, Field(
        description='JSON pins: {"name glob": "layout" | "class", ...}; pinned values keep their layout.')] = None
    memory_limit: Annotated[Annotated[int, Field(ge=1)] | None, BeforeValidator(byte_size), Field(
        description="Refuse a run whose estimated memory passes this (bytes, or 8G, 512M; default 75% of the "
                          "machine's memory or of its cgroup's limit), before its heavy stages.",
        json_schema_extra={"metavar": "SIZE"})] = None

    @field_validator("time_limit", "workers", "seed", "budget", "interleaved_budget", "support_reserve",
                     mode="before")
    @classmethod
    def _no_bool(cls, value: object) -> object:
        """A number option refuses `True`/`False` (Python takes a bool for 1 or 0: `budget=True` is a mistake)."""
        if isinstance(value, bool):
            raise ValueError(f"expected a number, got the bool {value}")  # noqa: TRY004 (pydantic reports ValueErrors)
        return value

    @field_validator("solver", mode="before")
    @classmethod
    def _registered(cls, name: object) -> Backend:
        """Any registered backend: its error names them all, those registered at run time too."""
        return Backend(name)

    @property
    def deterministic(self) -> bool:
        """One worker and a deterministic time limit: the same output bytes on every run."""
        return self.workers == 1

    def __init__(self, **values) -> None:
        """Validated; a bad value is one BadOption line naming the option (not pydantic's report)."""
        try:
            super().__init__(**values)
        except ValidationError as error:
            problem = error.errors()[0]
            name = ".".join(str(part) for part in problem["loc"])
            raise BadOption(f"option {name}: {problem['msg'].removeprefix('Value error, ')}") from None

    def with_values(self, **values) -> OptimizeOptions:
        """These options with some fields replaced, validated again."""
        return OptimizeOptions(**{**dict(self), **values})

    def budgets_for(self, plan: Plan) -> Budgets:
        return Budgets.of(plan).overridden(self.budget, self.interleaved_budget, self.support_reserve)

    def solver_settings(self, dump_model: str | None = None) -> SolverSettings:
        return SolverSettings(self.time_limit, self.workers or default_workers(), self.seed, self.deterministic,
                              dump_model, self.objective)

    def fingerprint(self) -> dict:
        """Every setting that can change the output bytes (the worker count switches determinism; not the memory
        limit), and the pin file's bytes (by sha256: an edited pin file is another setting)."""
        settings = self.model_dump(mode="json", exclude={"memory_limit"})  # it refuses runs, never changes one
        if self.pin_file is not None:
            try:  # read as a plan is, bounded: a pin file named /dev/zero or a FIFO must not hold the run
                settings["pin_file_sha256"] = hashlib.sha256(read_input(self.pin_file)).hexdigest()
            except PlanError:
                settings["pin_file_sha256"] = None
        return settings
