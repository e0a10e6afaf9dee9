"""``python -m torchgen_ah.model_gemms``: the documented command-line name of ``torchgen_ah.datagen.model_gemms``."""

import sys

from torchgen_ah.datagen.model_gemms import main

if __name__ == "__main__":
    sys.exit(main())
