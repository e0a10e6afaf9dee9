"""Deterministic splits by input, from the sha1 of the input key.

The trainer's quality protocol holds an input out when ``int(sha1(key).hexdigest(), 16) % 5 == 0``, where the
key is the input's feature values joined with "," as they appear in the log row. Splitting by a hash of
the key (never by row) keeps every measurement of one input on one side, in every file, on every run.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import numpy as np

#: "sha1mod5" is bucket 0; "sha1mod5:B" holds out bucket B instead (a rotation of the same split, so that
#: over B = 0..4 every input is held out exactly once: a 5-fold cross-check of a quality bar)
ROTATIONS = tuple(f"sha1mod5:{b}" for b in range(5))
HOLDOUTS = ("none", "sha1mod5") + ROTATIONS


def key_buckets(keys: Iterable[str], modulus: int) -> np.ndarray:
    """``int(sha1(key), 16) % modulus`` for every key (int64 array)."""
    return np.fromiter(
        (int(hashlib.sha1(k.encode()).hexdigest(), 16) % modulus for k in keys), dtype=np.int64
    )


def heldout_bucket(holdout: str) -> int | None:
    """The sha1 % 5 bucket a protocol holds out (None for "none"); ValueError naming the known ones."""
    if holdout == "none":
        return None
    if holdout == "sha1mod5":
        return 0
    if holdout in ROTATIONS:
        return int(holdout.rsplit(":", 1)[1])
    raise ValueError(f"unknown holdout {holdout!r}; expected one of {HOLDOUTS}")


def is_heldout(keys: Iterable[str], holdout: str) -> np.ndarray:
    """Boolean mask of the inputs held out from training under the named protocol.

    "none": nothing held out. "sha1mod5": the held-out protocol (bucket 0 of sha1 % 5). "sha1mod5:B":
    bucket B instead.
    """
    keys = list(keys)
    bucket = heldout_bucket(holdout)
    if bucket is None:
        return np.zeros(len(keys), dtype=bool)
    return key_buckets(keys, 5) == bucket


VALIDATION_FOLDS = (1, 2, 3, 4)


def validation_folds(holdout: str) -> tuple[int, ...]:
    """The grid search's folds under a protocol: the four buckets it does not hold out (1..4 for "none"
    and "sha1mod5", so the shipped artifacts and the sha1mod5 split share them)."""
    bucket = heldout_bucket(holdout)
    return tuple(b for b in range(5) if b != bucket) if bucket not in (None, 0) else VALIDATION_FOLDS


def validation_fold(keys: Iterable[str]) -> np.ndarray:
    """Grid-search fold of every input: its sha1 % 5 bucket (the held-out bucket is never a fold, see
    ``validation_folds``)."""
    return key_buckets(keys, 5)


def is_validation(keys: Iterable[str], fold: int = 1) -> np.ndarray:
    """Inputs of bucket `fold` (a grid-search fold when it is among ``validation_folds(holdout)``; fold 1
    is disjoint from the sha1mod5 hold-out)."""
    return validation_fold(keys) == fold
