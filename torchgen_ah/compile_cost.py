"""``python -m torchgen_ah.compile_cost``: the documented command-line name of ``torchgen_ah.evaluation.compile_cost``."""

import sys

from torchgen_ah.evaluation.compile_cost import main

if __name__ == "__main__":
    sys.exit(main())
