"""The penalised rounds (`solvers.wcsp`) of one IOPDDL run, traced: what this process spends its time on between
toulbar2's solves, and which of the rounds' choices could have won (issue 36: busy IOPDDL K lands anywhere from +0.1%
to +6.6% of the best known, one run each).

    .venv/bin/python benchmarks/wcsp_trace.py ../shared/iopddl/asplos-2025-iopddl-K.json.gz [--busy] [--time-limit 180]

The run is the product's own (`workbench.iopddl.solve_instance`, as benchmarks/iopddl.py runs it), in a fresh
process in a session of its own; `--busy` starts two CPU-bound loops in this runner's session first (with the kernel's
autogroup scheduling, as `iopddl.py --busy` does: the run gets about one of the two cores). In it `wcsp._round`,
`wcsp.repaired` and `wcsp._Best.offer` are wrapped: per round, when its solves were begun and waited for; per choice
repaired, its cost and worst row over a limit (as a share of the limit) before, its cost and validity after, the
seconds, and the best valid cost known then. Costs are the reduced problem's (the solver's), not the contest's score:
compare them with one another. The summary: the seconds this process spent repairing choices that did not become the
best, by how far above the best their cost stood before the repair.
"""

from __future__ import annotations

import time

STARTED = time.perf_counter()

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tables import busy, print_table

MARGINS = (0.05, 0.10, 0.15)
"""Shares above the best valid cost known at the time, for the summary's rows."""


def worst_share(problem, choice) -> float:
    worst = problem.usage(choice).worst_excess(problem.limits)
    return max((over / limit.bytes for over, limit in zip(worst, problem.limits)), default=0.0)


def traced_run(path: Path, time_limit: float) -> dict:
    """The run, with its rounds and repairs recorded (this process: the child)."""
    from ipuplan.solvers import cpsat, wcsp
    from ipuplan.workbench.iopddl import read_instance, solve_instance

    rounds, repairs, parts, best = [], [], [], {"cost": None}
    repaired, round_, offer = wcsp.repaired, wcsp._round, wcsp._Best.offer
    solver_of, least_excess, solvers = cpsat._solver, cpsat._least_excess, []

    def traced_solver(*args, **kwargs):
        solvers.append(solver_of(*args, **kwargs))
        return solvers[-1]

    def traced_least_excess(problem, seconds, *args, **kwargs):
        began, solvers[:] = time.perf_counter(), []
        found = least_excess(problem, seconds, *args, **kwargs)
        record = {"repair": len(repairs), "at s": round(began - STARTED, 1), "groups": problem.groups,
                  "wall asked": round(seconds, 2)}
        for phase, solver in zip(("excess", "exchange"), solvers):
            response = solver.response_proto
            record |= {f"{phase} status": solver.status_name(response.status)[:4],
                       f"{phase} units": round(response.deterministic_time, 2),
                       f"{phase} wall": round(response.wall_time, 2), f"{phase} CPU": round(response.user_time, 2)}
        parts.append(record)
        return found

    def traced_repaired(problem, choice, *args, **kwargs):
        began, cost, over = time.perf_counter(), problem.exchange_of(choice), worst_share(problem, choice)
        found = repaired(problem, choice, *args, **kwargs)
        after, valid = problem.exchange_of(found), problem.valid(found)
        repairs.append({"at s": round(began - STARTED, 1), "cost before": cost, "over %": round(100 * over, 2),
                        "cost after": after, "valid": valid, "seconds": round(time.perf_counter() - began, 2),
                        "best then": best["cost"],
                        "became best": valid and (best["cost"] is None or after < best["cost"])})
        return found

    def traced_offer(self, choice):
        offer(self, choice)
        if self.valid:
            best["cost"] = self.key[2]

    def traced_round(problem, solvers, weights, spread, levels, seconds, seed, start):
        began = time.perf_counter()
        learnt = round_(problem, solvers, weights, spread, levels, seconds, seed, start)

        def waited():
            asked = time.perf_counter()
            found = learnt()
            rounds.append({"begun s": round(began - STARTED, 1), "waited from s": round(asked - STARTED, 1),
                           "ended s": round(time.perf_counter() - STARTED, 1), "CPU s asked": seconds,
                           "choices": len(found[0]), "started": start is not None, "wall s": round(found[1], 1)})
            return found
        return waited

    wcsp.repaired, wcsp._round, wcsp._Best.offer = traced_repaired, traced_round, traced_offer
    cpsat._solver, cpsat._least_excess = traced_solver, traced_least_excess
    run = solve_instance(read_instance(path), time_limit, started=STARTED)
    return {"rounds": rounds, "repairs": repairs, "parts": parts, "cost": run.summary()["cost"],
            "valid": run.summary()["valid"], "wall s": round(time.perf_counter() - STARTED, 1)}


def summary(repairs: list[dict]) -> list[dict]:
    """Seconds of repair per kind of choice: those that became the best, and those that did not, by how far their cost
    stood above the best known at the time, before the repair."""
    def above(record: dict) -> float:
        return record["cost before"] / record["best then"] - 1 if record["best then"] else float("-inf")

    lost = [r for r in repairs if not r["became best"]]
    rows = [{"choices": "became the best", "count": sum(r["became best"] for r in repairs),
             "seconds": round(sum(r["seconds"] for r in repairs if r["became best"]), 1)},
            {"choices": "did not", "count": len(lost), "seconds": round(sum(r["seconds"] for r in lost), 1)}]
    for margin in MARGINS:
        far = [r for r in lost if above(r) > margin]
        rows.append({"choices": f"did not, cost > best + {margin:.0%} before", "count": len(far),
                     "seconds": round(sum(r["seconds"] for r in far), 1)})
    won = [above(r) for r in repairs if r["became best"] and r["best then"]]
    rows.append({"choices": "became the best: most above the best before", "count": len(won),
                 "seconds": f"{max(won):+.1%}" if won else "-"})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("instance", type=Path)
    parser.add_argument("--time-limit", type=float, default=180.0)
    parser.add_argument("--busy", action="store_true", help="two CPU-bound loops beside the run")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        print(json.dumps(traced_run(options.instance, options.time_limit)))
        return
    with busy(options.busy):
        done = subprocess.run([sys.executable, __file__, str(options.instance), "--time-limit",
                               str(options.time_limit), "--child"], check=False, capture_output=True,
                              text=True,
                              start_new_session=True)
    if done.returncode:
        sys.exit(f"the traced run failed (exit {done.returncode}): {done.stderr.strip().splitlines()[-1:]}")
    trace = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"{options.instance.name}, {'busy' if options.busy else 'alone'}: cost {trace['cost']:,} "
          f"({'valid' if trace['valid'] else 'NOT VALID'}), wall {trace['wall s']} s")
    print_table(trace["rounds"], "rounds (toulbar2's solves, in children)")
    print_table(trace["repairs"], "repairs (this process)")
    print_table(summary(trace["repairs"]), "this process's repair seconds")
    print_table(trace["parts"], "the repairs' CP-SAT neighbourhoods (repair: its row above, from 0)")


if __name__ == "__main__":
    main()
