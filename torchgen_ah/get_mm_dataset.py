"""``python -m torchgen_ah.get_mm_dataset``: the documented command-line name of ``torchgen_ah.data.official_datasets``."""

import sys

from torchgen_ah.data.official_datasets import main

if __name__ == "__main__":
    sys.exit(main())
