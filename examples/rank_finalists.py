"""Rank finalist scopes: re-plan every plan in a folder and keep the best one that fits.

Run from the repository root:  .venv/bin/python examples/rank_finalists.py [FOLDER] [--jobs 2]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import ipuplan

ROOT = Path(__file__).resolve().parent.parent


def best_fitting(rows: list[ipuplan.ExploreRow]) -> ipuplan.ExploreRow | None:
    """Rows come ranked by optimised peak; the first that succeeded and fits wins."""
    return next((row for row in rows if row.succeeded and row.fits_after), None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, default=ROOT / "models")
    parser.add_argument("--jobs", type=int, default=2)
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as out:
        rows = ipuplan.explore([arguments.folder], out, jobs=arguments.jobs, time_limit=10)
        for rank, row in enumerate(rows, 1):
            peak = "-" if row.optimized_peak is None else f"{row.optimized_peak:,}"
            print(f"{rank}. {row.scope}: {row.status}, raw peak {peak}{' ' + row.error if row.error else ''}")
        winner = best_fitting(rows)
        print(f"keep: {winner.scope} ({winner.optimized_peak:,} bytes per tile)" if winner else "no scope fits")


if __name__ == "__main__":
    main()
