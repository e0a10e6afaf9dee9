"""Where tests find the official A100/H100 zips, and the sentence they skip with when they cannot.

The same places as ``python -m torchgen_ah.get_mm_dataset`` reads and writes: the folder named by
``AH_OFFICIAL_DATA``, else ``datasets/`` of this repository once that command has downloaded them there.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from torchgen_ah.data.official_datasets import DATASETS, DEFAULT_OUT, ENV_SOURCE

REPO = Path(__file__).resolve().parents[1]
ZIPS = tuple(zip_name for zip_name, _ in DATASETS.values())


def _holds_zips(folder) -> bool:
    return bool(folder) and all((Path(folder) / name).is_file() for name in ZIPS)


def folder() -> Path | None:
    """The folder holding a100_mm.zip and h100_mm.zip, or None."""
    for candidate in (os.environ.get(ENV_SOURCE, "").strip(), REPO / DEFAULT_OUT):
        if _holds_zips(candidate):
            return Path(candidate)
    return None


SKIP_REASON = (f"needs the official A100/H100 data ({', '.join(ZIPS)}): run `python -m torchgen_ah.get_mm_dataset` "
               f"once (downloads them into {DEFAULT_OUT}/), or set {ENV_SOURCE} to a folder holding them")
if os.environ.get(ENV_SOURCE, "").strip() and not _holds_zips(os.environ[ENV_SOURCE].strip()):
    SKIP_REASON = f"{ENV_SOURCE}={os.environ[ENV_SOURCE]} does not hold {', '.join(ZIPS)}; " + SKIP_REASON

OFFICIAL = folder()
needs_official = pytest.mark.skipif(OFFICIAL is None, reason=SKIP_REASON)
