"""``python -m torchgen_ah.train_generic``: the documented command-line name of ``torchgen_ah.training.train_generic``."""

import sys

from torchgen_ah.training.train_generic import main

if __name__ == "__main__":
    sys.exit(main())
