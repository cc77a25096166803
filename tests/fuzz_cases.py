"""The CLI's promises under random damage, shared by the short fuzz in the suite and the long one in
benchmarks/fuzz_cli.py: an exit code from the documented set, at most one error line on stderr and no
traceback, the input unchanged, and no file left behind but a complete output."""

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


plan_texts = st.one_of(
    st.builds(replaced, st.sampled_from(PATHS), json_values),
    st.builds(damaged, st.integers(0, len(TEXT) - 1), st.text(max_size=3)),
    st.just(TEXT),
)
OUTPUT_FAULTS = ("fine", "missing directory", "a directory", "the input", "exists", "exists, forced", "/proc", "empty")
COMMANDS = ("check", "optimize", "show", "graph")


def output_argument(fault: str, folder: Path, plan: Path) -> list[str]:
    target = {
        "fine": folder / "out.json",
        "missing directory": folder / "missing" / "out.json",
        "a directory": folder,
        "the input": plan,
        "exists": folder / "old.json",
        "exists, forced": folder / "old.json",
        "/proc": Path("/proc/ipuplan-fuzz.json"),
        "empty": "",
    }[fault]
    return ["-o", str(target), *(["--force"] if fault == "exists, forced" else [])]


def cli_case(text: str, command: str, fault: str) -> None:
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        plan = folder / "plan.json"
        plan.write_text(text)
        (folder / "old.json").write_text("old")
        before = {p.name: p.read_bytes() for p in folder.iterdir()}
        arguments = [command, str(plan)]
        if command == "optimize":
            arguments += [*output_argument(fault, folder, plan), "--json", "--time-limit", "0.5", "--workers", "1"]
        out, err = StringIO(), StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            code = main(arguments)
        errors = [line for line in err.getvalue().splitlines() if not line.startswith("  ")]
        assert code in EXIT_CODES, (code, err.getvalue())
        assert "Traceback" not in err.getvalue() and len(errors) <= 1, err.getvalue()
        after = {p.name: p.read_bytes() for p in folder.iterdir()}
        written = {"out.json"} if command == "optimize" and fault == "fine" and code == 0 else set()
        if fault == "exists, forced" and code == 0:
            written = {"old.json"}
        assert set(after) == set(before) | written, (set(after), code, err.getvalue())
        assert all(after[n] == before[n] for n in before if n not in written)
        if command == "optimize":
            json.loads(out.getvalue())  # --json prints one object, whatever happened
