"""Use mode for addmm with no addmm artifact: it borrows the mm artifact that fits (the packaged
MMRankingH100 on disk), ranking the mm view of the input; an addmm artifact that fits wins."""

from __future__ import annotations

import pytest

from ah_plugin.use import artifact_loader
from ah_plugin.collect import features
from ah_plugin.policy import AutotuneRequest
from ah_plugin.use.ranking import RankingPolicy

H100 = {"device_capa": (9, 0), "shared_memory": 232448, "device_name": "NVIDIA H100 80GB HBM3"}


@pytest.fixture(autouse=True)
def clean(clean_use_env):
    yield


def mat(rows, cols, dtype="torch.bfloat16"):
    return {"size": [rows, cols], "stride": [cols, 1], "dtype": dtype}


def make_request(op, tensors, candidates):
    values, num, cat = features.op_features(op, tensors)
    return AutotuneRequest(
        op, features.ordered_features(values, num, cat), features.metadata(op, num, cat, **H100), list(candidates)
    )


def mm_and_addmm(m, k, n, aten=("extern_addmm",)):
    """The mm request of (m x k) @ (k x n) and the addmm request of the same matrices plus a row bias,
    each with the H100 artifact's Triton choices and its own aten choices."""
    triton = [c for c in h100().choices if not c.startswith("extern_")]
    mm = make_request("mm", [mat(m, k), mat(k, n)], [*triton, "extern_mm"])
    bias = {"size": [n], "stride": [1], "dtype": "torch.bfloat16"}
    addmm = make_request("addmm", [bias, mat(m, k), mat(k, n)], [*triton, *aten])
    return mm, addmm


def h100():
    package = (("package", artifact_loader.package_artifact_dir()),)
    found = [a for a in artifact_loader.load_artifacts(package) if a.name == "MMRankingH100"]
    if not found:
        pytest.skip("MMRankingH100 not generated into artifacts/ yet")
    return found[0]


def as_addmm(ids, aten="extern_addmm"):
    return [aten if cid == "extern_mm" else cid for cid in ids]


def test_addmm_is_ranked_like_the_mm_of_its_matrices(capsys):
    mm, addmm = mm_and_addmm(197, 768, 768)  # ViT-B's attention projection: extern_mm ranks 5th
    mm_keep = RankingPolicy(ops={"mm"}, top_k=10).select(mm)
    policy = RankingPolicy(ops={"addmm"}, top_k=10, verbose=True)
    keep = policy.select(addmm)
    assert "extern_mm" in mm_keep[:10] and len(mm_keep) == 10  # aten took one of the top 10 slots
    assert keep == as_addmm(mm_keep)
    assert policy.artifact_for("addmm", addmm.metadata).name == "MMRankingH100"
    policy.select(addmm)
    err = capsys.readouterr().err
    (said,) = [line for line in err.splitlines() if line.startswith("ah_plugin: addmm on NVIDIA H100 80GB HBM3: ")]
    assert said.startswith("ah_plugin: addmm on NVIDIA H100 80GB HBM3: ranked by MMRankingH100 (package: ")
    assert said.endswith(", an mm artifact (no addmm artifact fits)")
    (report,) = policy.stale_report()
    assert (report["artifact"], report["op_name"]) == ("MMRankingH100", "addmm")
    assert report["vanished"] == [] and report["unseen"] == []  # extern_mm stood for extern_addmm


def test_keep_aten_off_maps_extern_mm_to_todays_aten_choices():
    mm, addmm = mm_and_addmm(8192, 768, 2304, aten=("extern_addmm", "extern_bias_addmm"))
    one = dict(top_k=1, keep_aten=False, min_choices=1)
    assert RankingPolicy(ops={"mm"}, **one).select(mm) == ["extern_mm"]  # this leaf trusts aten
    assert RankingPolicy(ops={"addmm"}, **one).select(addmm) == ["extern_addmm"]
    three = dict(top_k=3, keep_aten=False)
    mm_keep = RankingPolicy(ops={"mm"}, **three).select(mm)
    assert mm_keep[0] == "extern_mm"
    keep = RankingPolicy(ops={"addmm"}, **three).select(addmm)
    assert keep == ["extern_addmm", "extern_bias_addmm", mm_keep[1]]
    # adaptive k: aten's probability counts once, so the Triton choice mm needs to reach the mass stays
    adaptive = dict(top_k="adaptive", mass=0.95, keep_aten=False, min_choices=1)
    mm_keep = RankingPolicy(ops={"mm"}, **adaptive).select(mm)
    assert mm_keep[0] == "extern_mm" and len(mm_keep) == 2
    assert RankingPolicy(ops={"addmm"}, **adaptive).select(addmm) == ["extern_addmm", "extern_bias_addmm", mm_keep[1]]


