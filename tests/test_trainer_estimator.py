"""The trainer as an estimator: parameters in __init__, fit returns the estimator, fitted attributes end in
an underscore, rank answers for a plain dict of features, exactly as the generated artifact does."""

from __future__ import annotations

import importlib.util

import pytest

from ah_plugin.collect import features, log_format
from torchgen_ah.training.estimator import NotFittedError, RankingTrainer
from torchgen_ah.training.train_decision import FeatureSpec
from torchgen_ah.training.train_generic import load_tables

T1 = "type=triton_BLOCK-M=64_BLOCK-K=32_BLOCK-N=64_numstages=3_numwarps=4"


def _log(path):
    """Small inputs favour the template, large ones aten (times in ms)."""
    meta = None
    for m in (16, 32, 64, 128, 1024, 2048, 4096, 8192):
        tensors = [{"size": [m, 64], "stride": [64, 1], "dtype": "torch.float16"},
                   {"size": [64, 48], "stride": [48, 1], "dtype": "torch.float16"}]
        feats, num, cat = features.op_features("mm", tensors, False)
        meta = features.log_metadata(features.metadata("mm", num, cat, (9, 0), 232448, "gpu"))
        rows = [log_format.format_row(meta, features.ordered_features(feats, num, cat), choice, ms)
                for choice, ms in (("extern_mm", 1.0), (T1, 0.5 if m < 1000 else 2.0))]
        log_format.append_rows(str(path), meta, rows, log_format.header_columns(meta))
    return path


def test_fit_returns_the_estimator_and_rank_matches_the_artifact(tmp_path):
    main, extras, metadata = load_tables([str(_log(tmp_path / "log.txt"))])
    trainer = RankingTrainer(k=2, default="extern_mm", grid={"max_depth": [2], "min_samples_leaf": [1],
                                                              "criterion": ["entropy"]}, cross_validate=False,
                             log=lambda *_: None)
    assert trainer.get_params()["k"] == 2 and not hasattr(trainer, "model_")
    with pytest.raises(NotFittedError):
        trainer.rank({"m": 16})
    spec = FeatureSpec(list(metadata["numerical_features"]), list(metadata["categorical_features"]))
    assert trainer.fit(main, extras, spec) is trainer
    assert trainer.choices_ == sorted(["extern_mm", T1]) and trainer.best_params_ == {
        "criterion": "entropy", "max_depth": 2, "min_samples_leaf": 1}
    rows = main.features.to_dict("records")
    small = next(r for r in rows if int(r["m"]) == 16)
    large = next(r for r in rows if int(r["m"]) == 8192)
    assert trainer.rank(small)[0][0] == T1 and trainer.rank(large)[0][0] == "extern_mm"

    # the generated artifact gives the same answers for the same plain dicts
    path = tmp_path / "_MMRankingEstimator.py"
    path.write_text(trainer.to_artifact("MMRankingEstimator", metadata))
    spec_ = importlib.util.spec_from_file_location("estimator_artifact", path)
    module = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(module)
    artifact = module.MMRankingEstimator()
    for row in (small, large):
        assert [c for c, _ in artifact.rank(row)] == [c for c, _ in trainer.rank(row)]
    with pytest.raises(ValueError, match="unknown parameter"):
        trainer.set_params(depth=3)


def _runs_log(path, runs):
    """The log of ``runs`` collection runs: each a {m: (aten ms, template ms)} of the small inputs, appended."""
    for run in runs:
        for m, (aten, template) in run.items():
            tensors = [{"size": [m, 64], "stride": [64, 1], "dtype": "torch.float16"},
                       {"size": [64, 48], "stride": [48, 1], "dtype": "torch.float16"}]
            feats, num, cat = features.op_features("mm", tensors, False)
            meta = features.log_metadata(features.metadata("mm", num, cat, (9, 0), 232448, "gpu"))
            rows = [log_format.format_row(meta, features.ordered_features(feats, num, cat), choice, ms)
                    for choice, ms in (("extern_mm", aten), (T1, template))]
            log_format.append_rows(str(path), meta, rows, log_format.header_columns(meta))
    return path


def _artifact(trainer, metadata, path):
    path.write_text(trainer.to_artifact("MMRankingSupport", metadata))
    spec_ = importlib.util.spec_from_file_location(f"support_artifact_{path.parent.name}", path)
    module = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(module)
    return module.MMRankingSupport()


def test_each_leaf_records_the_inputs_timings_and_spread_behind_it(tmp_path):
    """A leaf's support counts the inputs where its first choice and aten were both timed, their distinct
    timings (a run whose times equal an earlier run's, as Inductor's autotune cache answers, counts once),
    the geomean of aten's time over the template's and how far that varies."""
    first = {16: (1.0, 0.5), 32: (1.2, 0.6), 64: (1.4, 0.7)}
    second = {16: (1.1, 0.5), 32: (1.2, 0.62), 64: (1.3, 0.7)}
    grid = {"max_depth": [2], "min_samples_leaf": [1], "criterion": ["entropy"]}
    answers = {}
    for name, runs in (("once", [first]), ("repeated", [first, first]), ("twice", [first, second])):
        folder = tmp_path / name
        folder.mkdir()
        main, extras, metadata = load_tables([str(_runs_log(folder / "log.txt", runs))])
        spec = FeatureSpec(list(metadata["numerical_features"]), list(metadata["categorical_features"]))
        trainer = RankingTrainer(k=2, default="extern_mm", grid=grid, cross_validate=False,
                                 log=lambda *_: None).fit(main, extras, spec)
        row = main.features.to_dict("records")[0]
        artifact = _artifact(trainer, metadata, folder / "_MMRankingSupport.py")
        assert artifact.support(row) == trainer.model_.support(row)  # the artifact answers as the tree
        answers[name] = artifact.support(row)
    assert answers["once"] == {"choice": T1, "inputs": 3, "timings": 6, "margin": 2.0, "spread": 1.0}
    assert answers["repeated"] == answers["once"]  # the same timings logged twice are one measurement each
    twice = answers["twice"]
    # the second run repeats three of the six times exactly: 9 distinct timings
    assert (twice["choice"], twice["inputs"], twice["timings"]) == (T1, 3, 9)
    # the repeated timings vary more (median of each input's largest range: 1.4 / 1.3 at m=64) than the
    # ratio does across the inputs
    assert 1.9 < twice["margin"] < 2.1 and twice["spread"] == pytest.approx(1.4 / 1.3, abs=1e-4)
