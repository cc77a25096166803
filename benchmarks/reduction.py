"""The model reduction before any start (issue 36: what holds IOPDDL A's first valid solution): per instance, its
candidates before and after the exact pairwise reductions and after dominance, the edges left, and the seconds of
each step, in this process.

    .venv/bin/python benchmarks/reduction.py ../shared/iopddl
    .venv/bin/python benchmarks/reduction.py ../shared/iopddl --only A K
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tables import print_table

from ipuplan.solvers.reduce import dominance, pairwise
from ipuplan.workbench.iopddl import problem_of, read_instance


def row(letter: str, path: Path) -> dict:
    began = time.perf_counter()
    problem = problem_of(read_instance(path))
    built = time.perf_counter()
    exact = pairwise(problem)
    paired = time.perf_counter()
    undominated = dominance(exact.problem)
    done = time.perf_counter()
    return {"instance": letter, "candidates": sum(problem.candidate_counts),
            "after pairwise": sum(exact.problem.candidate_counts),
            "undominated": sum(undominated.problem.candidate_counts), "edges left": len(exact.problem.edges),
            "read and build s": round(built - began, 2), "pairwise s": round(paired - built, 2),
            "dominance s": round(done - paired, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="the IOPDDL instances (asplos-2025-iopddl-*.json.gz)")
    parser.add_argument("--only", nargs="+", metavar="LETTER", help="only these instances (default all)")
    args = parser.parse_args()
    # asplos-2025-iopddl-A.json.gz -> A
    paths = {path.name.split("-")[-1].split(".")[0]: path for path in sorted(args.folder.glob("asplos-2025-iopddl-*"))}
    print_table([row(letter, path) for letter, path in paths.items() if not args.only or letter in args.only],
                "the model reduction per IOPDDL instance")


if __name__ == "__main__":
    main()
