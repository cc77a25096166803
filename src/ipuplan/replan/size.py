"""How big a run will be, said before it starts: its memory estimated from the plan's sizes, held to a limit.

`run_size` is read in `pipeline.prepare` before any facts or candidates exist, from what the loaded plan shows at
once: values, steps, live entries (the sum of the steps' live sets) and `tile_count`. A run past
`OptimizeOptions.memory_limit` (`--memory-limit`; by default `DEFAULT_SHARE` of the machine's memory, or its
cgroup's limit or address-space limit when lower) is refused with one line (`RunTooLarge`, exit 2) instead of ending
in the OOM killer. `require_synth_fits` does the same for `ipuplan synth`, before the derived plan is built.

The figures are an envelope of measurements, not a mean: peak RSS (`/usr/bin/time -f %M`) of `ipuplan optimize
--json` with default options (2 workers) on a 2-core, 23 GiB machine, the reference plan unrolled K times
(`ipuplan synth models/vit-so400m-finalist-5.json --unroll K`) or given N layers (`--layers N --budget-factor 100`):

    plan                      values   steps       live  exact   peak RSS
    reference (K=1), never       176     116      3,170  no       146 MB
    K=30                       5,280   3,480    162,438  no       230 MB
    K=50                       8,800   5,800    272,278  no       289-297 MB
    K=100                     17,600  11,600    546,878  no       433 MB
    K=150                     26,400  17,400    821,478  no       564-579 MB
    K=300                     52,800  34,800  1,645,278  no     1,296-1,327 MB
    K=600                    105,600  69,600  3,292,878  no     2,027 MB
    N=1000, never             12,152     116    745,682  no       323 MB
    N=4000, never             48,152     116  2,977,682  no       989 MB
    reference (K=1)              176     116      3,170  priced   318 MB
    K=3                          528     348     14,154  priced 1,281 MB
    K=10                       1,760   1,160     52,598  priced   505-2,371 MB (4 runs)
    K=12                       2,112   1,392     63,582  priced   530 MB
    reference at tile_count 4,096 / 8,192 / 16,384 / 65,536:   675 / 982 / 1,464 / 3,053 MB (priced)
    reference at tile_count 65,536, never:                     245 MB

A least-squares fit of the unpriced runs (non-negative, live entries fixed at 64 B: the fit cannot tell them from
values, and each costs at least its slot in the plan, in the live facts and its JSON text) gives 159 MB + 13.9 KB a
value + 5.1 KB a step; the envelope taken is BASE_BYTES + VALUE_BYTES a value + STEP_BYTES a step + LIVE_BYTES a
live entry (K=300: 1,331 MB for 1,327 measured; K=600: 2,512 for 2,027; N=4000: 1,132 for 989; and the scaling
benchmark's 200,640 values: 4.6 GB for 3.6 GB measured; K=30: 262 MB for 230). Pricing the exact exchange
(`--exact-exchange always`, or `auto` when at most 20,000 candidates can meet the peak, which only the solve tells:
so it is counted on every plan) adds what CP-SAT's pair model takes, which varied from 0.1 to 2.2 GB between runs of
one plan: EXACT_BYTES_PER_VALUE up to EXACT_BYTES_CAP (the reference: 546 MB for 318; K=3: 1,350 for 1,281; K=10:
2,750 for 2,371 at most; a large plan whose candidates are too many to price is over-counted by up to 2.5 GiB, and a
refusal says what `--exact-exchange never` would need). The pieces it prices are per tile: past 1,472 tiles they
add TILE_BYTES x (sqrt(tiles) - sqrt(1,472)), fitted on the reference (65,536 tiles: +2.8 GB), with tiles counted up
to `plan_exchange.MAX_TILES` (a layout over more is left unpriced: the reference at 2^20 tiles peaks at 1.25 GB).
That term is of the plan's distinct layouts, not of its values (the reference unrolled 10 times at 16,384 tiles:
1.2 GB), so it is added once. A large `tile_count` costs time in the same place, not in building candidates (the
reference at 2^20 tiles: candidates 1.0 s, exact exchange 18 s of a 20 s run): that time is not bounded here.
Not modelled: solver workers past 2 (each CP-SAT worker holds its own copy of the model).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from math import sqrt
from pathlib import Path

try:
    import resource
except ImportError:  # not on Windows: no address-space limit to read
    resource = None

from ipuplan.errors import PlanError
from ipuplan.facts.plan_exchange import MAX_TILES as PRICED_TILES
from ipuplan.plan.format import Plan, size_in_words
from ipuplan.replan.options import ExactExchange, OptimizeOptions

DEFAULT_SHARE = 0.75
"""The share of the machine's memory (or of the cgroup's limit, when lower) a run may take by default: the rest is
the system's and the other processes'."""

BASE_BYTES = 150 << 20
"""The interpreter with OR-Tools, numpy and SciPy loaded, and a small plan's run (the reference plan, unpriced:
146 MB)."""

VALUE_BYTES = 17 << 10
STEP_BYTES = 6 << 10
LIVE_BYTES = 64
EXACT_BYTES_PER_VALUE = 9 << 18
EXACT_BYTES_CAP = 5 << 29
"""2.5 GiB: above the most an exact pricing took (2.2 GB over the rest of the run, the reference unrolled 10 times)."""

TILE_BYTES = 14 << 20
"""Per sqrt(tile) past a 1,472-tile chip, while the exact exchange is priced (see the module's docstring)."""

CHIP_TILES = 1472

SYNTH_BASE_BYTES = 56 << 20
SYNTH_VALUE_BYTES = 5400
SYNTH_STEP_BYTES = 3700
SYNTH_LIVE_BYTES = 16
"""`synth`'s own peak: a least-squares fit (non-negative) of K=1..600 unrolled and N=27..4,000 layers, within 2% of
each (K=600: 846 MB; N=4000: 331 MB); live entries fit at 0 B, so each is given its list slot and JSON text."""


class RunTooLarge(PlanError):
    """A run (or a derived plan) whose estimated memory passes the limit: refused before its heavy stages (exit 2)."""


@dataclass(frozen=True)
class RunSize:
    """A run's counts and the peak memory they are estimated to take."""

    values: int
    steps: int
    live: int
    tiles: int
    bytes: int
    exact_bytes: int = 0
    """The part of `bytes` for pricing the exact exchange (none with `--exact-exchange never`)."""
    slowdown: float = 1.0
    """How much slower than alone the machine ran when the size was taken (`machine_slowdown`): the seconds below
    scale by it."""

    @property
    def mandatory_seconds(self) -> float:
        """About how long the work every run does takes (MANDATORY_SECONDS_PER_LIVE)."""
        return (MANDATORY_SECONDS + MANDATORY_SECONDS_PER_LIVE * self.live) * self.slowdown

    @property
    def tail_seconds(self) -> float:
        """About how long the rewrite, its re-check and the write take (TAIL_SECONDS_PER_LIVE)."""
        return TAIL_SECONDS_PER_LIVE * self.live * self.slowdown

    @property
    def counts(self) -> str:
        tiles = f", {self.tiles:,} tiles" if self.tiles > CHIP_TILES else ""
        return f"{self.values:,} values, {self.steps:,} steps, {self.live:,} live entries{tiles}"


MANDATORY_SECONDS = 1.5
MANDATORY_SECONDS_PER_LIVE = 8.5e-6
"""The work every optimise run does whatever its time limit (import, load, analyse, candidates, problem, the
constructive plan with its bounds, rewrite with its re-check, write): MANDATORY_SECONDS + MANDATORY_SECONDS_PER_LIVE
a live entry, fitted on the 2-core machine, `ipuplan optimize --time-limit 1` end to end (`benchmarks/deadline.py`,
benchmarks/results/deadline.md): 10,032 values 3.8-4.2 s measured, 4.1 estimated; 50,160 values 13.1-13.4 s, 14.8
estimated; 200,640 values 55.0 s, 54.7 estimated.
Refitted after the widening read off the narrow rows and the checks made in forked copies (it was 9.2e-6). An
estimate of this machine, said when it passes `--time-limit`."""

TAIL_SECONDS_PER_LIVE = 3.5e-6
"""Of that, the rewrite, its re-check and the write, a live entry (10,032 values 1.27 s, 50,160 values 4.68 s;
the reference plan 0.1 s): what a run sets aside at its deadline's end (`solvers.deadline.Deadline.reserve`), so
that it ends written, not only solved, near its limit."""


def run_size(plan: Plan, options: OptimizeOptions) -> RunSize:
    """The peak memory an optimise run of `plan` under `options` is estimated to take (see the module's docstring)."""
    values, steps = len(plan.values), len(plan.steps)
    live = sum(len(step.live) for step in plan.steps)
    needed = BASE_BYTES + VALUE_BYTES * values + STEP_BYTES * steps + LIVE_BYTES * live
    exact = 0
    if options.exact_exchange != ExactExchange.NEVER:  # auto may price up to 20,000 candidates of any plan
        exact = min(EXACT_BYTES_PER_VALUE * values, EXACT_BYTES_CAP) + _tile_bytes(plan.tile_count)
    return RunSize(values, steps, live, plan.tile_count, needed + exact, exact, machine_slowdown())


def machine_slowdown() -> float:
    """The machine's load over the cores this process may use, at least 1: about how much slower than alone a run
    goes now (two CPU-bound processes beside a run on 2 cores: load about 3, 1.5x; 200,640 values took 55 s alone
    and 84-89 s so, benchmarks/results/deadline*.md). The load is the 1-minute average or the tasks runnable this
    instant, this one among them, whichever is more: the average lags a minute behind work that just began."""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        load = 0.0
    cores = usable_cores()
    return max(1.0, load / cores, runnable_now() / cores)


def usable_cores() -> int:
    """The cores this process may run on (its affinity where the system tells it)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def runnable_now() -> int:
    """Tasks runnable this instant, this process's thread among them (Linux's /proc/loadavg; 0 where unknown)."""
    try:
        return int(Path("/proc/loadavg").read_text().split()[3].split("/")[0])
    except (OSError, IndexError, ValueError):
        return 0


def _tile_bytes(tiles: int) -> int:
    """What pricing pieces per tile adds past a 1,472-tile chip (a layout past PRICED_TILES is not priced)."""
    return int(TILE_BYTES * max(0.0, sqrt(min(tiles, PRICED_TILES)) - sqrt(CHIP_TILES)))


def require_run_fits(plan: Plan, options: OptimizeOptions) -> RunSize:
    """The run's size, or RunTooLarge (one line, exit 2) when it would pass the memory limit."""
    size = run_size(plan, options)
    limit = memory_limit(options.memory_limit)
    if size.bytes > limit:
        unpriced = size.bytes - size.exact_bytes
        hint = f" (with --exact-exchange never: about {size_in_words(unpriced)})" if unpriced <= limit else ""
        raise RunTooLarge(f"the run would need about {size_in_words(size.bytes)} ({size.counts}); "
                          f"--memory-limit is {limit_in_words(options.memory_limit)}{hint}")
    return size


