"""Trainer + codegen on a small real subset of the official H100 data (h100_mm.txt, 322 inputs)."""

from __future__ import annotations

import importlib.util
import random
import zipfile
from pathlib import Path

import numpy as np
import pytest

from torchgen_ah.training import codegen
from torchgen_ah.data.heldout import ROTATIONS, is_heldout, is_validation, validation_fold, validation_folds
from torchgen_ah.mm import train_decision_mm as mm
from torchgen_ah.training.train_decision import evaluate, train

from official_data import OFFICIAL, SKIP_REASON

ONE_POINT = {"max_depth": [5], "min_samples_leaf": [0.01], "criterion": ["entropy"]}


def _extract(member: str, dest: Path) -> Path:
    if OFFICIAL is None:
        pytest.skip(SKIP_REASON)
    zpath = OFFICIAL / "h100_mm.zip"
    with zipfile.ZipFile(zpath) as z:
        out = dest / Path(member).name
        out.write_bytes(z.read(member))
    return out


@pytest.fixture(scope="module")
def h100_mm(tmp_path_factory) -> Path:
    return _extract("h100/h100_mm.txt", tmp_path_factory.mktemp("data"))


@pytest.fixture(scope="module")
def trained(h100_mm, tmp_path_factory):
    out = tmp_path_factory.mktemp("art")
    run = mm.run(str(h100_mm), "MMRankingTest", out_dir=str(out), save_dot=True, holdout="sha1mod5",
                 grid=ONE_POINT, log=lambda *a: None)
    return run


