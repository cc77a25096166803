"""`python -m ipuplan.cli`: the program."""

from ipuplan.cli.program import entry_point

entry_point()