def synth_size(values: int, steps: int, live: int) -> int:
    """The peak memory `ipuplan synth` is estimated to take making a plan of these counts."""
    return SYNTH_BASE_BYTES + SYNTH_VALUE_BYTES * values + SYNTH_STEP_BYTES * steps + SYNTH_LIVE_BYTES * live


def require_synth_fits(request: str, values: int, steps: int, live: int, limit: int | None = None) -> None:
    """RunTooLarge naming `request` (`--unroll 5000`) when the plan it asks for would pass the memory limit."""
    needed = synth_size(values, steps, live)
    if needed > memory_limit(limit):
        raise RunTooLarge(f"{request} would make a plan of ~{values:,} values and ~{live:,} live entries "
                          f"(~{size_in_words(needed)} to make); the limit is {limit_in_words(limit)}")


def memory_limit(chosen: int | None = None) -> int:
    """`chosen`, else DEFAULT_SHARE of the memory this process may use, or its address-space limit (`ulimit -v`)
    when lower: a process never holds more than it may address."""
    return chosen if chosen is not None else _default_limit()[0]


def room_for_a_copy(size: RunSize, chosen: int | None = None) -> bool:
    """Whether a forked copy of a run of `size` fits beside it. The copy checks a plan and prices its exchange: at
    most it holds the run again without the exact exchange's CP-SAT part, which is this process's (its per-tile part
    the copy may spend). The two share the memory: `chosen`, else DEFAULT_SHARE of the machine's (or cgroup's). An
    address-space limit (`ulimit -v`) is each process's own: the copy need only fit in it as the run does (doubled
    there, a 50,160-value run's 3.7 GiB estimate turned its checks off under a 6 GB limit, +3 s)."""
    both = 2 * size.bytes - _solver_pricing_bytes(size)
    if chosen is not None:
        return both <= chosen
    return both <= int(DEFAULT_SHARE * machine_memory()) and size.bytes <= _default_limit()[0]


