"""The house rules of src/ipuplan: folders are the pipeline's stages, imports only go to the same or an
earlier stage (and never round a circle inside one), the README's module map is the tree, every module has its
mirror test file, and one `optimize` call infers each fact of a plan once.

The stage order is read from the README's module map (its rows, top to bottom), so it is written once, where a
newcomer reads it; a module added to a stage needs no list in this file.
"""

from __future__ import annotations

import ast
import cProfile
import pstats
import re
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import ipuplan

PACKAGE = Path(ipuplan.__file__).resolve().parent
README = PACKAGE.parents[1] / "README.md"
TESTS = Path(__file__).resolve().parent


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def every_module() -> dict[str, Path]:
    return {module_name(path): path for path in PACKAGE.rglob("*.py")}


def stage_of(module: str) -> str:
    return module.split(".")[0]


def readme_map() -> dict[str, set[str]]:
    """The README's module map: per stage (a folder or a top-level module), in row order, the modules it names."""
    section = README.read_text().split("## Layout of the code", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    stages = {}
    for row in rows:
        stage_cell, modules_cell = row.split("|")[1:3]
        stage = stage_cell.strip().strip("`").rstrip("/")
        names = re.findall(r"`([\w/]+)`", modules_cell)
        stages[stage] = {stage if name == stage else f"{stage}.{name.replace('/', '.')}" for name in names}
    return stages


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
    """`from ipuplan.space import rules` imports the submodule; `import Scope` from a module, the module."""
    folder = PACKAGE.joinpath(*module.split(".")) if module else PACKAGE
    is_module = (folder / f"{name}.py").exists() or (folder / name / "__init__.py").exists()
    return f"{module}.{name}".lstrip(".") if is_module else module


def test_the_readme_module_map_is_the_tree():
    mapped = readme_map()
    named = set().union(*mapped.values())
    modules = set(every_module())
    assert set(mapped) == {stage_of(m) for m in modules if m}, "a stage folder is missing from the README, or gone"
    assert named - modules == set(), "the README names modules that do not exist"
    packages = {m for m, path in every_module().items() if path.name == "__init__.py"}
    assert modules - named - packages == set(), "modules the README's map does not name"


def mirror_test_files(path: Path) -> set[str]:
    """The names a module's test file may have: `test_NAME.py`, or `test_STAGE_NAME.py` with STAGE its first folder
    under the package (`space/levels/gemm.py`: `test_gemm.py` or `test_space_gemm.py`)."""
    parts = path.relative_to(PACKAGE).parts
    return {f"test_{path.stem}.py"} | ({f"test_{parts[0]}_{path.stem}.py"} if len(parts) > 1 else set())


def test_every_module_has_its_mirror_test_file():
    """A module's tests are found by its name: each module (not a package's `__init__` nor a `__main__`) has a test
    file named after it in tests/."""
    tests = {path.name for path in TESTS.glob("test_*.py")}
    modules = [path for path in sorted(PACKAGE.rglob("*.py")) if path.name not in ("__init__.py", "__main__.py")]
    assert len(modules) > 50  # the tree was found
    missing = [f"{path.relative_to(PACKAGE)}: {' or '.join(sorted(mirror_test_files(path)))}" for path in modules
               if not mirror_test_files(path) & tests]
    assert missing == [], "modules without their mirror test file in tests/"


def test_imports_go_to_the_same_or_an_earlier_stage():
    rank = {stage: position for position, stage in enumerate(readme_map())}
    rank[""] = len(rank)  # the package itself, the public API, may import anything
    against = []
    for importer, path in every_module().items():
        for imported in imported_modules(path):
            if rank[stage_of(imported)] > rank[stage_of(importer)]:
                against.append(f"{importer} imports {imported}")
    assert against == []


def test_no_import_circle():
    modules = every_module()
    graph = {importer: {m for m in imported_modules(path) if m in modules and m != importer}
             for importer, path in modules.items()}
    try:
        tuple(TopologicalSorter(graph).static_order())
    except CycleError as error:
        raise AssertionError(f"import circle: {error.args[1]}") from None


def test_solvers_see_only_the_model():
    """A backend reads a `model.problem.Problem` (indices and integers): no plan, layout or candidate. It may
    name the budget rule (`plan.budgets.Limit`), which imports nothing but the errors, and make a call in a forked
    copy (`plan.forked`, which knows no plan)."""
    allowed = {"model", "model.problem", "model.objective", "errors", "plan.budgets", "plan.forked"}
    for path in (PACKAGE / "solvers").glob("*.py"):
        outside = {m for m in imported_modules(path) if stage_of(m) != "solvers"}
        assert outside <= allowed, (path.name, outside)


def test_no_solver_calls_back_into_the_run():
    """Imports cannot show a callback: a backend given an object whose method builds candidates (the old
    `solve_space(start.widened(...))`) would load the space at run time. The widening is a phase of the run
    (`replan.widen`); no module of `solvers/` calls it."""
    for path in (PACKAGE / "solvers").glob("*.py"):
        called = {node.func.attr for node in ast.walk(ast.parse(path.read_text()))
                  if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)}
        assert "widened" not in called, path.name


def test_one_optimize_infers_each_fact_once_per_plan(reference_plan):
    from ipuplan.replan.pipeline import optimize

    profile = cProfile.Profile()
    profile.runcall(optimize, reference_plan, workers=1, time_limit=5)
    calls = {function: stats[1] for (_, _, function), stats in pstats.Stats(profile).stats.items()}
    # once for the input, once for the rewritten plan that is re-checked before it is returned; its liveness and
    # dataflow are the input's (the rewrite changed nothing they read: `rewritten_facts`)
    assert (calls["estimate"], calls["liveness"], calls["dataflow"], calls["recognise_families"]) == (2, 1, 1, 2)
