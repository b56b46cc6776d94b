"""``python -m benchmarks``: run every measure and write ``benchmarks/results/``."""

import sys

from benchmarks.runner import main

sys.exit(main())
