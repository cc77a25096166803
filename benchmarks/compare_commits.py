"""End-to-end `ipuplan optimize` of one plan at two commits, in the same run, runs interleaved.

Run:  .venv/bin/python benchmarks/compare_commits.py BEFORE [AFTER] [--plan PLAN] [--repeat N] [--options "..."]
      [--prices-kept]

Each commit is checked out into a temporary git worktree, its bytecode compiled, and run with this
interpreter and `PYTHONPATH` set to the worktree's `src` (its dependencies are this environment's).
The runs alternate (before, after, before, ...) so that load on a shared machine falls on both alike;
the table gives each commit's fastest and median wall time and whether their outputs are
byte-identical. AFTER defaults to the working tree as it is.

`--prices-kept`: each commit prices exchanges into a store of its own (`IPUPLAN_CACHE_DIR`), filled by one run that is
not timed: a plan optimised again, as issue 34's reference figure is ("prices kept by an earlier run"). Without it
the runs use the environment's store setting as it is.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tables import print_table

ROOT = Path(__file__).resolve().parent.parent


def worktree(revision: str, folder: Path) -> Path:
    """A checkout of `revision` under `folder` (detached, removed by `drop_worktree`)."""
    target = folder / revision.replace("/", "_")
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(target), revision], check=True)
    return target


def compiled(source: Path) -> Path:
    """`source` with its package's bytecode written, as an installed package has it: without, each run compiles
    every module again where the environment sets PYTHONDONTWRITEBYTECODE (0.3-0.5 s a run)."""
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(source / "src")], check=True, env=environment)
    return source


def drop_worktree(path: Path) -> None:
    subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(path)], check=False)


def timed_optimize(source: Path, plan: Path, output: Path, options: list[str], store: Path | None = None) -> float:
    environment = {**os.environ, "PYTHONPATH": str(source / "src"),
                   **({"IPUPLAN_CACHE_DIR": str(store)} if store is not None else {})}
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "ipuplan", "optimize", str(plan), "-o", str(output), "--force", *options],
                   check=True, capture_output=True, env=environment, cwd=source)
    return time.perf_counter() - started


def compare(trees: dict[str, Path], plan: Path, repeat: int, options: list[str], folder: Path,
            prices_kept: bool = False) -> list[dict]:
    walls: dict[str, list[float]] = {label: [] for label in trees}
    outputs = {label: folder / f"{label}.json" for label in trees}
    stores = {label: folder / f"store-{k}" if prices_kept else None for k, label in enumerate(trees)}
    if prices_kept:
        for label, source in trees.items():
            timed_optimize(source, plan, outputs[label], options, stores[label])
    for _ in range(repeat):
        for label, source in trees.items():
            walls[label].append(timed_optimize(source, plan, outputs[label], options, stores[label]))
    digests = {label: hashlib.sha256(path.read_bytes()).hexdigest()[:12] for label, path in outputs.items()}
    return [{"commit": label, "runs": repeat, "fastest s": round(min(times), 2),
             "median s": round(statistics.median(times), 2), "output sha256": digests[label],
             "same output": "yes" if len(set(digests.values())) == 1 else "NO"}
            for label, times in walls.items()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after", nargs="?", default=None, help="a commit (default: the working tree)")
    parser.add_argument("--plan", type=Path, default=ROOT / "models" / "vit-so400m-finalist-5.json")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--options", default="--workers 1", help="optimize options, one string")
    parser.add_argument("--prices-kept", action="store_true", help="each commit's own price store, filled first")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        before = worktree(arguments.before, folder)
        after = worktree(arguments.after, folder) if arguments.after else ROOT
        try:
            compiled(before)
            compiled(after)
            trees = {arguments.before: before, arguments.after or "working tree": after}
            rows = compare(trees, arguments.plan.resolve(), arguments.repeat, shlex.split(arguments.options), folder,
                           arguments.prices_kept)
        finally:
            drop_worktree(before)
            if arguments.after:
                drop_worktree(after)
    kept = ", prices kept by a first run" if arguments.prices_kept else ""
    print_table(rows, f"ipuplan optimize {arguments.plan.name} {arguments.options}{kept}")


if __name__ == "__main__":
    main()
