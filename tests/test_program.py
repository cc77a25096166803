"""The program (`cli.program`): `ipuplan` and `python -m ipuplan` run the typer app with a usage error as one line
(exit 2), no arguments as the help, an interrupt while typer parses the arguments as one line (exit 130), and only
the program itself, not a program that imports it, takes the signals."""

from __future__ import annotations

import os
import subprocess
import sys

from reference import PYTHON, REFERENCE, error_line, one_line_error, run

from ipuplan.cli.program import PROGRAMS, the_program


def test_an_interrupt_while_typer_parses_the_arguments_is_one_line(monkeypatch):
    """The CI run of 9f6d670: Ctrl-C at 0.4 s exited 130 with nothing said. Typer (0.29) turns a KeyboardInterrupt
    raised while it builds the command's context, outside the command, into a silent Exit(130)."""
    import importlib

    from ipuplan import cli

    click = importlib.import_module(cli.click_errors.__name__.rpartition(".")[0])  # the click typer uses
    real = click.Context.__init__

    def interrupted_context(self, *args, **kwargs):
        real(self, *args, **kwargs)
        if self.parent is not None:
            raise KeyboardInterrupt

    monkeypatch.setattr(click.Context, "__init__", interrupted_context)
    code, _, stderr = run("check", str(REFERENCE))
    assert code == 130 and "Traceback" not in stderr and error_line(stderr) == "interrupted: nothing written"


def test_version_help_and_python_m():
    code, stdout, _ = run("--version")
    assert code == 0 and stdout.startswith("ipuplan ")
    process = subprocess.run([*PYTHON, "optimize", "-h"], capture_output=True, text=True, check=False,
                             env={**os.environ, "COLUMNS": "80"})
    assert process.returncode == 0
    assert "--interleaved-budget" in process.stdout and "ipuplan[highs]" in process.stdout
    assert max(len(line) for line in process.stdout.splitlines()) <= 80


def test_usage_errors_are_one_line(tmp_path):
    code, _, stderr = run("optimize", str(REFERENCE), "-o", str(tmp_path / "o.json"), "--scope", "everything")
    assert code == 2
    one_line_error(stderr, "everything", "storage", "kernels")
    code, _, stderr = run("frobnicate")
    assert code == 2
    one_line_error(stderr, "frobnicate")


def test_no_arguments_print_the_help_and_exit_2():
    code, stdout, stderr = run()
    assert code == 2 and stdout == "" and "Usage: ipuplan" in stderr
    assert all(command in stderr for command in ("check", "optimize", "sweep", "explore", "report"))


def test_only_the_program_itself_takes_the_signals():
    assert PROGRAMS == ("ipuplan.__main__", "ipuplan.cli.__main__")
    assert not the_program()  # pytest is the program here: it only imports the CLI
    code = "import sys; sys.argv[0] = {!r}; from ipuplan.cli.program import the_program; print(the_program())"
    found = [subprocess.run([sys.executable, "-c", code.format(name)], capture_output=True, text=True,
                            check=True).stdout.strip() for name in ("/usr/local/bin/ipuplan", "-c")]
    assert found == ["True", "False"]  # the `ipuplan` script is the program; `python -c` that imports it is not
