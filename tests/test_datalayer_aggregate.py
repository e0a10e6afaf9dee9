"""torchgen_ah.data.aggregate: repetitions -> median, count and spread per (input, choice)."""

import math
import zipfile

import numpy as np

from ah_plugin.collect.log_format import format_metadata
from torchgen_ah.data.aggregate import aggregate
from torchgen_ah.data.ah_log import input_keys, read_log
from official_data import OFFICIAL, needs_official

META = {"shared_memory": 1, "device_capa": [1, 0], "name": "bmm", "numerical_features": ["b", "m"],
        "categorical_features": ["dtype"]}


def test_median_count_and_spread_per_input_and_choice(tmp_path):
    path = tmp_path / "bmm.txt"
    path.write_text("\n".join([
        format_metadata(META), "b,m,dtype,choice,feedback",
        "2,64,torch.float16,c1,3.0",
        "2,64,torch.float16,c2,1.0",
        "2,64,torch.float16,c1,1.0",
        "2,64,torch.bfloat16,c1,5.0",   # other input: dtype differs
        "2,64,torch.float16,c1,2.0",
        "2,64,torch.float16,c1,100.0",  # outlier: moves the median only to the middle value
        "2,64,torch.float16,c2,inf",
        "2,64,torch.float16,c2,inf",
        "4,64,torch.float16,c3,0.0",
        "4,64,torch.float16,c3,0.5",
    ]) + "\n")
    log = read_log(path)
    agg = aggregate(log.frame, log.metadata)
    assert agg[["b", "m", "dtype", "choice"]].values.tolist() == [
        [2, 64, "torch.float16", "c1"], [2, 64, "torch.float16", "c2"],
        [2, 64, "torch.bfloat16", "c1"], [4, 64, "torch.float16", "c3"],
    ]
    assert agg["feedback"].tolist() == [2.5, math.inf, 5.0, 0.25]
    assert agg["count"].tolist() == [4, 3, 1, 2]
    assert agg["feedback_min"].tolist() == [1.0, 1.0, 5.0, 0.0]
    assert agg["feedback_max"].tolist() == [100.0, math.inf, 5.0, 0.5]
    assert agg["spread"].tolist() == [100.0, math.inf, 1.0, math.inf]
    assert agg["b"].dtype == np.int64
    assert input_keys(agg, log.metadata).tolist()[:3] == [
        "2,64,torch.float16", "2,64,torch.float16", "2,64,torch.bfloat16"]


@needs_official
def test_official_repetitions_collapse(tmp_path):
    with zipfile.ZipFile(OFFICIAL / "h100_mm.zip") as archive, archive.open("h100/h100_mm.txt") as src:
        (tmp_path / "h.txt").write_bytes(b"".join(next(src) for _ in range(3000)))
    log = read_log(tmp_path / "h.txt")
    agg = aggregate(log.frame, log.metadata)
    assert agg["count"].sum() == len(log.frame)
    keys = input_keys(log.frame, log.metadata)
    assert len(agg) == len(set(zip(keys, log.frame["choice"])))
    # the median of each group equals numpy's median of that group's rows
    first = agg.iloc[5]
    rows = log.frame[(keys == input_keys(agg, log.metadata).iloc[5]) & (log.frame["choice"] == first["choice"])]
    assert first["feedback"] == np.median(rows["feedback"]) and first["count"] == len(rows)
    assert (agg["spread"] >= 1.0).all()
