"""The reliability battery of issue 21: the cases the issue found, each run as the program (a fresh process, as a
user runs it), and SIGINT / SIGTERM sent at many moments of every command.

Run:  .venv/bin/python benchmarks/battery.py [--quick] [--only TEXT] [--contract]

Each run is judged by what a user would see, and the counts that must be 0 are printed last: tracebacks, exit
codes 70, exit codes the case does not allow, inputs changed, partial files (a temporary left, or an output that
is not whole), orphaned processes (a child alive after its parent exited), and --json runs that did not print
exactly one JSON object. A disk-full case needs a small tmpfs (mount, as root); without it the case is skipped
and says so. Apart, the first milliseconds of a process, while Python itself starts and before any line of
ipuplan runs, are measured: a signal there gets Python's own default (the window is printed, not counted).

Last, the contract battery of issue 35 (`--contract`: it alone), in this process: on every plan of models/ and in
every scope, the rewrites `tests/test_battery_contract.py` generates (each breaking one rule of REPLAN.md, or none)
and the optimiser's outputs, judged by `ipuplan.replan.against.against`; a table of how many were generated, how many
illegal ones were accepted or refused by another rule, and how many legal ones were refused (0 expected).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from fuzz_cases import HOSTILE, hostile

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "models" / "vit-so400m-finalist-5.json"
IPUPLAN = [str(Path(sys.executable).parent / "ipuplan")]
PYTHON_START = "signals during Python's own start"
COUNTS = ("runs", "tracebacks", "exit 70", "unexpected exit", "inputs changed", "partial files", "orphans",
          "json not one object", "misleading interrupt line")


@dataclass
class Case:
    name: str
    args: list[str]
    allowed: set[int]
    outputs: tuple[str, ...] = ()
    """Names it may write (each must be whole); every other file of the work folder must not change."""
    limit: int | None = None
    """A file size limit (bytes), as `ulimit -f`."""
    disk: int | None = None
    """The size of a small disk (tmpfs) mounted at `full/` for the run."""
    words: tuple[str, ...] = ()
    """Words its one error line must hold (when it exits non-zero)."""


@dataclass
class Tally:
    counts: Counter = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)

    def fail(self, what: str, case: str, detail: str) -> None:
        self.counts[what] += 1
        self.failures.append(f"{what}: {case}: {detail[:300]}")


def whole(path: Path) -> bool:
    """An output that is complete: JSON that parses, HTML that ends, a PNG with its end chunk, any other non-empty."""
    data = path.read_bytes()
    if path.suffix == ".json":
        try:
            json.loads(data)
        except ValueError:
            return False
        return True
    if path.suffix == ".html":
        return data.rstrip().endswith(b"</html>")
    if path.suffix == ".png":
        return data.endswith(b"IEND\xaeB`\x82")
    return bool(data)


def descendants(pid: int) -> set[tuple[int, str]]:
    """(pid, start time) of every process below `pid`, so that a reused pid is not taken for a survivor."""
    found, todo = set(), [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = (task / "children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                found.add((child, _started(child)))
                todo.append(child)
    return found


def _started(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def _alive(pid: int, started: str) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z" and fields[19] == started


def launch(case: Case, folder: Path, signal_at: float | None, signum: int) -> tuple[int, str, str, set]:
    """Run the case in `folder`; with `signal_at`, send `signum` that many seconds after the start. Returns the exit
    code, stdout, stderr, and the processes that were below it."""
    process = subprocess.Popen([*IPUPLAN, *case.args], cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    if case.limit is not None:  # at once: the process writes nothing in its first tenth of a second
        resource.prlimit(process.pid, resource.RLIMIT_FSIZE, (case.limit, case.limit))
    seen, started = set(), time.monotonic()
    while signal_at is not None and process.poll() is None and time.monotonic() - started < signal_at:
        seen |= descendants(process.pid)
        time.sleep(0.01)
    if signal_at is not None and process.poll() is None:
        seen |= descendants(process.pid)
        process.send_signal(signum)
    try:
        stdout, stderr = process.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        process.kill()
        stdout, stderr = process.communicate()
    return process.returncode, stdout, stderr, seen


def judge(case: Case, folder: Path, before: dict, result: tuple, tally: Tally, label: str) -> None:
    code, stdout, stderr, seen = result
    tally.counts["runs"] += 1
    if _before_ipuplan(stderr):
        tally.counts[PYTHON_START] += 1  # no line of ipuplan had run: Python's default
        return
    if "Traceback" in stderr:
        tally.fail("tracebacks", label, stderr[-300:])
    if code == 70:
        tally.fail("exit 70", label, stderr)
    errors = [line for line in stderr.splitlines() if not line.startswith(("  ", "note:"))]
    if code not in case.allowed:
        tally.fail("unexpected exit", label, f"exit {code}: {stderr[-300:]}")
    elif code not in (0, 4) and case.words and not all(word in " ".join(errors) for word in case.words):
        tally.fail("unexpected exit", label, f"words {case.words} not in {errors}")
    for name, data in before.items():
        if name.split("/")[0] not in case.outputs and (not (folder / name).exists()
                                                       or (folder / name).read_bytes() != data):
            tally.fail("inputs changed", label, name)
    for path in folder.rglob("*"):
        relative = str(path.relative_to(folder))
        temporary = path.name.startswith(".") or ".tmp" in path.name
        if temporary or (path.is_file() and relative not in before and not whole(path)):
            tally.fail("partial files", label, relative)
    _judge_interrupt(code, errors, folder, before, case, tally, label)
    time.sleep(0.3)
    survivors = [pid for pid, started in seen if _alive(pid, started)]
    if survivors:
        tally.fail("orphans", label, f"{len(survivors)} alive: {survivors}")
        for pid in survivors:
            os.kill(pid, signal.SIGKILL)
    if "--json" in case.args and not _one_object(stdout):
        tally.fail("json not one object", label, stdout[-300:])


def _judge_interrupt(code: int, errors: list[str], folder: Path, before: dict, case: Case, tally: Tally,
                     label: str) -> None:
    """An interrupted run says so in one line, which names what it wrote ('nothing written' only when nothing)."""
    if code not in (130, 143):
        return
    if len(errors) != 1 or not errors[0].startswith("interrupted: "):
        tally.fail("unexpected exit", label, f"not one interrupt line: {errors}")
        return
    written = [name for name in case.outputs if name != "out" and (folder / name).is_file() and name not in before]
    if written and "nothing written" in errors[0]:
        tally.fail("misleading interrupt line", label, f"{errors[0]} but {written} exist")


def _before_ipuplan(stderr: str) -> bool:
    """A traceback (or Python's fatal error) with no frame of ipuplan's own source: the signal came while Python
    itself was starting, or importing the package, before the first line of ipuplan.cli blocked it."""
    if "Traceback" not in stderr and "Fatal Python error" not in stderr:
        return False
    return not any("src/ipuplan/" in line for line in stderr.splitlines() if line.lstrip().startswith("File "))


def _one_object(stdout: str) -> bool:
    try:
        return isinstance(json.loads(stdout), dict)
    except ValueError:
        return False


def run_case(case: Case, work: Path, tally: Tally, signal_at: float | None = None, signum: int = signal.SIGINT) -> str:
    """Run `case` in a fresh copy of the work folder and judge it; returns its line for the log."""
    with tempfile.TemporaryDirectory(dir=work.parent) as name:
        folder = Path(name)
        shutil.copytree(work, folder, dirs_exist_ok=True, symlinks=True)
        before = {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
        if case.disk is not None:
            (folder / "full").mkdir()
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={case.disk}", "tmpfs", str(folder / "full")],
                           check=True)
        try:
            result = launch(case, folder, signal_at, signum)
            moment = "" if signal_at is None else f" +{signal.Signals(signum).name}@{signal_at:g}s"
            judge(case, folder, before, result, tally, case.name + moment)
        finally:
            if case.disk is not None:
                subprocess.run(["umount", str(folder / "full")], check=False)
        return f"exit {result[0]:>3}  {case.name}{moment}"


def can_mount() -> bool:
    """Whether this process may mount a small tmpfs (root in most containers)."""
    with tempfile.TemporaryDirectory() as name:
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", name], capture_output=True,
                                 check=False).returncode == 0
        if mounted:
            subprocess.run(["umount", name], check=False)
        return mounted


NUMBERS = {"budget": (0, 1), "reject padding": (1, 1), "every dimension": (2**40, 1), "surrogate": (1, 1)}
"""The number and depth each hostile family gets (default 2**47 + 3, past every bound, and 5,000 levels)."""


def prepare(work: Path) -> None:
    """The inputs every case copies: the reference plan, two synthesised ones, a folder of plans, the bad plans."""
    work.mkdir(parents=True)
    shutil.copy(REFERENCE, work / "p.json")
    for copies in (6, 57):
        subprocess.run([*IPUPLAN, "synth", "p.json", "-o", f"u{copies}.json", "--unroll", str(copies),
                        "--budget-factor", "1.5"], cwd=work, check=True, capture_output=True)
    (work / "plans").mkdir()
    for name in ("a", "b"):
        shutil.copy(REFERENCE, work / "plans" / f"{name}.json")
    (work / "bad").mkdir()
    for family in sorted(HOSTILE):
        text = hostile(family, *NUMBERS.get(family, (2**47 + 3, 5000)))
        (work / "bad" / f"{family.replace(' ', '-')}.json").write_text(text)


def bad_input_cases(quick: bool) -> list[Case]:
    """Item 4: each hostile family under every command: a refusal (2), a mismatch (check: 1), or, where the command
    does not read what is wrong, success; explore makes it a row (4)."""
    commands = {
        "check": ([], {1, 2}), "show": ([], {0, 2}), "graph": ([], {0, 2}), "report": (["-o", "r.html"], {0, 2}),
        "optimize": (["-o", "o.json", "--json", "--time-limit", "5"], {2}), "sweep": (["--json", "--points", "2"], {2}),
        "explore": (["-o", "out", "--json", "--time-limit", "5"], {4}),
    }
    if quick:
        commands = {name: commands[name] for name in ("check", "optimize", "explore")}
    cases = []
    for family in sorted(HOSTILE):
        plan = f"bad/{family.replace(' ', '-')}.json"
        for command, (extra, allowed) in commands.items():
            outputs = ("r.html", "o.json", "out")
            cases.append(Case(f"{command} {family}", [command, plan, *extra], allowed, outputs=outputs))
    return cases


def path_cases() -> list[Case]:
    """Items 1, 2 and 4 (explore -o p.json): every output is checked before any work, exit 2."""
    optimize = ["optimize", "p.json", "-o", "o.json"]
    return [
        Case("dump is the input", [*optimize, "--dump-model", "p.json"], {2}, words=("--dump-model", "input")),
        Case("dump exists", [*optimize, "--dump-model", "u6.json"], {2}, words=("already exists",)),
        Case("dump in a missing directory", [*optimize, "--dump-model", "no/m.pbtxt"], {2}, words=("does not exist",)),
        Case("dump is a directory", [*optimize, "--dump-model", "plans"], {2}, words=("is a directory",)),
        Case("report is the plan", [*optimize, "--report", "o.json"], {2}, words=("named by both",)),
        Case("report is the input", [*optimize, "--report", "p.json"], {2}, words=("input",)),
        Case("png is the page", ["report", "p.json", "-o", "r.html", "--png", "r.html"], {2}, words=("named by both",)),
        Case("explore into an input", ["explore", "p.json", "-o", "p.json", "--json"], {2}, words=("not a directory",)),
        Case("explore into the inputs' folder", ["explore", "plans", "-o", "plans"], {2}, words=("input plans",)),
        Case("pin file missing", [*optimize, "--pin-file", "no.json", "--json"], {2}, words=("pin file",)),
    ]


def report_sizes(work: Path) -> tuple[int, int]:
    """The sizes of the page and the PNG of `report p.json -o r.html --png t.png`, from a run that succeeds (in a
    copy of the work folder)."""
    with tempfile.TemporaryDirectory(dir=work.parent) as name:
        folder = Path(name)
        shutil.copy(work / "p.json", folder / "p.json")
        subprocess.run([*IPUPLAN, "report", "p.json", "-o", "r.html", "--png", "t.png"], cwd=folder, check=True,
                       capture_output=True)
        return (folder / "r.html").stat().st_size, (folder / "t.png").stat().st_size


def png_limit(work: Path) -> int:
    """A file size limit the page fits under and the PNG does not (halfway between the two), so that the write that
    fails is the PNG's, after the page was written whole."""
    page, png = report_sizes(work)
    if png < page + 8192:
        raise SystemExit(f"battery: the PNG ({png:,} bytes) is not larger than the page ({page:,} bytes) by enough "
                         "for a size limit between them: 'ulimit: the png' needs another setup")
    return (page + png) // 2


def write_cases(work: Path) -> list[Case]:
    """Item 3: a write that fails is exit 2 naming the file; the outputs before it are whole, nothing partial."""
    optimize = ["optimize", "p.json", "-o", "o.json", "--workers", "1", "--json"]
    return [
        Case("ulimit: the plan", optimize, {2}, outputs=("o.json",), limit=150_000, words=("o.json: cannot write",)),
        Case("ulimit: the dump", [*optimize, "--dump-model", "m.pbtxt"], {2}, outputs=("o.json", "m.pbtxt"),
             limit=60_000, words=("m.pbtxt: cannot write",)),
        Case("ulimit: the png", ["report", "p.json", "-o", "r.html", "--png", "t.png"], {2},
             outputs=("r.html", "t.png"), limit=png_limit(work),
             words=("t.png: cannot write", "r.html written before")),
        Case("ulimit: explore", ["explore", "plans", "-o", "out", "--json", "--workers", "1"], {4}, outputs=("out",),
             limit=100_000),
        Case("disk full: the plan", ["optimize", "p.json", "-o", "full/o.json", "--json"], {2}, outputs=("full",),
             disk=100_000, words=("full/o.json: cannot write: No space left",)),
        Case("disk full: the dump", ["optimize", "p.json", "-o", "o.json", "--dump-model", "full/m.pbtxt"], {2},
             outputs=("o.json", "full"), disk=100_000, words=("full/m.pbtxt: cannot write: No space left",)),
    ]


def other_cases() -> list[Case]:
    """Items 9-14 as the program runs them."""
    return [
        Case("greedy over the budgets", ["optimize", "p.json", "-o", "o.json", "--solver", "greedy", "--budget",
                                         "120000", "--interleaved-budget", "60000", "--json"], {3}, words=("greedy",)),
        Case("budget 0 in the file", ["optimize", "bad/budget.json", "-o", "o.json"], {2},
             words=("budget_bytes", "support_reserve_bytes")),
        Case("reject padding", ["check", "bad/reject-padding.json"], {1}),
        Case("ray unreachable", ["explore", "p.json", "-o", "out", "--executor", "ray", "--address", "127.0.0.1:1",
                                 "--json"], {2}, words=("cannot reach the Ray cluster",)),
        Case("sweep of 10,032 values", ["sweep", "u57.json", "--time-limit", "5", "--points", "3", "--json"], {0, 3}),
    ]


def signal_cases() -> list[Case]:
    """Items 7 and 8: every command, to be interrupted at many moments (import, load, solve, write)."""
    return [
        Case("check", ["check", "u6.json"], set()),
        Case("show", ["show", "u6.json"], set()),
        Case("graph", ["graph", "u6.json"], set()),
        Case("diff", ["diff", "u6.json", "u6.json"], set()),
        Case("optimize 10,032 values", ["optimize", "u57.json", "-o", "o.json", "--time-limit", "60"], set(),
             outputs=("o.json",)),
        Case("optimize --json, three outputs", ["optimize", "p.json", "-o", "o.json", "--report", "r.html",
                                                "--dump-model", "m.pbtxt", "--workers", "1", "--json"], set(),
             outputs=("o.json", "r.html", "m.pbtxt")),
        Case("synth", ["synth", "p.json", "-o", "s.json", "--unroll", "30"], set(), outputs=("s.json",)),
        Case("report --png", ["report", "u6.json", "-o", "r.html", "--png", "t.png"], set(),
             outputs=("r.html", "t.png")),
        Case("sweep --json", ["sweep", "p.json", "--points", "6", "--json"], set()),
        Case("explore --jobs 2", ["explore", "plans", "-o", "out", "--jobs", "2", "--scope", "kernels",
                                  "--time-limit", "30"], set(), outputs=("out",)),
        Case("explore --json", ["explore", "plans", "-o", "out", "--json", "--time-limit", "30"], set(),
             outputs=("out",)),
    ]


UNBOUNDED_SECONDS = 10.0
"""The most a refusal of issue 35's item 4 may take, Python's start included (each is refused before any work)."""


def unbounded_inputs(work: Path) -> Path:
    """Issue 35, item 4's inputs, beside the work folder (a copy of it would read the FIFO, and write the sparse
    file out whole): a FIFO nobody writes into, a sparse file one byte past the 1 GiB input limit, and the
    reference plan on 2**20 tiles."""
    folder = work.parent / "unbounded"
    folder.mkdir(exist_ok=True)
    os.mkfifo(folder / "fifo.json")
    with open(folder / "big.json", "wb") as big:
        big.truncate((1 << 30) + 1)
    wide = json.loads(REFERENCE.read_text())
    wide["tile_count"] = 1 << 20
    (folder / "wide.json").write_text(json.dumps(wide))
    return folder


def unbounded_cases(folder: Path) -> list[Case]:
    """Issue 35, item 4: nothing read or built is unbounded. A device, a FIFO with no writer and a file past the
    input limit are refused unread; synth and every optimise run past the memory limit are refused before they
    build anything: one line, exit 2 (explore: a failed row, 4), within UNBOUNDED_SECONDS."""
    fifo, big, wide = (str(folder / name) for name in ("fifo.json", "big.json", "wide.json"))
    cases = []
    for command, extra in (("check", []), ("show", []), ("optimize", ["-o", "o.json", "--json"])):
        cases += [
            Case(f"{command} /dev/zero", [command, "/dev/zero", *extra], {2}, outputs=("o.json",),
                 words=("/dev/zero: not a plan file: a character device",)),
            Case(f"{command} a FIFO with no writer", [command, fifo, *extra], {2}, outputs=("o.json",),
                 words=("no writer",)),
            Case(f"{command} 1 GiB + 1 byte", [command, big, *extra], {2}, outputs=("o.json",),
                 words=("larger than the 1 GiB input limit",)),
        ]
    synth = ["synth", "p.json", "-o", "s.json"]
    return cases + [
        Case("synth --unroll 5000 --memory-limit 1G", [*synth, "--unroll", "5000", "--memory-limit", "1G"], {2},
             outputs=("s.json",), words=("--unroll 5000", "~880,000 values", "the limit is 1 GiB")),
        Case("synth --layers 100000", [*synth, "--layers", "100000"], {2}, outputs=("s.json",),
             words=("--layers 100000", "synth makes at most")),
        Case("optimize --memory-limit 1M", ["optimize", "p.json", "-o", "o.json", "--memory-limit", "1M", "--json"],
             {2}, outputs=("o.json",), words=("the run would need about", "--memory-limit is 1 MiB")),
        Case("sweep --memory-limit 1M", ["sweep", "u57.json", "--memory-limit", "1M"], {2},
             words=("10,032 values", "--memory-limit is 1 MiB")),
        Case("explore --memory-limit 1M", ["explore", "plans", "-o", "out", "--memory-limit", "1M", "--json"], {4},
             outputs=("out",)),
        Case("optimize 2**20 tiles --memory-limit 2G", ["optimize", wide, "-o", "o.json", "--memory-limit", "2G"], {2},
             outputs=("o.json",), words=("1,048,576 tiles", "--memory-limit is 2 GiB")),
    ]


def run_unbounded(work: Path, tally: Tally, chosen) -> None:
    """Each case of `unbounded_cases`, judged as every case is, and failed when it took past UNBOUNDED_SECONDS."""
    for case in filter(chosen, unbounded_cases(unbounded_inputs(work))):
        started = time.perf_counter()
        line = run_case(case, work, tally)
        seconds = time.perf_counter() - started
        if seconds > UNBOUNDED_SECONDS:
            tally.fail("unexpected exit", case.name, f"took {seconds:.1f} s (at most {UNBOUNDED_SECONDS:g})")
        print(f"{line}  ({seconds:.1f} s)", flush=True)


def python_start_window(work: Path, tries: int) -> str:
    """How long after exec a signal still meets Python's own start (before ipuplan's first line): the latest moment
    at which one gave a traceback, or killed the process silently, over `tries` runs at 2 ms steps."""
    latest, kinds = 0.0, Counter()
    for step in range(tries):
        delay = step * 0.002
        process = subprocess.Popen([*IPUPLAN, "check", "p.json"], cwd=work, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
        time.sleep(delay)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate()
        kind = ("python's traceback" if "Traceback" in stderr or "Fatal Python error" in stderr
                else "killed before python" if process.returncode < 0 else f"exit {process.returncode}")
        kinds[kind] += 1
        if kind != f"exit {process.returncode}":
            latest = delay
    return f"{dict(kinds)}; the last signal Python itself took came {latest * 1000:.0f} ms after exec"


CONTRACT_COLUMNS = ("illegal", "accepted", "wrong rule", "legal", "refused")


def contract_battery() -> list[str]:
    """Issue 35's contract battery over models/: per plan and scope, the generated rewrites and the optimiser's
    outputs (one worker) judged by `against`, printed as a table; returns every failure (0 expected)."""
    from test_battery_contract import SCOPES, Subject, output_rewrites, run_battery  # needs pytest: only here

    from ipuplan import InfeasibleBudget, load_plan
    from ipuplan.replan.pipeline import optimize

    print("\ncontract battery (issue 35): rewrites of each plan judged by `against` in each scope")
    print(f"  {'plan':<34} {'scope':<8} " + " ".join(f"{c:>10}" for c in CONTRACT_COLUMNS))
    failures, started = [], time.perf_counter()
    for path in sorted((ROOT / "models").glob("*.json")):
        subject, outputs = Subject(load_plan(path)), {}
        for scope in SCOPES:
            try:
                outputs[scope] = optimize(subject.plan, workers=1, time_limit=10, scope=scope).plan
            except InfeasibleBudget:
                outputs[scope] = None  # the budgets cannot be met: no output to judge
        for scope, tally in run_battery(subject, extra=output_rewrites(outputs)).items():
            counts = (tally.illegal, tally.illegal_accepted, tally.wrong_rule, tally.legal, tally.legal_refused)
            print(f"  {path.name:<34} {scope:<8} " + " ".join(f"{n:>10}" for n in counts), flush=True)
            failures += [f"{path.name}: {failure}" for failure in tally.failures]
    print(f"  {len(failures)} failures in {time.perf_counter() - started:.0f} s")
    for failure in failures:
        print(f"  FAIL contract: {failure[:300]}")
    return failures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer commands per bad plan and fewer moments")
    parser.add_argument("--only", metavar="TEXT", help="only the cases whose name holds TEXT (and no measure of "
                                                       "Python's start)")
    parser.add_argument("--contract", action="store_true", help="only the contract battery of issue 35 (in-process)")
    arguments = parser.parse_args()
    if arguments.contract:
        sys.exit(1 if contract_battery() else 0)
    chosen = (lambda case: arguments.only in case.name) if arguments.only else (lambda case: True)
    tally, started = Tally(), time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ipuplan-battery-") as name:
        work = Path(name) / "work"
        prepare(work)
        mount = can_mount()
        for case in [*bad_input_cases(arguments.quick), *path_cases(), *write_cases(work), *other_cases()]:
            if not chosen(case):
                continue
            if case.disk is not None and not mount:
                print(f"skipped   {case.name}: cannot mount a tmpfs here (needs root)")
                continue
            print(run_case(case, work, tally), flush=True)
        run_unbounded(work, tally, chosen)
        moments = (0.3, 1.5) if arguments.quick else (0.1, 0.3, 0.7, 1.5, 3.0, 6.0)
        for case in filter(chosen, signal_cases()):
            for signum, code in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
                case.allowed = {0, code}
                for moment in moments:
                    print(run_case(case, work, tally, moment, signum), flush=True)
        window = "not measured (--only)" if arguments.only else python_start_window(work, 20 if arguments.quick else 40)
    print(f"\n{tally.counts['runs']} runs in {time.perf_counter() - started:.0f} s")
    for what in COUNTS[1:]:
        print(f"  {what:<26} {tally.counts[what]}")
    early = tally.counts[PYTHON_START]
    print(f"  signals during Python's own start (not counted): {early} of the runs above; at 2 ms steps from exec: "
          f"{window}")
    for failure in tally.failures:
        print(f"  FAIL {failure}")
    contract = [] if arguments.only else contract_battery()
    sys.exit(1 if tally.failures or contract else 0)


if __name__ == "__main__":
    main()
