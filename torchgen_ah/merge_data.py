"""``python -m torchgen_ah.merge_data``: the documented command-line name of ``torchgen_ah.data.merge``."""

import sys

from torchgen_ah.data.merge import main

if __name__ == "__main__":
    sys.exit(main())
