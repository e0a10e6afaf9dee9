"""The trainer on sparse data (each input timed a different sample of a wide space, as our H200
collection does): the support floor keeps a choice timed on too few training inputs out of the ranked
lists, and train() picks the sparse grid only when the table is sparse."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from torchgen_ah.training.train_decision import (DEFAULT_GRID, GRIDS, SPARSE_GRID, FeatureSpec, MedianTimeMatrix,
                                        fit_ranking_tree, grid_points, stack, train)

CHOICES = ["a", "b", "extern_mm", "lucky"]


def _table(n: int = 12) -> MedianTimeMatrix:
    """n inputs: 'a' is 1.0, 'b' 1.3, extern_mm 1.5 everywhere; 'lucky' ran on input 0 only, at 0.5."""
    times = np.tile([1.0, 1.3, 1.5, np.nan], (n, 1))
    times[0, 3] = 0.5
    features = pd.DataFrame({"m": np.arange(1, n + 1) * 64, "k": 256, "n": 512})
    keys = np.array([f"{m},256,512" for m in features["m"]])
    return MedianTimeMatrix("t", keys, features, list(CHOICES), times)


def _fit(table: MedianTimeMatrix, min_support: int):
    spec = FeatureSpec(["m", "k", "n"], []).fit([table.features])
    ts = stack([table], spec, CHOICES)
    return fit_ranking_tree(ts, spec, CHOICES, max_depth=1, min_samples_leaf=0.01, default="extern_mm",
                            min_support=min_support)


def test_support_floor_drops_a_lucky_choice_from_every_list():
    table = _table()
    lucky = CHOICES.index("lucky")
    loose = _fit(table, min_support=1)
    assert any(lucky in order for order in loose.node_order)  # one timing is enough to be ranked
    leaf0 = int(loose.leaves(table.features.iloc[[0]])[0])
    assert loose.leaf_rankings[leaf0][0] == lucky  # and it tops the list of the input it won

    strict = _fit(table, min_support=2)
    assert not any(lucky in order for order in strict.node_order)
    assert strict.params["min_support"] == 2
    for ranking in strict.leaf_rankings.values():
        assert ranking[-1] == lucky  # still a full ranking: after every choice that has support
        assert CHOICES.index("a") == ranking[0]
    # what the artifact would answer for the input 'lucky' won: the supported best first
    assert strict.rank(table.features.iloc[0].to_dict())[0][0] == "a"


def test_sparse_grid_is_opt_in_and_searches_the_support_floor(tmp_path):
    table = _table()
    extra = [f"wide_{i}" for i in range(20)]  # twenty sampled configs, each timed on one input
    times = np.full((len(table.keys), len(extra)), np.nan)
    for i in range(len(extra)):
        times[i % len(table.keys), i] = 1.1
    sparse = MedianTimeMatrix("t", table.keys, table.features, CHOICES + extra, np.hstack([table.times, times]))
    spec = FeatureSpec(["m", "k", "n"], [])

    plain = train(sparse, [], spec, default="extern_mm", log=lambda *a: None)
    assert [p for p, _ in plain.grid] == grid_points(DEFAULT_GRID)  # no grid given: the official datasets' one
    chosen = train(sparse, [], spec, default="extern_mm", grid=GRIDS["sparse"], log=lambda *a: None)
    assert [p for p, _ in chosen.grid] == grid_points(SPARSE_GRID)
    assert chosen.best_params["min_support"] in SPARSE_GRID["min_support"]
    assert chosen.model.params.get("min_support", 1) == chosen.best_params["min_support"]
    assert "min_support" not in plain.model.params  # artifacts trained without a floor keep their text

    from torchgen_ah.mm import train_decision_mm as mm

    with pytest.raises(SystemExit):  # a grid name that does not exist is refused by the command line
        mm.main(["x.txt", "--heuristic-name", "X", "--grid", "wide"])
