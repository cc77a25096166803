"""OR-Tools' `cp_model`, imported without loading pandas until something uses pandas.

`ortools.sat.python.cp_model` imports pandas at its top only for its pandas-indexed helpers
(`new_int_var_series` and the like), which ipuplan never calls; pandas alone took 0.45 s of a
2.7 s `ipuplan optimize` of the reference plan. While cp_model is imported, `pandas` is a stand-in
whose classes only fill cp_model's annotations; afterwards cp_model's `pd` is the real pandas,
loaded on first attribute access, so every helper of cp_model still works. A program that has
imported pandas already (or cp_model) gets the plain import.
"""

from __future__ import annotations

import importlib.util
import sys
import types


def _stand_in() -> types.ModuleType:
    """A `pandas` with the names cp_model's module body evaluates (in annotations), and nothing else."""
    module = types.ModuleType("pandas", "ipuplan's stand-in while cp_model is imported; never used")
    for name in ("Index", "Series", "DataFrame"):
        setattr(module, name, type(name, (), {}))
    return module


def _lazy_pandas() -> types.ModuleType | None:
    """The real pandas, executed on its first attribute access (None where it is not installed)."""
    spec = importlib.util.find_spec("pandas")
    if spec is None or spec.loader is None:
        return None
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cp_model() -> types.ModuleType:
    if "pandas" in sys.modules or "ortools.sat.python.cp_model" in sys.modules:
        from ortools.sat.python import cp_model

        return cp_model
    sys.modules["pandas"] = _stand_in()
    try:
        from ortools.sat.python import cp_model
    finally:
        del sys.modules["pandas"]
    pandas = _lazy_pandas()
    if pandas is not None:
        sys.modules.setdefault("pandas", pandas)
        cp_model.pd = sys.modules["pandas"]
    return cp_model


cp_model = _cp_model()