def _import(path: str, name: str):
    spec = importlib.util.spec_from_file_location(f"artifact_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)()


def test_artifact_precondition_and_interface(trained):
    h = _import(trained.artifact_path, "MMRankingTest")
    md = {"name": "mm", "device_capa": (9, 0), "shared_memory": 232448}
    assert h.check_precondition(md)
    assert h.check_precondition(dict(md, device_capa=[9, 0], device_name="NVIDIA H200"))
    assert not h.check_precondition(dict(md, device_capa=(8, 0)))
    assert not h.check_precondition(dict(md, shared_memory=166912))
    assert not h.check_precondition(dict(md, name="addmm"))
    assert not h.check_precondition({"name": "mm"})  # incomplete metadata: no, not an exception
    assert h.heuristic_name == "MMRankingTest" and h.op_name == "mm"
    assert "extern_mm" in h.choices and len(set(h.choices)) == len(h.choices)
    src = Path(trained.artifact_path).read_text()
    imports = [ln for ln in src.splitlines() if ln.startswith(("import ", "from "))]
    assert imports == ["import struct"]  # stdlib only
    assert Path(trained.dot_path).read_text().startswith("digraph MMRankingTest {")


def test_artifact_ranks_exactly_as_the_tree_on_every_input(trained, h100_mm):
    h = _import(trained.artifact_path, "MMRankingTest")
    model = trained.result.model
    table, _ = mm.load_table(str(h100_mm), "h100_mm")
    records = table.features.to_dict("records")
    assert len(records) == 322
    for features in records:
        ranked = h.rank(features)
        assert ranked == model.rank(features)
        assert h.support(features) == model.support(features)
        assert sorted(c for c, _ in ranked) == sorted(h.choices)  # a full ranking, each once
        own = [s for _, s in ranked if s > 0]
        assert own == sorted(own, reverse=True)


def test_rank_accepts_runtime_values(trained):
    """At run time the hook passes python values (bools, ints), not the log's text."""
    h = _import(trained.artifact_path, "MMRankingTest")
    feats = {"m": 1024, "k": 4096, "n": 1024, "mat1_dtype": "torch.bfloat16", "mat2_dtype": "torch.bfloat16",
             "mat1_stride_0": 4096, "mat1_stride_1": 1, "mat2_stride_0": 1024, "mat2_stride_1": 1,
             "mat1_iscontig": True, "mat2_iscontig": True, "using_tf32": "not_float_32"}
    as_text = {k: str(v) for k, v in feats.items()}
    assert h.rank(feats) == h.rank(as_text)


def test_codegen_is_deterministic_and_row_order_free(h100_mm, tmp_path):
    lines = h100_mm.read_text().splitlines(keepends=True)
    body = lines[2:]
    random.Random(0).shuffle(body)
    (tmp_path / "shuffled").mkdir()
    shuffled = tmp_path / "shuffled" / h100_mm.name  # same name: the header names the file
    shuffled.write_text("".join(lines[:2] + body))
    outs = []
    for i, src in enumerate([h100_mm, h100_mm, shuffled]):
        out = tmp_path / f"out{i}"
        r = mm.run(str(src), "MMRankingTest", out_dir=str(out), save_dot=True, grid=ONE_POINT,
                   log=lambda *a: None)
        outs.append((Path(r.artifact_path).read_bytes(), Path(r.dot_path).read_bytes(),
                     Path(r.report_path).read_bytes()))
    assert outs[0] == outs[1]
    assert outs[0] == outs[2]


def test_rotations_hold_out_every_input_exactly_once():
    keys = [f"{m},{k},64,torch.float16" for m in range(60) for k in range(5)]
    masks = np.array([is_heldout(keys, h) for h in ROTATIONS])
    assert (masks.sum(axis=0) == 1).all() and masks.sum(axis=1).min() > 30  # a partition, every bucket used
    assert (is_heldout(keys, "sha1mod5") == masks[0]).all()  # the issue-2 split is rotation 0
    assert not is_heldout(keys, "none").any()
    for bucket, holdout in enumerate(ROTATIONS):
        folds = validation_folds(holdout)
        assert len(folds) == 4 and bucket not in folds
        assert not (np.isin(validation_fold(keys), folds) & masks[bucket]).any()
    assert validation_folds("sha1mod5") == validation_folds("none") == (1, 2, 3, 4)  # shipped artifacts unchanged
    for bad in ("sha1mod5:5", "sha1mod7", ""):
        with pytest.raises(ValueError, match="unknown holdout"):
            is_heldout(keys, bad)


@pytest.mark.parametrize("holdout", ["sha1mod5", "sha1mod5:3"])
def test_splits_are_by_input_and_heldout_never_trained_on(h100_mm, tmp_path, holdout):
    table, md = mm.load_table(str(h100_mm), "h100_mm")
    held = is_heldout(table.keys, holdout)
    if holdout == "sha1mod5":
        val = is_validation(table.keys)
        assert held.sum() == 65 and not (held & val).any()  # the 65 held-out inputs
    assert len(set(table.keys)) == len(table.keys)  # one row per input: a split cannot cut an input

    # corrupt every held-out input's timings: a model that never saw them must not change
    spec = mm.mm_feature_spec(md)
    base = train(table, [], spec, default="extern_mm", holdout=holdout, grid=ONE_POINT, log=lambda *a: None)
    # the grid search validates on every input it may train on: the four buckets not held out
    validated = [m for m in base.metrics if m.name == "h100_mm validation"][0]
    assert validated.inputs == int((~held).sum())
    corrupt = table.subset(np.ones(len(table.keys), dtype=bool))
    corrupt.times = table.times.copy()
    rng = np.random.default_rng(0)
    corrupt.times[held] = rng.uniform(0.001, 10.0, size=corrupt.times[held].shape)
    again = train(corrupt, [], spec, default="extern_mm", holdout=holdout, grid=ONE_POINT, log=lambda *a: None)
    a = codegen.generate_artifact(base.model, "X", md)
    b = codegen.generate_artifact(again.model, "X", md)
    assert a == b
    # ... while corrupting training inputs does change it
    corrupt.times[~held] = rng.uniform(0.001, 10.0, size=corrupt.times[~held].shape)
    third = train(corrupt, [], spec, default="extern_mm", holdout=holdout, grid=ONE_POINT, log=lambda *a: None)
    assert codegen.generate_artifact(third.model, "X", md) != a


def test_extra_data_trains_but_is_never_the_main_evaluation(h100_mm, tmp_path):
    """An extra dataset changes the model (it is trained on, weight 3) but the main file's held-out
    figures are computed on the main file's held-out inputs only."""
    table, md = mm.load_table(str(h100_mm), "h100_mm")
    spec = mm.mm_feature_spec(md)
    keys_in_half = np.arange(len(table.keys)) % 2 == 0
    main, extra = table.subset(keys_in_half), table.subset(~keys_in_half)
    extra.name, extra.weight = "train_extra", 3.0
    alone = train(main, [], spec, default="extern_mm", holdout="sha1mod5", grid=ONE_POINT, log=lambda *a: None)
    both = train(main, [extra], spec, default="extern_mm", holdout="sha1mod5", grid=ONE_POINT,
                 log=lambda *a: None)
    assert codegen.generate_artifact(alone.model, "X", md) != codegen.generate_artifact(both.model, "X", md)
    main_held = [m for m in both.metrics if m.name == "h100_mm held-out"][0]
    assert main_held.inputs == int(is_heldout(main.keys, "sha1mod5").sum())
    direct = evaluate(both.model, main.subset(is_heldout(main.keys, "sha1mod5")), 10, "extern_mm")
    assert direct.hits == main_held.hits and direct.inputs == main_held.inputs


def test_zero_and_inf_timings_are_dropped_not_fatal(tmp_path, h100_mm):
    lines = h100_mm.read_text().splitlines(keepends=True)
    # make the first input's extern_mm time zero and another row inf
    head, body = lines[:2], lines[2:]
    first = body[0].rsplit(",", 1)[0]
    # every repetition of that (input, choice) becomes zero; one other row becomes inf
    body = [first + ",0.0\n" if ln.rsplit(",", 1)[0] == first else ln for ln in body]
    body[-1] = body[-1].rsplit(",", 1)[0] + ",inf\n"
    p = tmp_path / "zeros.txt"
    p.write_text("".join(head + body))
    table, _ = mm.load_table(str(p), "zeros")
    key = ",".join(first.split(",")[:-1])
    i = list(table.keys).index(key)
    j = table.choices.index(first.split(",")[-1])
    assert np.isinf(table.times[i, j])  # the zero timing was dropped; the input stays
    r = mm.run(str(p), "MMRankingZ", out_dir=str(tmp_path / "o"), grid=ONE_POINT, log=lambda *a: None)
    assert Path(r.artifact_path).exists()