def test_bmm_does_not_borrow():
    triton = [c for c in h100().choices if not c.startswith("extern_")]
    batch = {"size": [12, 197, 64], "stride": [197 * 64, 64, 1], "dtype": "torch.bfloat16"}
    other = {"size": [12, 64, 197], "stride": [197 * 64, 197, 1], "dtype": "torch.bfloat16"}
    request = make_request("bmm", [batch, other], [*triton, "extern_bmm"])
    assert features.mm_view("bmm", request.features, request.metadata) is None
    policy = RankingPolicy(ops={"bmm"}, top_k=10)
    with pytest.warns(RuntimeWarning, match="bmm: no artifact matches"):
        assert policy.select(request) is None
    assert policy.artifact_for("bmm", request.metadata) is None


def test_an_addmm_artifact_that_fits_wins_over_borrowing(tmp_path):
    mm, addmm = mm_and_addmm(197, 768, 768)
    borrowed_first = RankingPolicy(ops={"addmm"}, top_k=1).select(addmm)[0]
    own_first = next(c for c in addmm.candidates if c.startswith("type=triton") and c != borrowed_first)
    write_addmm_artifact(tmp_path / "_AddmmRankingTest.py", "AddmmRankingTest", (9, 0), own_first)
    policy = RankingPolicy(ops={"addmm"}, artifact_dir=str(tmp_path), top_k=1)
    assert policy.artifact_for("addmm", addmm.metadata).name == "AddmmRankingTest"
    assert policy.select(addmm) == [own_first, "extern_addmm"]
    # one for another device does not fit: borrowing again
    other = tmp_path / "other"
    other.mkdir()
    write_addmm_artifact(other / "_AddmmRankingA100.py", "AddmmRankingA100", (8, 0), own_first)
    policy = RankingPolicy(ops={"addmm"}, artifact_dir=str(other), top_k=1)
    assert policy.artifact_for("addmm", addmm.metadata).name == "MMRankingH100"
    assert policy.select(addmm) == [borrowed_first, "extern_addmm"]


def write_addmm_artifact(path, name, device_capa, first):
    path.write_text(f'''
class {name}:
    heuristic_name = "{name}"
    op_name = "addmm"
    device_capa = {device_capa!r}
    shared_memory = 232448
    device_names = ()
    numerical_features = ["m", "k", "n", "bias_stride_0", "bias_stride_1"]
    categorical_features = []
    choices = [{first!r}, "extern_addmm"]

    def check_precondition(self, metadata):
        return metadata.get("name") == "addmm" and tuple(metadata.get("device_capa", ())) == self.device_capa

    def rank(self, features):
        assert "bias_stride_0" in features  # its own op's columns, not the mm view
        return [({first!r}, 1.0), ("extern_addmm", 0.0)]
''')


def test_mm_view_drops_exactly_the_bias_columns_and_names_mm():
    mm, addmm = mm_and_addmm(197, 768, 3072)
    assert [c for c in addmm.features if c not in mm.features] == ["bias_stride_0", "bias_stride_1"]
    view_features, view_metadata = features.mm_view("addmm", addmm.features, addmm.metadata)
    assert list(view_features.items()) == list(mm.features.items())
    assert view_metadata == mm.metadata and view_metadata["name"] == "mm"
    assert addmm.metadata["name"] == "addmm" and "bias_stride_0" in addmm.features  # input untouched
    assert features.mm_view("mm", mm.features, mm.metadata) is None
    # an addmm with generic columns (batched matrices) has no mm view
    values, num, cat = features.op_features("addmm", [mat(1, 8), *[dict(mat(8, 8), size=[2, 8, 8],
                                                                         stride=[64, 8, 1])] * 2])
    assert features.mm_view("addmm", values, features.metadata("addmm", num, cat, **H100)) is None


def test_fast_mode_on_a_borrowed_ranking_keeps_bias_addmm_in_either_inductor_order():
    """The H100 ranking (per-call data: fast mode keeps aten alone on a GPU) ranks extern_mm, which stands for
    both of addmm's aten choices; fast mode keeps extern_bias_addmm, however Inductor orders them."""
    for aten in (("extern_addmm", "extern_bias_addmm"), ("extern_bias_addmm", "extern_addmm")):
        _, addmm = mm_and_addmm(2048, 768, 2304, aten=aten)
        assert RankingPolicy(ops={"addmm"}, top_k="fast").select(addmm) == ["extern_bias_addmm"]
