"""``python -m torchgen_ah.train_generic``: the documented command-line name of ``torchgen_ah.training.train_generic``.

It also keeps ``train_from_log`` importable here, where ``ah_plugin.demo`` imports it from.
"""

import sys

from torchgen_ah.training.train_generic import main, train_from_log

__all__ = ["main", "train_from_log"]

if __name__ == "__main__":
    sys.exit(main())
