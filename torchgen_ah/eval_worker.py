"""``python -m torchgen_ah.eval_worker``: the documented command-line name of ``torchgen_ah.evaluation.eval_worker``."""

import sys

from torchgen_ah.evaluation.eval_worker import main

if __name__ == "__main__":
    sys.exit(main())
