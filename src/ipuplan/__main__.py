"""`python -m ipuplan`: the same command as `ipuplan`."""

from ipuplan.cli import main

main()
