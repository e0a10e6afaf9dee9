"""benchmarks/h200_eval_rescore.py on the committed H200 evaluation run and H200 data: both rankers scored
on the same inputs through the plugin's USE policy, the H200 artifact really chosen, the overlap with the
training data counted from the logs, the verdict following the figures, and the run left untouched."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import h200_eval_rescore as rs  # noqa: E402
from torchgen_ah.ah_log import input_keys, read_log  # noqa: E402
from torchgen_ah.policies import summarize  # noqa: E402

RUN = ROOT / "benchmarks" / "runs" / "evaluate_h200"
DATA = ROOT / "datasets" / "h200"


def _digest(folder: Path) -> str:
    h = hashlib.sha1()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        h.update(str(path.relative_to(folder)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def test_rescore_scores_both_rankers_on_one_table_and_leaves_the_run_alone():
    if not (RUN.exists() and (DATA / "h200_mm.txt").exists()):
        pytest.skip("committed H200 run or data absent")
    before = _digest(RUN)
    body, ok, det = rs.run(str(RUN), str(DATA), argv=["--no-write"])
    assert _digest(RUN) == before  # read-only: nothing written into the committed run

    per_input = det["per_input"]
    n = len(det["table"].inputs())
    assert n > 20
    for ranker in (rs.PACKAGED, rs.H200):
        rows = per_input[per_input["ranker"] == ranker]
        assert sorted(rows["policy"].unique()) == sorted(p for p, _, _ in rs.POLICIES)
        assert (rows.groupby("policy")["input"].nunique() == n).all()
    artifacts = per_input.groupby("ranker")["artifact"].first()
    assert artifacts[rs.H200].startswith("MMRankingH200 (user:")  # the device-specific H200 artifact won
    assert artifacts[rs.PACKAGED].startswith("MMRankingH100 (package:")
    assert "/" not in "".join(artifacts)  # no machine-specific paths in the report

    # overlap with the training data, counted again from the logs themselves
    keys = set()
    for log_path in DATA.glob("*_mm.txt"):
        log = read_log(log_path)
        keys |= set(input_keys(log.frame, log.metadata))
    overlap = len(set(det["table"].inputs()) & keys)
    assert f"{overlap} of the {n} inputs are also inputs of the training data" in body

    # the verdict follows the printed figures
    h200 = summarize(per_input[per_input["ranker"] == rs.H200]).set_index("policy")
    worst = h200.loc["ours_adaptive", "max_vs_default"]
    if worst > rs.WORST_BAR:
        assert not ok and "does NOT keep" in body and f"{worst:.3f}x" in body
    assert ok == ("**MMRankingH200 keeps" in body)
    # ours_top1 benchmarks nothing, for both rankers
    assert (per_input.loc[per_input["policy"] == "ours_top1", "benchmarked"] == 0).all()


def test_a_folder_without_the_runs_logs_is_named_in_the_error(tmp_path):
    (tmp_path / "environment.json").write_text('{"gpu": "NVIDIA H200"}')
    with pytest.raises(SystemExit, match=str(tmp_path)):
        rs.mm_table(str(tmp_path), rs.DEFAULT_SHAPES)
