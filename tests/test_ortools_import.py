"""OR-Tools' cp_model without pandas' import cost, every part of cp_model still working."""

from __future__ import annotations

import subprocess
import sys

PROGRAM = """
import sys
import ipuplan.solvers.cpsat, ipuplan.solvers.conflict
from ipuplan.solvers.ortools_import import cp_model
loaded_early = "pandas.core" in sys.modules
model = cp_model.CpModel()
x = model.new_int_var(0, 5, "x")
model.maximize(x)
solver = cp_model.CpSolver()
assert solver.solve(model) == cp_model.OPTIMAL and solver.value(x) == 5
loaded_by_a_solve = "pandas.core" in sys.modules
import pandas as pd
series = model.new_int_var_series("v", pd.Index(range(3)), 0, 1)
print(loaded_early, loaded_by_a_solve, type(series).__name__, len(series))
"""


def test_pandas_loads_only_when_something_uses_it():
    run = subprocess.run([sys.executable, "-c", PROGRAM], check=False, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["False", "False", "Series", "3"]


def test_a_program_that_has_pandas_gets_the_plain_import():
    program = "import pandas, sys; from ipuplan.solvers.ortools_import import cp_model; print(cp_model.pd is pandas)"
    run = subprocess.run([sys.executable, "-c", program], check=False, capture_output=True, text=True, timeout=120)
    assert run.stdout.strip() == "True", run.stderr
