"""The house rules of src/ipuplan: imports follow the pipeline order (so there is no cycle), and one
`optimize` call infers each fact of a plan once."""

from __future__ import annotations

import ast
import cProfile
import pstats
from pathlib import Path

import ipuplan

PACKAGE = Path(ipuplan.__file__).resolve().parent

PIPELINE = [
    "errors",
    "outputs",
    "debug_syntax",
    "layout",
    "operation",
    "format",
    "budgets",
    "liveness",
    "exchange",
    "estimate",
    "dataflow",
    "families",
    "attention",
    "facts",
    "check",
    "candidates.types",
    "candidates.rules",
    "candidates.storage",
    "candidates.kernels",
    "candidates.strides",
    "candidates.retile",
    "candidates.attention",
    "candidates.classes",
    "candidates",
    "costs",
    "solvers.result",
    "solvers.construct",
    "solvers.reduce",
    "solvers.linear",
    "solvers.windows",
    "solvers.cpsat",
    "solvers.conflict",
    "solvers.highs",
    "solvers.greedy",
    "solvers",
    "options",
    "pins",
    "explain",
    "rewrite",
    "optimizer",
    "sweep",
    "report",
    "diff",
    "page",
    "synth",
    "exploration",
    "cli",
    "__main__",
    "",
]
"""Every module of the package, in pipeline order ("" is the package itself, the public API)."""


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path) -> set[str]:
    """Every ipuplan module `path` imports, at any depth of the file (lazy imports count too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ipuplan"):
            module = node.module.removeprefix("ipuplan").lstrip(".")
            found.update(_submodule_or_module(module, alias.name) for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name.removeprefix("ipuplan").lstrip(".") for a in node.names if a.name.startswith("ipuplan"))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("ipuplan."):
            found.add(node.value.removeprefix("ipuplan.").rstrip("."))  # import_module("ipuplan.x") by name
    return found


def _submodule_or_module(module: str, name: str) -> str:
    """`from ipuplan.candidates import rules` imports the submodule; `import Scope` from it, the package."""
    folder = PACKAGE.joinpath(*module.split(".")) if module else PACKAGE
    is_module = (folder / f"{name}.py").exists() or (folder / name / "__init__.py").exists()
    return f"{module}.{name}".lstrip(".") if is_module else module


def test_every_module_has_a_place_in_the_pipeline():
    modules = {module_name(path) for path in PACKAGE.rglob("*.py")}
    assert modules == set(PIPELINE), (modules - set(PIPELINE), set(PIPELINE) - modules)


def test_imports_follow_the_pipeline_order():
    rank = {name: position for position, name in enumerate(PIPELINE)}
    against = []
    for path in PACKAGE.rglob("*.py"):
        importer = module_name(path)
        for imported in imported_modules(path):
            target = imported if imported in rank else imported.rsplit(".", 1)[0]
            if rank[target] >= rank[importer] and target != importer:
                against.append(f"{importer} imports {imported}")
    assert against == []


def test_solvers_see_only_the_problem():
    """A backend reads a `costs.Problem` (indices and integers): no plan, layout or candidate."""
    for path in (PACKAGE / "solvers").glob("*.py"):
        outside = {m for m in imported_modules(path) if m.split(".")[0] != "solvers"}
        assert outside <= {"costs", "errors"}, (path.name, outside)


def test_one_optimize_infers_each_fact_once_per_plan(reference_plan):
    from ipuplan.optimizer import optimize

    profile = cProfile.Profile()
    profile.runcall(optimize, reference_plan, workers=1, time_limit=5)
    calls = {function: stats[1] for (_, _, function), stats in pstats.Stats(profile).stats.items()}
    # once for the input, once for the rewritten plan that is re-checked before it is returned
    assert (calls["estimate"], calls["liveness"], calls["dataflow"], calls["recognise_families"]) == (2, 2, 2, 2)
