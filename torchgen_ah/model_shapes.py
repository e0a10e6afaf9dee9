"""``python -m torchgen_ah.model_shapes``: the documented command-line name of ``torchgen_ah.datagen.model_shapes``."""

import sys

from torchgen_ah.datagen.model_shapes import main

if __name__ == "__main__":
    sys.exit(main())
