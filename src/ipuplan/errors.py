"""Typed errors: every failure names where it happened, so the CLI can print one line."""

from __future__ import annotations


class IpuplanError(Exception):
    """Base of every error ipuplan raises on purpose."""

    exit_code = 2


class PlanError(IpuplanError):
    """Bad input: a plan (or a string inside it) that cannot be read.

    `source` is the file (or "<plan>" for in-memory plans), `location` a path
    such as ``timeline.values[12].layout``.
    """

    def __init__(self, message: str, *, location: str = "", source: str = "<plan>") -> None:
        self.message = message
        self.location = location
        self.source = source
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.source}: {self.location}" if self.location else self.source
        return f"{where}: {self.message}"

    def at(self, *, source: str | None = None, prefix: str = "") -> PlanError:
        """The same error, placed in a file (unless it already names one) and/or under an outer location."""
        location = f"{prefix}{self.location}" if prefix else self.location
        named = self.source if self.source != "<plan>" else (source or self.source)
        return PlanError(self.message, location=location, source=named)


class SyntaxProblem(ValueError):
    """A Rust-Debug string that does not parse; `offset` is the character index, if one applies."""

    def __init__(self, message: str, offset: int | None = None) -> None:
        self.offset = offset
        super().__init__(message if offset is None else f"{message} at character {offset}")


class InfeasibleBudget(IpuplanError):
    """No layout choice meets the budgets; the message names the budget and step."""

    exit_code = 3
    status = "infeasible"


class NoSolutionInTime(InfeasibleBudget):
    """Nothing that meets the budgets was found within the time limit: not a proof that nothing does (exit 3)."""

    status = "no_solution"


class BudgetError(PlanError, ValueError):
    """Budgets that contradict each other (e.g. an interleaved budget above the whole budget). Its `location` names
    the plan's field when the plan's own budgets contradict each other, so the CLI can name the file too; its
    `source` names the option (`--budget`, ...) when an override is one of them."""


class OutputError(IpuplanError):
    """A result that could not be written (a full disk, a file size limit, a path that went away): exit 2. The
    message names the file; nothing of it is left behind."""

    def __init__(self, path: object, reason: str) -> None:
        self.path = str(path)
        super().__init__(f"{path}: cannot write: {reason} (nothing written)")
