"""`python -m experiments run CONFIG ...`: the same as `raso experiment run CONFIG ...`."""

import sys

from experiments.cli import main

sys.exit(main())
