"""The process's signals before a command runs (`cli.signals`): while the command loads, SIGINT or SIGTERM ends it at
once with one line (and, with `--json`, one object); a program that only imports the CLI gets its signals back.
Signals during a command are `cli.common.Command`'s (tests/test_common.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from reference import PYTHON, REFERENCE


@pytest.mark.parametrize("delay", [0.15, 0.4])
def test_a_signal_while_the_command_loads_is_one_line(delay):
    """Item 7: in the first 0.2-0.7 s (while importing) Ctrl-C gave a traceback or exit 70. (The interpreter's
    own start, before any of ipuplan runs, is Python's: benchmarks/battery.py measures how long it is.)"""
    process = subprocess.Popen([*PYTHON, "check", str(REFERENCE)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    time.sleep(delay)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode in (0, 130, -signal.SIGINT) and "Traceback" not in stderr, stderr
    if process.returncode == 130:
        assert stderr.splitlines() == ["interrupted: nothing written"]


def test_a_program_that_imports_the_cli_keeps_its_signals():
    """The command takes SIGINT and SIGTERM from its first line; a program that only imports it gets them back."""
    code = "import signal, ipuplan.cli; print(sorted(signal.pthread_sigmask(signal.SIG_BLOCK, [])))"
    process = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert process.stdout.strip() == "[]"


@pytest.mark.parametrize(("signum", "as_json"), [(signal.SIGINT, True), (signal.SIGTERM, False)])
def test_a_signal_taken_while_loading_is_one_line_and_with_json_one_object(signum, as_json):
    """What the signal thread does with a signal that comes while the command loads (nothing is written yet)."""
    argv = ["ipuplan", "check", "plan.json", *(["--json"] if as_json else [])]
    code = f"import sys; sys.argv = {argv!r}; from ipuplan.cli import signals; signals._quit_while_importing({signum})"
    process = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert process.returncode == 128 + signum and process.stderr == "interrupted: nothing written\n"
    if as_json:
        assert json.loads(process.stdout) == {"status": "interrupted", "error": "interrupted: nothing written"}
    else:
        assert process.stdout == ""
