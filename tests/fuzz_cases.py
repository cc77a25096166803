"""The CLI's promises under random damage, shared by the short fuzz in the suite and the long one in
benchmarks/fuzz_cli.py: an exit code from the documented set (never 70), at most one error line on stderr
and no traceback, the input unchanged, no file left behind but a complete output, and one JSON object from
every --json run. The damage: any field replaced, any character changed, and the hostile families issue 21
found (numbers past what a tile or the solver holds, deep nesting, lone surrogates, unreadable Gemm fields,
empty timelines, padding a Reject axis needs, contradicting budgets); the output faults: bad paths, and two
outputs (or an output and an input) that are one file."""

from __future__ import annotations

import json
import re
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from io import StringIO
from pathlib import Path

from hypothesis import strategies as st
from reference import REFERENCE

from ipuplan import cli
from ipuplan.cli import main


def documented_exit_codes(text: str) -> frozenset[int]:
    """The codes of the first sentence that begins `Exit codes:` (each number after a colon or a comma)."""
    sentence = " ".join(text.split()).split("Exit codes:", 1)[1].split(". ", 1)[0]
    return frozenset(int(code) for code in re.findall(r"(?:^|, )(\d+) ", sentence.strip()))


EXIT_CODES = documented_exit_codes(cli.__doc__)
"""What the command's own documentation promises."""

TEXT = REFERENCE.read_text()
RAW = json.loads(TEXT)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)


def _paths(node, prefix=()):
    if isinstance(node, dict):
        for key, value in node.items():
            yield (*prefix, key)
            yield from _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node[:3]):
            yield (*prefix, index)
            yield from _paths(value, (*prefix, index))


PATHS = list(_paths({k: v for k, v in RAW.items() if k != "timeline"})) + list(
    _paths({"timeline": {"values": RAW["timeline"]["values"][40:50], "steps": RAW["timeline"]["steps"][10:14]}})
)
OFFSETS = {"values": 40, "steps": 10}


def replaced(path: tuple, value) -> str:
    """The reference plan with one field (of the sampled values and steps) replaced."""
    raw = json.loads(TEXT)
    keys = list(path)
    if keys[0] == "timeline" and len(keys) > 2:
        keys[2] += OFFSETS[keys[1]]
    node = raw
    for key in keys[:-1]:
        node = node[key]
    node[keys[-1]] = value
    return json.dumps(raw, separators=(",", ":"))


def damaged(position: int, insert: str) -> str:
    return TEXT[:position] + insert + TEXT[position + 1 :]


def _gemm(raw: dict) -> dict:
    return next(step for step in raw["timeline"]["steps"] if step["operation"].startswith("Gemm {"))


def _nested(depth: int) -> str:
    return "Layout { order: " + "Some(" * depth + "X" + ")" * depth + " }"


HOSTILE = {
    "dimension": lambda raw, n, d: raw["timeline"]["values"][84]["shape"].__setitem__(0, n),
    "every dimension": lambda raw, n, d: raw["timeline"]["values"][84].update(shape=[n % 2**42 + 1] * 3),
    "copies": lambda raw, n, d: raw["timeline"]["values"][84].update(copies=n),
    "scratch": lambda raw, n, d: raw["timeline"]["steps"][10]["scratch"].update(standard=n),
    "tile count": lambda raw, n, d: raw.update(tile_count=n),
    "budget": lambda raw, n, d: raw.update(budget_bytes=n % 2**41),
    "layout number": lambda raw, n, d: raw["timeline"]["values"][84].update(
        layout=raw["timeline"]["values"][84]["layout"].replace("padding_multiple: 384,", f"padding_multiple: {n},")),
    "nesting": lambda raw, n, d: raw["timeline"]["values"][84].update(layout=_nested(d)),
    "surrogate": lambda raw, n, d: raw["timeline"]["values"][84].update(name="a\ud800"[: 1 + d % 2]),
    "gemm field": lambda raw, n, d: _gemm(raw).update(operation=re.sub(
        r"inner_block: \d+", f"inner_block: {('big', n, -n, 0)[d % 4]}", _gemm(raw)["operation"])),
    "no steps": lambda raw, n, d: raw["timeline"].update(steps=[]),
    "no values": lambda raw, n, d: raw["timeline"].update(values=[]),
    "reject padding": lambda raw, n, d: raw["timeline"]["values"][36].update(shape=[1, 1, 1152 + n % 8]),
}
"""Issue 21's families of bad input, each with a number `n` and a depth `d` drawn by the fuzz."""


