"""``python -m torchgen_ah.e2e_models``: the documented command-line name of ``torchgen_ah.evaluation.e2e_models``."""

import sys

from torchgen_ah.evaluation.e2e_models import main

if __name__ == "__main__":
    sys.exit(main())
