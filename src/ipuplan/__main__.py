"""`python -m ipuplan`: the same command as `ipuplan`."""

from ipuplan.cli import entry_point

entry_point()
