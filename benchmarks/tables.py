"""Plain-text tables for benchmark output (numbers right-aligned, thousands separated), and the "busy" condition the
benchmarks that measure a machine under load share.

Imported, it turns the exchange prices kept across runs off (`IPUPLAN_CACHE_DIR=off`) for this process and the runs it
starts, unless the environment already says where they are: a benchmark measures a first run, as a new plan meets
it (`optimize_reference.py` times a second run as well, with a store of its own)."""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import contextmanager

os.environ.setdefault("IPUPLAN_CACHE_DIR", "off")


def head_commit() -> str:
    """The checked-out commit, short (what a results file names as the source it measured)."""
    found = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=os.path.dirname(os.path.abspath(__file__)),
                           capture_output=True, text=True, check=False)
    return found.stdout.strip() or "?"


@contextmanager
def busy(on: bool):
    """Two CPU-bound loops beside the runs, when `on`: a shared build machine (on 2 cores a run gets about a third of
    the CPU), what issue 36's runs under load met."""
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2 if on else 0)]
    try:
        yield
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


def cell(value: object) -> str:
    if isinstance(value, bool) or value is None:
        return "-" if value is None else ("yes" if value else "no")
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def print_table(rows: list[dict], title: str = "") -> None:
    if title:
        print(f"\n{title}")
    if not rows:
        print("(no rows)")
        return
    headers = list(max(rows, key=len))
    cells = [[cell(row.get(h, "")) for h in headers] for row in rows]
    widths = [max(len(h), *(len(line[i]) for line in cells)) for i, h in enumerate(headers)]
    print("  ".join(h.rjust(w) for h, w in zip(headers, widths)))
    for line in cells:
        print("  ".join(c.rjust(w) for c, w in zip(line, widths)))
