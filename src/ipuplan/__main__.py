"""`python -m ipuplan`: the same command as `ipuplan`."""

import sys

from ipuplan.cli import main

sys.exit(main())