def _solver_pricing_bytes(size: RunSize) -> int:
    """The part of `size.exact_bytes` the exact exchange's CP-SAT model takes (the rest is pricing per tile)."""
    return max(size.exact_bytes - _tile_bytes(size.tiles), 0)


def limit_in_words(chosen: int | None) -> str:
    """The limit and, when it is the default, where it comes from."""
    if chosen is not None:
        return size_in_words(chosen)
    limit, source = _default_limit()
    return f"{size_in_words(limit)} ({source})"


ADDRESS_SPACE = "the address-space limit, ulimit -v"


def _default_limit() -> tuple[int, str]:
    share = int(DEFAULT_SHARE * machine_memory())
    address_space = resource.getrlimit(resource.RLIMIT_AS)[0] if resource is not None else -1
    if address_space != getattr(resource, "RLIM_INFINITY", -1) and 0 <= address_space < share:
        return address_space, ADDRESS_SPACE
    return share, f"{DEFAULT_SHARE:.0%} of this machine's memory"


def machine_memory() -> int:
    """The memory this process may use: the machine's (MemTotal, or the pages sysconf counts), or its cgroup's
    limit when lower; unbounded where neither is known."""
    found = [size for size in (_meminfo_total(), *_cgroup_limits()) if size]
    if not found:
        try:
            found = [os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")]
        except (ValueError, OSError, AttributeError):
            return 1 << 62
    return min(found)


def _meminfo_total() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


_CGROUP_FILES = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")
"""cgroup v2 and v1, as a container sees its own group (an unset limit reads `max`, or a number past the memory)."""


def _cgroup_limits() -> list[int]:
    limits = []
    for name in _CGROUP_FILES:
        try:
            text = Path(name).read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            limits.append(int(text))
    return limits
