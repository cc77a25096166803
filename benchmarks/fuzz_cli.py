"""The long run of the CLI fuzz (the suite runs 25 examples): damaged plans x commands x output-path faults.

Run:  .venv/bin/python benchmarks/fuzz_cli.py [--examples 2000] [--seed 0]

Each example asserts the CLI's promises (tests/fuzz_cases.py): an exit code from the documented set (never 70),
at most one error line and no traceback, the input unchanged, no file left behind but a complete output, and one
JSON object from every --json run. Plans: any field replaced, any character changed, and issue 21's hostile
families (fuzz_cases.HOSTILE); commands that write get every output fault (fuzz_cases.OUTPUT_FAULTS). Prints the
cases run per command, fault and exit code.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fuzz_cases import COMMANDS, OPTIONS, OUTPUT_FAULTS, cli_case, plan_texts
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from tables import print_table

import ipuplan.cli


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    arguments = parser.parse_args()
    seen: Counter = Counter()
    real_main = ipuplan.cli.main

    def counting_main(args):
        code = real_main(args)
        seen[(args[0], FAULT[0], code)] += 1
        return code

    FAULT = [""]

    @seed(arguments.seed)
    @settings(max_examples=arguments.examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(plan_texts, st.sampled_from(COMMANDS), st.sampled_from(OUTPUT_FAULTS))
    def case(text, command, fault):
        FAULT[0] = fault if command in OPTIONS else "-"
        cli_case(text, command, fault)

    import fuzz_cases

    fuzz_cases.main = counting_main
    started = time.perf_counter()
    case()
    rows = [{"command": c, "output fault": f, "exit code": code, "cases": n}
            for (c, f, code), n in sorted(seen.items())]
    print_table(rows, f"{sum(seen.values())} cases in {time.perf_counter() - started:.0f} s, no failure")


if __name__ == "__main__":
    main()
