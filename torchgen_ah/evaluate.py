"""``python -m torchgen_ah.evaluate``: the documented command-line name of ``torchgen_ah.evaluation.evaluate``."""

import sys

from torchgen_ah.evaluation.evaluate import main

if __name__ == "__main__":
    sys.exit(main())
