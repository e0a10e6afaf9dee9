"""The H200 ship check (torchgen_ah.evaluation.studies.h200_eval_rescore, benchmarks/h200_eval_rescore.py) on
seven inputs of the committed H200 evaluation run (tests/data/evaluate_h200) and the H200 data: both rankers
scored on the same inputs through the plugin's USE policy, the H200 artifact really chosen, the overlap with
the training data counted from the logs, the verdict following the figures, and the run left untouched."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd
import pytest

from torchgen_ah.data.ah_log import input_keys, read_log
from torchgen_ah.evaluation.studies import h200_eval_rescore as rs
from torchgen_ah.evaluation.policies import summarize

ROOT = Path(__file__).resolve().parents[1]

RUN = ROOT / "tests" / "data" / "evaluate_h200"  # seven inputs of the H200 evaluation run (tests/data/README.md)
DATA = ROOT / "datasets" / "h200"


def _digest(folder: Path) -> str:
    h = hashlib.sha1()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        h.update(str(path.relative_to(folder)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


@pytest.mark.slow
def test_rescore_scores_both_rankers_on_one_table_and_leaves_the_run_alone():
    if not (RUN.exists() and (DATA / "h200_mm.txt.gz").exists()):
        pytest.skip("committed H200 run or data absent")
    before = _digest(RUN)
    body, ok, det = rs.run(str(RUN), str(DATA), argv=["--no-write"])
    assert _digest(RUN) == before  # read-only: nothing written into the committed run

    per_input = det["per_input"]
    n = len(det["table"].inputs())
    assert n == 7
    for ranker in (rs.PACKAGED, rs.H200):
        rows = per_input[per_input["ranker"] == ranker]
        assert sorted(rows["policy"].unique()) == sorted(p for p, _, _ in rs.POLICIES)
        assert (rows.groupby("policy")["input"].nunique() == n).all()
    artifacts = per_input.groupby("ranker")["artifact"].first()
    assert artifacts[rs.H200] == "MMRankingH200 (_MMRankingH200.py)"  # the device-specific H200 artifact won
    assert artifacts[rs.PACKAGED] == "MMRankingH100 (_MMRankingH100.py)"  # what an H200 ran before it shipped
    assert "/" not in "".join(artifacts)  # no machine-specific paths in the report

    # overlap with the training data, counted again from the logs themselves
    keys = set()
    for log_path in DATA.glob("*_mm.txt.gz"):
        log = read_log(log_path)
        keys |= set(input_keys(log.frame, log.metadata))
    overlap = len(set(det["table"].inputs()) & keys)
    assert f"{overlap} of the {n} inputs are also inputs of the training data" in body

    # the verdict follows the printed figures
    h200 = summarize(per_input[per_input["ranker"] == rs.H200]).set_index("policy")
    for policy in rs.GUARDED:
        worst = h200.loc[policy, "max_vs_default"]
        assert f"{policy} worst {worst:.3f}x" in body
        if worst > rs.WORST_BAR:
            assert not ok and "does NOT keep" in body
    assert ok == ("**MMRankingH200 keeps" in body)
    # plugin_top1 benchmarks nothing, for both rankers
    assert (per_input.loc[per_input["policy"] == "plugin_top1", "benchmarked"] == 0).all()
    # the shipped artifact is the one the committed data trains: regenerated as the data grew
    # the shipped artifact is trained on the replay-timed data (tests/test_shipped_h200_artifact.py checks it
    # is not stale); this run scores the per-call artifact, which is not shipped
    assert det["shipped"] and "trained on CUDA-graph replay timings" in body


def _per_input(h200: list[float], packaged: list[float], policies=rs.GUARDED) -> pd.DataFrame:
    """Per-input rows as ``score`` makes them, for the verdict: regrets vs default's pick per ranker. The
    packaged ranker's rows come in reverse order, so the verdict must pair them by input."""
    rows = []
    for ranker, regrets in ((rs.H200, h200), (rs.PACKAGED, packaged)):
        order = list(range(len(regrets)))[:: 1 if ranker == rs.H200 else -1]
        for policy in policies:
            for i in order:
                rows.append({"input": f"i{i}", "policy": policy, "ranker": ranker, "regret_vs_default": regrets[i],
                             "regret_vs_best": regrets[i], "benchmarked": 5, "default_benchmarked": 20, "note": ""})
    return pd.DataFrame(rows)


def test_verdict_reads_two_inputs_trading_places_as_a_tie_and_a_loss_as_a_loss():
    """The committed run's k=10 case: two inputs trade a 7.5% regret between the rankers, so the geomeans
    differ in the fourth decimal by which input is which; that is not a loss. A small loss on every input
    is one (resolved), and so is one input over the worst-case bar at k=10 or adaptive k, which an
    interval over 33 inputs would not resolve, and a regret that is not finite."""
    base = [1.0] * 31
    swap_h200, swap_packaged = base + [0.9277, 1.0], base + [1.0, 0.9244]
    text, ok = rs.verdict(_per_input(swap_h200, swap_packaged))
    assert ok and "keeps" in text and "not resolved" in text
    # 1% worse on every input is resolved when paired by input; paired by row position (the packaged rows
    # come reversed) the ratios would scatter between 0.94 and 1.09 and resolve nothing
    packaged = [1.0] * 17 + [1.08] * 16
    text, ok = rs.verdict(_per_input([1.01 * r for r in packaged], packaged))
    assert not ok and "plugin_k10: resolved worse" in text and "1.0100 (1.0100-1.0100" in text

    text, ok = rs.verdict(_per_input([1.01] * 33, [1.0] * 33))
    assert not ok and "plugin_k10: resolved worse" in text and "plugin_adaptive: resolved worse" in text

    one_big = [2.0] + [1.0] * 32
    text, ok = rs.verdict(_per_input(one_big, [1.0] * 33))
    assert not ok and "plugin_k10: an input at 2.000x" in text
    assert "not resolved" in text  # the interval alone would have let it through

    text, ok = rs.verdict(_per_input([float("nan")] + [1.0] * 32, [1.0] * 33))
    assert not ok and "not all finite" in text
