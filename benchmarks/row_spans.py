"""Rows as spans (issue 36, item 4): per problem, its rows, the (row, term) occurrences they would hold written out one
by one, and the spans its term table keeps instead, with the seconds to build the problem and its table.

    .venv/bin/python benchmarks/row_spans.py                       # the plans of models/, scope full
    .venv/bin/python benchmarks/row_spans.py --iopddl ../shared/iopddl

Nothing is laid out: the occurrences are counted from the spans (`TermTable.occurrence_count`).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tables import print_table

ROOT = Path(__file__).resolve().parent.parent


def row(name: str, build) -> dict:
    began = time.perf_counter()
    problem = build()
    built = time.perf_counter()
    table = problem.table
    done = time.perf_counter()
    return {"problem": name, "rows": table.rows, "occurrences": table.occurrence_count,
            "spans": len(table.span_term), "distinct terms": table.terms,
            "occurrences per span": round(table.occurrence_count / max(len(table.span_term), 1), 1),
            "build s": round(built - began, 2), "table s": round(done - built, 2)}


def plan_rows(scope: str) -> list[dict]:
    from ipuplan.plan.format import load_plan
    from ipuplan.replan.options import OptimizeOptions
    from ipuplan.replan.pipeline import prepare

    def problem_of(path: Path):
        return prepare(load_plan(path), OptimizeOptions(scope=scope)).problem

    return [row(f"{path.name} ({scope})", lambda path=path: problem_of(path))
            for path in sorted((ROOT / "models").glob("*.json"))]


def iopddl_rows(folder: Path) -> list[dict]:
    from ipuplan.workbench.iopddl import problem_of, read_instance

    return [row(path.name, lambda path=path: problem_of(read_instance(path)))
            for path in sorted(folder.glob("asplos-2025-iopddl-*.json*"))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iopddl", type=Path, metavar="DIR", help="the IOPDDL instances in DIR instead of models/")
    parser.add_argument("--scope", default="full", help="the plans' scope (default full)")
    args = parser.parse_args()
    rows = iopddl_rows(args.iopddl) if args.iopddl else plan_rows(args.scope)
    print_table(rows, "rows as spans: what a term table holds instead of every (row, term) occurrence")


if __name__ == "__main__":
    main()
