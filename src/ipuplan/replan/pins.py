"""Pins: values the user keeps as they are, by name or glob, as poplibs' planner lets its users pin a plan.

`--freeze NAME_GLOB` (repeatable) keeps the layout of every value whose name matches; a pin file
does the same from JSON, `{"name glob": "layout" | "class", ...}`. Class freedom is a level of its
own (scope `full`), which a pin cannot yet narrow to "any tiling, this class": a "class" pin
freezes its values' whole layout for now, and is recorded as such. Pinned values reach the
candidate space as ids and are listed as frozen by request.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum
from fnmatch import fnmatchcase
from pathlib import Path

from ipuplan.errors import PlanError
from ipuplan.plan.format import Plan


class Keep(str, Enum):
    LAYOUT = "layout"
    """Partitions, strides, blocks and class all stay."""
    CLASS = "class"
    """The memory class stays (frozen whole for now: see the module's note)."""


@dataclass(frozen=True)
class Pins:
    layout: frozenset[int] = frozenset()
    memory_class: frozenset[int] = frozenset()

    @property
    def frozen(self) -> frozenset[int]:
        """Every pinned value: a class pin freezes the whole layout until a level can honour it alone."""
        return self.layout | self.memory_class

    def __bool__(self) -> bool:
        return bool(self.frozen)


def read_pin_file(path: Path) -> dict[str, Keep]:
    """The pin file's globs and what each keeps; PlanError (exit 2) naming the file and the entry."""
    try:
        loaded = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise PlanError(f"cannot read the pin file: {error.strerror}", source=str(path)) from None
    except ValueError as error:
        raise PlanError(f"invalid JSON: {error}", source=str(path)) from None
    if not isinstance(loaded, dict):
        raise PlanError('a pin file is one JSON object: {"name glob": "layout" | "class", ...}', source=str(path))
    pins = {}
    for glob, keep in loaded.items():
        if keep not in {k.value for k in Keep}:
            raise PlanError(f"keeps {keep!r}; choose layout or class", location=f"[{glob!r}]", source=str(path))
        pins[glob] = Keep(keep)
    return pins


def matching(plan: Plan, glob: str, source: str) -> frozenset[int]:
    """Ids of the values whose name matches `glob` (case-sensitive); a glob matching nothing is an error."""
    found = frozenset(v.id for v in plan.values if fnmatchcase(v.name, glob))
    if not found:
        raise PlanError(f"pin {glob!r} matches no value name", source=source)
    return found


def resolve_pins(plan: Plan, freeze: tuple[str, ...] = (), pin_file: Path | None = None) -> Pins:
    """The values `--freeze` globs and the pin file name, as ids."""
    layout = {v for glob in freeze for v in matching(plan, glob, "--freeze")}
    memory_class: set[int] = set()
    if pin_file is not None:
        for glob, keep in read_pin_file(pin_file).items():
            (layout if keep == Keep.LAYOUT else memory_class).update(matching(plan, glob, str(pin_file)))
    return Pins(frozenset(layout), frozenset(memory_class - layout))