def hostile(family: str, number: int, depth: int) -> str:
    raw = json.loads(TEXT)
    HOSTILE[family](raw, number, depth)
    return json.dumps(raw, separators=(",", ":"))


plan_texts = st.one_of(
    st.builds(replaced, st.sampled_from(PATHS), json_values),
    st.builds(damaged, st.integers(0, len(TEXT) - 1), st.text(max_size=3)),
    st.builds(hostile, st.sampled_from(sorted(HOSTILE)), st.integers(0, 2**70), st.integers(1, 6000)),
    st.just(TEXT),
)
OUTPUT_FAULTS = ("fine", "missing directory", "a directory", "the input", "exists", "exists, forced", "/proc", "empty",
                 "report is the output", "dump is the input", "dump exists", "dump in a missing directory")
COMMANDS = ("check", "optimize", "show", "graph", "report", "explore")


def output_argument(fault: str, folder: Path, plan: Path, command: str) -> list[str]:
    """The output options of `command` with `fault`; explore's -o is a folder (a new one, when fine)."""
    fine = folder / ("out" if command == "explore" else "out.json")
    target = {
        "missing directory": folder / "missing" / "out.json",
        "a directory": folder,
        "the input": plan,
        "exists": folder / "old.json",
        "exists, forced": folder / "old.json",
        "/proc": Path("/proc/ipuplan-fuzz.json"),
        "empty": "",
    }.get(fault, fine)
    extra = {
        "exists, forced": ["--force"],
        "report is the output": ["--report", str(target)],
        "dump is the input": ["--dump-model", str(plan)],
        "dump exists": ["--dump-model", str(folder / "old.json")],
        "dump in a missing directory": ["--dump-model", str(folder / "missing" / "m.pbtxt")],
    }.get(fault, [])
    if command != "optimize" and fault.startswith(("report", "dump")):
        extra = []  # only optimize takes --report and --dump-model
    return ["-o", str(target), *extra]


OPTIONS = {"optimize": ["--json", "--time-limit", "0.5", "--workers", "1"],
           "explore": ["--json", "--time-limit", "0.5", "--workers", "1"], "report": []}
"""What each command that writes is given besides its outputs."""


def expected_writes(command: str, fault: str, code: int) -> set[str]:
    """The names a run may add to the folder: its complete outputs, and only when it succeeded (explore: also when
    some plans failed, exit 4: the folder it made, with their rows)."""
    if command not in OPTIONS or code not in (0, 4):
        return set()
    if command == "explore":
        return {"out", "missing"}
    if fault == "exists, forced":
        return {"old.json"}
    only_optimize = fault.startswith(("report", "dump")) and command != "optimize"  # the others write just -o
    return {"out.json"} if fault == "fine" or only_optimize else set()


def cli_case(text: str, command: str, fault: str) -> None:
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        plan = folder / "plan.json"
        plan.write_text(text, errors="surrogatepass")
        (folder / "old.json").write_text("old")
        before = {p.name: p.read_bytes() for p in folder.iterdir()}
        arguments = [command, str(plan)]
        if command in OPTIONS:
            arguments += [*output_argument(fault, folder, plan, command), *OPTIONS[command]]
        out, err = StringIO(), StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            code = main(arguments)
        errors = [line for line in err.getvalue().splitlines() if not line.startswith("  ")]
        assert code in EXIT_CODES and code != 70, (code, err.getvalue())
        assert "Traceback" not in err.getvalue() and len(errors) <= 1, err.getvalue()
        after = {p.name: p.read_bytes() if p.is_file() else b"" for p in folder.iterdir()}
        written = expected_writes(command, fault, code)
        assert set(after) <= set(before) | written, (set(after), code, err.getvalue())
        assert all(after[n] == before[n] for n in before if n not in written)
        if "--json" in arguments:
            json.loads(out.getvalue())  # one object, whatever happened
