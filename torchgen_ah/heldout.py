"""Deterministic splits by input, from the sha1 of the input key.

The quality bar of issue 2 holds an input out when ``int(sha1(key).hexdigest(), 16) % 5 == 0``, where the
key is the input's feature values joined with "," as they appear in the log row. Splitting by a hash of
the key (never by row) keeps every measurement of one input on one side, in every file, on every run.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import numpy as np

HOLDOUTS = ("none", "sha1mod5")


def key_buckets(keys: Iterable[str], modulus: int) -> np.ndarray:
    """``int(sha1(key), 16) % modulus`` for every key (int64 array)."""
    return np.fromiter(
        (int(hashlib.sha1(k.encode()).hexdigest(), 16) % modulus for k in keys), dtype=np.int64
    )


def is_heldout(keys: Iterable[str], holdout: str) -> np.ndarray:
    """Boolean mask of the inputs held out from training under the named protocol.

    "none": nothing held out. "sha1mod5": the issue-2 protocol (bucket 0 of sha1 % 5).
    """
    keys = list(keys)
    if holdout == "none":
        return np.zeros(len(keys), dtype=bool)
    if holdout == "sha1mod5":
        return key_buckets(keys, 5) == 0
    raise ValueError(f"unknown holdout {holdout!r}; expected one of {HOLDOUTS}")


VALIDATION_FOLDS = (1, 2, 3, 4)


def validation_fold(keys: Iterable[str]) -> np.ndarray:
    """Grid-search fold of every input: sha1 % 5 in 1..4 (0 is the sha1mod5 hold-out, never a fold)."""
    return key_buckets(keys, 5)


def is_validation(keys: Iterable[str], fold: int = 1) -> np.ndarray:
    """Inputs that score the grid search in `fold` (disjoint from the sha1mod5 hold-out)."""
    return validation_fold(keys) == fold
