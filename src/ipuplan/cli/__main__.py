"""`python -m ipuplan.cli`: the program."""

import sys

from ipuplan.cli.program import main

sys.exit(main())
