"""USE policy and artifact loader on plain requests, with Contract-2 artifact files written to tmp."""

from __future__ import annotations

import os
import textwrap
import time
import warnings

import pytest

from ah_plugin.use import artifact_loader
from ah_plugin.policy import AutotuneRequest
from ah_plugin.use.ranking import RankingPolicy, UseOptions, choose

H100_META = {"name": "mm", "device_capa": (9, 0), "shared_memory": 232448, "device_name": "NVIDIA H200"}

T = [f"type=triton_BLOCK-M={m}_BLOCK-K=32_BLOCK-N=64_numstages=3_numwarps=4" for m in (16, 32, 64, 128)]

# A leaf-and-backoff ranking like the trainer's: leaf entries with probabilities, then backoff with 0.0.
ARTIFACT_TEMPLATE = '''
class {name}:
    heuristic_name = "{name}"
    op_name = "{op}"
    device_capa = (9, 0)
    shared_memory = 232448
    device_names = {device_names!r}
    numerical_features = ["m", "k", "n"]
    categorical_features = []
    choices = {choices!r}
    timing = {timing!r}

    def check_precondition(self, metadata):
        return (
            metadata.get("name") == self.op_name
            and tuple(metadata.get("device_capa", ())) == self.device_capa
            and metadata.get("shared_memory") == self.shared_memory
        )

    def rank(self, features):
        if features["m"] <= 64:
            return {small!r}
        return {large!r}
{support_method}'''

SUPPORT_METHOD = '''
    def support(self, features):
        return {support!r}
'''


def backed(choice, **changes):
    """A leaf's support that backs ``choice`` (ranking.supported): 3 inputs, each timed twice, 1.5x aten's
    speed with a spread of 1.1; ``changes`` override."""
    return {"choice": choice, "inputs": 3, "timings": 12, "margin": 1.5, "spread": 1.1, **changes}



def write_artifact(directory, filename, *, name="MMRankingTest", op="mm", device_names=(),
                   choices=None, small=None, large=None, timing=None, support=False):
    """``support``: False, no ``support`` method (an artifact trained before it was written); else what the
    method answers for every input."""
    choices = choices if choices is not None else ["extern_mm", *T]
    small = small if small is not None else [(T[0], 0.7), (T[1], 0.25), (T[2], 0.05), ("extern_mm", 0.0), (T[3], 0.0)]
    large = large if large is not None else [(T[3], 0.5), ("extern_mm", 0.3), (T[2], 0.2), (T[1], 0.0), (T[0], 0.0)]
    path = directory / filename
    path.write_text(ARTIFACT_TEMPLATE.format(
        name=name, op=op, device_names=tuple(device_names), choices=choices, small=small, large=large,
        timing=timing, support_method="" if support is False else SUPPORT_METHOD.format(support=support)))
    return path


def request(m=32, candidates=None, op="mm", meta=H100_META, k=128, n=256):
    return AutotuneRequest(
        op_name=op,
        features={"m": m, "k": k, "n": n},
        metadata=dict(meta),
        candidates=list(candidates if candidates is not None else ["extern_mm", *T]),
    )


@pytest.fixture(autouse=True)
def clean_env(clean_use_env):
    yield


def policy(tmp_path, **kw):
    """Only the test's artifacts (the packaged ones could match the metadata used here)."""
    return RankingPolicy(artifact_dir=str(tmp_path), package=False, **kw)


# -------------------------------------------------------------------------------------------------
# top-k, aten kept, adaptive, floor


def test_top_k_keeps_best_k_plus_extern(tmp_path):
    write_artifact(tmp_path, "_MMRankingTest.py")
    keep = policy(tmp_path, top_k=2).select(request(m=32))
    assert keep == [T[0], T[1], "extern_mm"]
    keep = policy(tmp_path, top_k=1).select(request(m=1024))
    assert keep == [T[3], "extern_mm"]
    # extern among the top k is not added twice
    assert policy(tmp_path, top_k=2).select(request(m=1024)) == [T[3], "extern_mm"]


def test_default_is_fast_mode_and_env_sets_k(tmp_path, monkeypatch):
    write_artifact(tmp_path, "_MMRankingTest.py")
    assert UseOptions.from_environment().fast
    # an artifact with no replay-timed data: its template picks are not trusted on a GPU, aten alone
    assert policy(tmp_path).select(request()) == ["extern_mm"]
    monkeypatch.setenv("AH_PLUGIN_TOP_K", "10")
    assert len(policy(tmp_path).select(request())) == 5  # everything it ranks (5 < 10)
    monkeypatch.setenv("AH_PLUGIN_TOP_K", "3")
    assert policy(tmp_path).select(request(m=32)) == [T[0], T[1], T[2], "extern_mm"]
    monkeypatch.setenv("AH_PLUGIN_TOP_K", "zero")  # a bad k: warned once, the ranking is off, nothing raises
    with pytest.warns(UserWarning, match="AH_PLUGIN_TOP_K='zero'.*USE ranking is off"):
        assert not UseOptions.from_environment().enabled
    assert policy(tmp_path).select(request(m=32)) is None
    assert policy(tmp_path, top_k=2).select(request(m=32)) == [T[0], T[1], "extern_mm"]  # an explicit k wins


def test_fast_mode_keeps_a_sure_template_alone_only_where_told_and_times_it_against_aten_otherwise(
        tmp_path, monkeypatch):
    write_artifact(tmp_path, "_MMRankingTest.py", timing="cudagraph_replay",
                   large=[("extern_mm", 0.6), (T[3], 0.3), (T[2], 0.1)], support=backed(T[0]))
    # on a GPU a template first is timed against aten by default, however sure the ranking is
    assert policy(tmp_path).select(request(m=32)) == [T[0], "extern_mm"]
    # aten first: aten alone, no template compiled
    assert policy(tmp_path).select(request(m=1024)) == ["extern_mm"]
    monkeypatch.setenv("AH_PLUGIN_CONFIDENCE", "0.8")  # the template's 0.7 is not sure enough to go alone
    assert policy(tmp_path).select(request(m=32)) == [T[0], "extern_mm"]
    monkeypatch.setenv("AH_PLUGIN_CONFIDENCE", "0.6")
    assert policy(tmp_path).select(request(m=32)) == [T[0]]  # sure enough, and backed: the template alone
    monkeypatch.setenv("AH_PLUGIN_CONFIDENCE", "never")
    assert policy(tmp_path).select(request(m=32)) == [T[0], "extern_mm"]
    # sure enough, but the leaf's data do not back it (or the artifact records none): timed on a GPU, or
    # aten alone, as on a CPU, where AH_PLUGIN_TIME_UNBACKED=off says so
    monkeypatch.setenv("AH_PLUGIN_CONFIDENCE", "0.6")
    for support in (backed(T[0], spread=1.6), None, False):
        write_artifact(tmp_path, "_MMRankingTest.py", timing="cudagraph_replay", support=support)
        artifact_loader.clear_cache()
        timed = policy(tmp_path)
        assert timed.select(request(m=32)) == [T[0], "extern_mm"], support
        assert timed.stats.unbacked == 1, support
        monkeypatch.setenv("AH_PLUGIN_TIME_UNBACKED", "off")
        assert policy(tmp_path).select(request(m=32)) == ["extern_mm"], support
        monkeypatch.delenv("AH_PLUGIN_TIME_UNBACKED")
    # the same artifact file without the replay mark: aten alone again on this GPU
    monkeypatch.delenv("AH_PLUGIN_CONFIDENCE")
    write_artifact(tmp_path, "_MMRankingTest.py")
    artifact_loader.clear_cache()
    assert policy(tmp_path).select(request(m=32)) == ["extern_mm"]


def test_fast_mode_default_confidence_depends_on_the_device():
    """A CPU keeps a template alone from a share of 0.8 (its artifacts come from the user's own program);
    a GPU never does by default (the packaged H200 ranking's sure leaves missed on held-out GEMMs)."""
    from ah_plugin.use.ranking import choose

    ranking = [(T[1], 0.9), ("extern_mm", 0.1)]
    options = UseOptions.from_environment(environ={})
    assert options.fast and options.confidence is None
    assert choose(ranking, ["extern_mm", *T], options, True, cpu=True, support=backed(T[1])) == [T[1]]
    assert choose(ranking, ["extern_mm", *T], options, True, cpu=False, support=backed(T[1])) == [T[1], "extern_mm"]


def test_fast_mode_keeps_a_template_only_where_the_leafs_data_back_it():
    """The data behind a leaf back its template with 3 inputs, two timings of each per input on average,
    and a margin over aten above the spread. Without that a GPU times the template against aten (aten alone
    with ``time_unbacked`` False), and a CPU keeps aten alone, as it does without an artifact."""
    from ah_plugin.use.ranking import choose, choose_fast, supported

    ranking, cands = [(T[1], 1.0)], ["extern_mm", *T]
    timing = UseOptions(fast=True)
    assert choose(ranking, cands, timing, True, cpu=False, support=None) == [T[1], "extern_mm"]
    assert choose(ranking, cands, timing, True, cpu=True, support=None) == ["extern_mm"]
    for cpu in (False, True):
        assert choose(ranking, cands, UseOptions(fast=True, time_unbacked=False), True, cpu=cpu,
                      support=None) == ["extern_mm"]

    assert supported(backed(T[1]), T[1])
    for unbacked in (backed(T[1], inputs=2, timings=8),  # too few inputs
                     backed(T[1], timings=11),  # one timing per input: collected once
                     backed(T[1], margin=1.1),  # faster than aten by less than the spread
                     backed(T[1], spread=None),  # the spread cannot be told
                     backed(T[0]),  # the leaf's data describe another choice
                     None):  # an artifact trained before support was recorded
        assert not supported(unbacked, T[1]), unbacked
        ranking, cands = [(T[1], 1.0)], ["extern_mm", *T]
        assert choose_fast(ranking, cands, 0.8, True, unbacked, time_unsupported=True) == [T[1], "extern_mm"]
        assert choose_fast(ranking, cands, 0.8, True, unbacked, time_unsupported=False) == ["extern_mm"]
    # backed but below the share: timed, on either device
    assert choose_fast([(T[1], 0.5)], ["extern_mm", *T], 0.8, True, backed(T[1]), time_unsupported=False) == \
        [T[1], "extern_mm"]


def test_templates_are_trusted_from_replay_data_or_on_a_cpu(tmp_path):
    from ah_plugin.use.ranking import trusts_templates

    for timing, gpu_trust in ((None, False), ("per_call", False), ("cudagraph_replay", True)):
        write_artifact(tmp_path, "_MMRankingTest.py", timing=timing)
        artifact_loader.clear_cache()
        [loaded] = artifact_loader.load_artifacts(((artifact_loader.SOURCE_USER, str(tmp_path)),))
        assert trusts_templates(loaded, H100_META) is gpu_trust
        # on a CPU (device_capa (0, 0)) per-call timing is how kernels run: trusted as they are
        assert trusts_templates(loaded, {"name": "mm", "device_capa": (0, 0)}) is True


def test_fast_choice_rules_on_plain_lists():
    from ah_plugin.use.ranking import choose_fast

    cands = ["extern_mm", *T]
    assert choose_fast([(T[1], 0.9), ("extern_mm", 0.1)], cands, 0.8, True, backed(T[1])) == [T[1]]
    assert choose_fast([(T[1], 0.9), ("extern_mm", 0.1)], cands, 0.8, True) == [T[1], "extern_mm"]
    assert choose_fast([(T[1], 0.5), ("extern_mm", 0.4)], cands, 0.8, True) == [T[1], "extern_mm"]
    assert choose_fast([(T[1], 0.9), ("extern_mm", 0.1)], cands, 0.8, False) == ["extern_mm"]
    assert choose_fast([("extern_mm", 0.2), (T[1], 0.8)], cands, 0.8, True) == ["extern_mm"]
    # a ranking that knows none of today's choices: aten alone
    assert choose_fast([("type=unknown", 1.0)], cands, 0.8, True) == ["extern_mm"]
    # no aten candidate at all: the top template alone
    assert choose_fast([(T[2], 0.3)], T, 0.8, True) == [T[2]]


def test_fast_mode_keeps_bias_addmm_over_addmm_in_either_inductor_order():
    """extern_addmm gets the bias as a 2-D stride-0 view (GPT-2 and ViT steps 1.26x slower on the H200 where
    it was picked); Inductor lists bias_addmm first on torch 2.11 and last on 2.13."""
    from ah_plugin.use.ranking import choose_fast

    for aten in (["extern_bias_addmm", "extern_addmm"], ["extern_addmm", "extern_bias_addmm"]):
        cands = [*aten, *T]
        # an addmm artifact of its own ranking extern_addmm first, or a template first
        assert choose_fast([("extern_addmm", 0.9), ("extern_bias_addmm", 0.1)], cands, 0.8, True) == \
            ["extern_bias_addmm"]
        assert choose_fast([(T[0], 0.5), ("extern_addmm", 0.5)], cands, 0.8, True) == [T[0], "extern_bias_addmm"]
        assert choose_fast([(T[0], 0.9)], cands, 0.8, False) == ["extern_bias_addmm"]
    # a plain addmm (no broadcast bias): Inductor offers extern_addmm alone, and it is kept
    assert choose_fast([("extern_addmm", 1.0)], ["extern_addmm", *T], 0.8, True) == ["extern_addmm"]


def test_only_existing_choices_are_returned(tmp_path):
    write_artifact(tmp_path, "_MMRankingTest.py")
    today = ["extern_mm", T[1], T[3], "type=triton_new_config"]  # T[0] and T[2] vanished
    keep = policy(tmp_path, top_k=1).select(request(m=32, candidates=today))
    assert keep == [T[1], "extern_mm"]
    assert set(keep) <= set(today)


def test_never_fewer_than_two_when_top_choice_is_aten(tmp_path):
    large = [("extern_mm", 0.95), (T[3], 0.05), (T[2], 0.0)]
    write_artifact(tmp_path, "_MMRankingTest.py", large=large)
    assert policy(tmp_path, top_k=1).select(request(m=1024)) == ["extern_mm", T[3]]
    # min_choices=1 lets a confident heuristic skip benchmarking altogether
    assert policy(tmp_path, top_k=1, min_choices=1).select(request(m=1024)) == ["extern_mm"]


def test_keep_aten_off(tmp_path):
    write_artifact(tmp_path, "_MMRankingTest.py")
    assert policy(tmp_path, top_k=1, keep_aten=False, min_choices=1).select(request(m=32)) == [T[0]]
    assert policy(tmp_path, top_k=1, keep_aten=False).select(request(m=32)) == [T[0], T[1]]


def test_adaptive_k_stops_at_mass_threshold(tmp_path, monkeypatch):
    write_artifact(tmp_path, "_MMRankingTest.py")
    monkeypatch.setenv("AH_PLUGIN_TOP_K", "adaptive")
    # small leaf: 0.7, 0.25, 0.05 -> 0.9 reached after two
    assert policy(tmp_path).select(request(m=32)) == [T[0], T[1], "extern_mm"]
    monkeypatch.setenv("AH_PLUGIN_TOP_K_MASS", "0.6")
    monkeypatch.setenv("AH_PLUGIN_TOP_K", "10")  # the threshold alone switches adaptive on; k caps it
    p = policy(tmp_path, keep_aten=False)
    assert p.options.adaptive and p.options.mass == 0.6 and p.options.top_k == 10
    # one choice reaches 0.6, but never fewer than two
    assert p.select(request(m=32)) == [T[0], T[1]]
    monkeypatch.setenv("AH_PLUGIN_TOP_K_MASS", "0.99")
    # leaf mass 1.0 needs all three leaf entries; the 0.0 backoff entries are not needed
    assert policy(tmp_path, keep_aten=False).select(request(m=32)) == [T[0], T[1], T[2]]


def test_adaptive_k_mass_of_vanished_choices_is_not_counted(tmp_path):
    write_artifact(tmp_path, "_MMRankingTest.py")
    today = ["extern_mm", T[1], T[2], T[3]]  # the 0.7 leader vanished: 0.25 + 0.05 never reaches 0.9
    keep = policy(tmp_path, top_k=ADAPTIVE_K, keep_aten=False).select(request(m=32, candidates=today))
    # capped at the default k (10): every ranked existing choice
    assert keep == [T[1], T[2], "extern_mm", T[3]]
    # a smaller cap stops earlier
    capped = policy(tmp_path, top_k=2, mass=0.9, keep_aten=False).select(request(m=32, candidates=today))
    assert capped == [T[1], T[2]]


ADAPTIVE_K = "adaptive"


def test_choose_is_pure_and_floors_at_candidates():
    opts = UseOptions(top_k=1, keep_aten=False)
    assert choose([("a", 1.0)], ["a"], opts) == ["a"]  # only one exists: one is fine
    # artifact knows only "a": floor fills from Inductor's order
    assert choose([("a", 1.0)], ["b", "a", "c"], opts) == ["a", "b"]
    with pytest.raises(ValueError):
        UseOptions(top_k=0)
    with pytest.raises(ValueError):
        UseOptions(mass=1.5)


# -------------------------------------------------------------------------------------------------
# fallbacks


def test_no_matching_artifact_falls_back_once(tmp_path):
    write_artifact(tmp_path, "_MMRankingTest.py")
    p = policy(tmp_path, top_k=10)
    a100 = {"name": "mm", "device_capa": (8, 0), "shared_memory": 166912, "device_name": "NVIDIA A100"}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert p.select(request(meta=a100)) is None
        assert p.select(request(meta=a100)) is None
        assert p.select(request(op="bmm")) is None  # no bmm artifact at all
    messages = [str(w.message) for w in caught]
    assert sum(m.startswith("ah_plugin: mm: no artifact matches") for m in messages) == 1
    assert sum(m.startswith("ah_plugin: bmm: no artifact matches") for m in messages) == 1
    assert all("default choices" in m for m in messages)
    # fast mode (the default) with nothing to rank by keeps aten alone: no template is compiled
    fast = policy(tmp_path)
    with pytest.warns(RuntimeWarning, match=r"bmm: no artifact matches .*aten alone is kept \(fast mode\)"):
        assert fast.select(request(op="bmm", candidates=["extern_bmm", T[0]])) == ["extern_bmm"]


def test_verbose_fallback_names_the_rejected_artifact(tmp_path):
    write_artifact(tmp_path, "_MMRankingTest.py")
    p = policy(tmp_path, top_k=10, verbose=True)
    a100 = {"name": "mm", "device_capa": (8, 0), "shared_memory": 166912, "device_name": "NVIDIA A100"}
    with pytest.warns(RuntimeWarning, match=r"MMRankingTest .*precondition false"):
        assert p.select(request(meta=a100)) is None


def test_artifact_that_raises_falls_back(tmp_path):
    path = write_artifact(tmp_path, "_MMRankingTest.py")
    path.write_text(path.read_text().replace('if features["m"] <= 64:', 'if features["missing"]:'))
    p = policy(tmp_path, top_k=10)
    with pytest.warns(RuntimeWarning, match="raised"):
        assert p.select(request()) is None
    assert policy(tmp_path).select(request()) == ["extern_mm"]  # fast mode: aten


def test_artifact_ranking_no_existing_choice_falls_back(tmp_path):
    write_artifact(tmp_path, "_MMRankingTest.py")
    with pytest.warns(RuntimeWarning, match="ranks none of today's choices"):
        assert policy(tmp_path, top_k=10).select(request(candidates=["extern_other", "type=triton_x"])) is None
    assert policy(tmp_path).select(request(candidates=["extern_other", "type=triton_x"])) == ["extern_other"]


def test_ops_filter(tmp_path):
    write_artifact(tmp_path, "_MMRankingTest.py")
    assert RankingPolicy(["addmm"], artifact_dir=str(tmp_path), package=False).select(request()) is None
    assert RankingPolicy(["mm"], artifact_dir=str(tmp_path), package=False, top_k=1).select(request()) == [
        T[0], "extern_mm"]


# -------------------------------------------------------------------------------------------------
# stale report


def test_stale_report_lists_vanished_and_unseen(tmp_path):
    """A candidate the artifact never saw (a config a newer torch added: 2.14 added 128x256x64 with 4 stages
    and 8 warps to the default mm space) is never kept: it is named in one warning per artifact and op,
    whatever the verbosity, and listed by the stale report."""
    write_artifact(tmp_path, "_MMRankingTest.py")
    p = policy(tmp_path)
    today = ["extern_mm", T[1], T[3], "type=triton_new_config"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kept = p.select(request(m=32, candidates=today))
        p.select(request(m=1024, candidates=today))
    assert "type=triton_new_config" not in kept
    named = [str(w.message) for w in caught if "never saw" in str(w.message)]
    assert len(named) == 1 and "1 of today's mm candidates ['type=triton_new_config']" in named[0], named
    assert "they are not timed" in named[0]
    report = p.stale_report()
    assert report == [{
        "artifact": "MMRankingTest",
        "path": str(tmp_path / "_MMRankingTest.py"),
        "op_name": "mm",
        "vanished": sorted([T[0], T[2]]),
        "unseen": ["type=triton_new_config"],
    }]


def test_a_choice_offered_for_another_input_never_vanished(tmp_path, capsys):
    """Candidates differ by input (the CPU's C++ template blocks by shape): a ranked choice offered for any
    input of the process is not reported as gone, and nothing is said at verbose while nothing is unseen."""
    write_artifact(tmp_path, "_MMRankingTest.py")
    p = policy(tmp_path, verbose=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        p.select(request(m=32, candidates=["extern_mm", T[0], T[1]]))  # ranks T[2], T[3]: not offered for m=32
        p.select(request(m=1024, candidates=["extern_mm", T[2], T[3]]))  # ... but offered here
    (report,) = p.stale_report()
    assert report["vanished"] == [] and report["unseen"] == []
    assert not [w for w in caught if "never saw" in str(w.message)]
    assert "never saw" not in capsys.readouterr().err


def test_stats_count_what_the_policy_kept(tmp_path):
    write_artifact(tmp_path, "_MMRankingTest.py")
    p = policy(tmp_path, top_k=1)
    p.select(request(m=32))
    p.select(request(m=1024))
    p.select(request(m=32, candidates=["extern_mm"]))  # one choice: nothing to rank, not counted
    assert p.stats.as_dict() == {"autotunings": 2, "offered": 10, "kept": 4, "without_ranking": 0, "l2_aten": 0,
                                 "unpadded": 0, "dynamic_aten": 0, "unbacked": 0}


def test_stale_report_empty_when_in_sync(tmp_path):
    write_artifact(tmp_path, "_MMRankingTest.py")
    p = policy(tmp_path)
    p.select(request())
    assert p.stale_report()[0]["vanished"] == [] and p.stale_report()[0]["unseen"] == []


# -------------------------------------------------------------------------------------------------
# loader


def test_broken_artifacts_are_skipped_with_one_warning_each(tmp_path):
    write_artifact(tmp_path, "_MMRankingTest.py")
    broken = write_artifact(tmp_path, "_Broken.py", name="Broken")
    broken.write_text(broken.read_text() + "class Broken(:\n")
    raising = write_artifact(tmp_path, "_Raises.py", name="Raises")
    raising.write_text("raise RuntimeError('boom')\n" + raising.read_text())
    (tmp_path / "_Empty.py").write_text("X = 1\n")
    # a hand-written one whose syntax error also hides a mark of an artifact (no "def check_precondition(")
    (tmp_path / "_Typo.py").write_text('class Mine:\n    heuristic_name = "Mine"\n    op_name = "mm"\n'
                                       "    def rank(self features):\n        return []\n")
    (tmp_path / "notanartifact.py").write_text("raise SystemExit('must never run')\n")
    dirs = artifact_loader.artifact_dirs(str(tmp_path))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded = artifact_loader.load_artifacts(dirs)
        artifact_loader.load_artifacts(dirs)  # cached: no second warning
    assert [a.name for a in loaded if a.source == "user"] == ["MMRankingTest"]
    messages = sorted(str(w.message) for w in caught)
    assert len(messages) == 4
    assert any(f"{broken}: executing it found that it has a syntax error: " in m and f"(at {broken}:" in m
               for m in messages), messages
    assert any("_Raises.py" in m and "boom" in m for m in messages)
    assert any("_Empty.py" in m and "no artifact class" in m for m in messages)
    typo = tmp_path / "_Typo.py"
    assert any(f"{typo}: has a syntax error: " in m and f"(at {typo}:4); not executed" in m for m in messages), \
        messages


def test_files_are_executed_once_per_process(tmp_path):
    """Once in this process (and once in its trial process, before: artifact_trial)."""
    counter = tmp_path / "count.txt"
    path = write_artifact(tmp_path, "_MMRankingTest.py")
    path.write_text(f"import os\nopen({str(counter)!r}, 'a').write(f'{{os.getpid()}}\\n')\n" + path.read_text())
    p1, p2 = policy(tmp_path), policy(tmp_path)
    # the same folder named otherwise (relative to the current one), and with the package's folder too
    p3 = RankingPolicy(artifact_dir=os.path.relpath(tmp_path), package=True)
    for _ in range(3):
        p1.select(request())
        p2.select(request())
        p3.select(request())
    pids = counter.read_text().split()
    assert pids.count(str(os.getpid())) == 1 and len(pids) == 2


def test_device_specific_beats_generic_and_user_beats_package(tmp_path):
    user, package = tmp_path / "user", tmp_path / "package"
    user.mkdir()
    package.mkdir()
    write_artifact(package, "_A_Generic.py", name="Generic")
    write_artifact(package, "_B_H200.py", name="ForH200", device_names=("NVIDIA H200",))
    write_artifact(package, "_C_B200.py", name="ForB200", device_names=("NVIDIA B200",))
    pkg_only = (("package", str(package)),)
    assert artifact_loader.select("mm", H100_META, pkg_only).name == "ForH200"
    h100 = dict(H100_META, device_name="NVIDIA H100 80GB HBM3")
    assert artifact_loader.select("mm", h100, pkg_only).name == "Generic"
    write_artifact(user, "_Mine.py", name="Mine")
    both = (("user", str(user)), ("package", str(package)))
    assert artifact_loader.select("mm", H100_META, both).name == "Mine"
    # a user artifact named like a packaged one hides it
    write_artifact(user, "_Mine.py", name="ForH200", device_names=("NVIDIA A100",))
    artifact_loader.clear_cache()
    chosen = artifact_loader.select("mm", H100_META, both)
    assert chosen.name == "Generic" and chosen.source == "package"


def test_artifact_dir_from_environment(tmp_path, monkeypatch):
    write_artifact(tmp_path, "_MMRankingTest.py")
    monkeypatch.setenv("AH_PLUGIN_ARTIFACT_DIR", str(tmp_path))
    dirs = artifact_loader.artifact_dirs()
    assert dirs[0] == ("user", str(tmp_path))
    assert RankingPolicy(top_k=1, package=False).select(request(m=32)) == [T[0], "extern_mm"]


def test_package_dir_is_found():
    directory = artifact_loader.package_artifact_dir()
    assert directory is not None and directory.endswith("artifacts")


def test_ranking_is_cheap(tmp_path):
    choices = ["extern_mm"] + [f"type=triton_cfg{i}" for i in range(40)]
    ranking = [(c, 1.0 / 41) for c in reversed(choices)]
    write_artifact(tmp_path, "_MMRankingTest.py", choices=choices, small=ranking, large=ranking)
    p = policy(tmp_path, top_k=10)
    req = request(candidates=choices)
    p.select(req)  # load once
    n = 2000
    start = time.perf_counter()
    for _ in range(n):
        p.select(req)
    per_call = (time.perf_counter() - start) / n
    assert per_call < 1e-3, per_call


def test_packaged_artifacts_load_cleanly_and_each_hopper_gets_its_own():
    package = (("package", artifact_loader.package_artifact_dir()),)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded = artifact_loader.load_artifacts(package)
    assert not [str(w.message) for w in caught if "ah_plugin" in str(w.message)]
    for artifact in loaded:
        ranking = artifact.heuristic.rank
        assert callable(ranking) and artifact.choices and artifact.op_name
    assert {"MMRankingA100", "MMRankingH100", "MMRankingH200"} <= {a.name for a in loaded}  # all shipped
    # H100 and H200 share capability and shared memory: the H200's device-specific artifact wins there,
    # and the generic H100 one serves every other such device
    assert artifact_loader.select("mm", H100_META, package).name == "MMRankingH200"
    h100 = dict(H100_META, device_name="NVIDIA H100 80GB HBM3")
    assert artifact_loader.select("mm", h100, package).name == "MMRankingH100"
    assert artifact_loader.select("mm", dict(H100_META, device_name=None), package).name == "MMRankingH100"


def test_install_again_with_other_arguments_takes_effect(tmp_path):
    """The process-wide USE policy follows install()/enabled() arguments (top_k, artifact_dir): the
    FX-graph key already changes with them, so the pruning must change too."""
    import ah_plugin
    from ah_plugin.use import ranking
    from ah_plugin.policy import registry

    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    write_artifact(first, "_MMRankingFirst.py", name="MMRankingFirst")
    write_artifact(second, "_MMRankingSecond.py", name="MMRankingSecond", small=[(T[2], 0.9), (T[0], 0.1)])

    def used():
        [found] = [p for p in registry.registered_policies() if isinstance(p, ranking.RankingPolicy)]
        return found

    try:
        ah_plugin.install(use="mm", top_k=3, artifact_dir=str(first))
        assert used().select(request(m=32)) == [T[0], T[1], T[2], "extern_mm"]
        ah_plugin.uninstall()
        ah_plugin.install(use="mm", top_k=1, artifact_dir=str(second))
        assert used().select(request(m=32)) == [T[2], "extern_mm"]
        with ah_plugin.enabled(use="mm", top_k=2, artifact_dir=str(first)):
            assert used().select(request(m=32)) == [T[0], T[1], "extern_mm"]
        assert used().select(request(m=32)) == [T[2], "extern_mm"]
    finally:
        ah_plugin.uninstall()


def test_adaptive_k_and_its_knobs_from_the_python_api(tmp_path):
    """install()'s twins of AH_PLUGIN_TOP_K=adaptive / _TOP_K_MASS / _MIN_CHOICES / _KEEP_ATEN reach the
    USE policy, with the variables' meaning (a threshold alone means adaptive k)."""
    import ah_plugin
    from ah_plugin.use import ranking
    from ah_plugin.policy import registry

    write_artifact(tmp_path, "_MMRankingTest.py")

    def options():
        [found] = [p for p in registry.registered_policies() if isinstance(p, ranking.RankingPolicy)]
        return found.options

    try:
        ah_plugin.install(use="mm", top_k="adaptive", min_choices=3, artifact_dir=str(tmp_path))
        assert (options().adaptive, options().min_choices, options().mass) == (True, 3, 0.9)
        ah_plugin.install(use="mm", top_k_mass=0.5, keep_aten=False, artifact_dir=str(tmp_path))
        assert (options().adaptive, options().mass, options().keep_aten) == (True, 0.5, False)
        ah_plugin.install(use="mm", top_k=4, artifact_dir=str(tmp_path))
        assert (options().adaptive, options().top_k) == (False, 4)
        with pytest.raises(ValueError, match="top_k_mass"):
            ah_plugin.install(use="mm", top_k_mass=1.5)
    finally:
        ah_plugin.uninstall()


def decode(meta):
    """The decoder's 64x2048x5632 up-projection at decode: memory-bound, 24 MB of operands."""
    return request(m=64, k=2048, n=5632, meta=meta)


def test_fast_mode_keeps_aten_alone_where_replay_would_see_a_memory_bound_gemm_in_l2(tmp_path):
    """A template first is timed against aten only when replay can judge it: a memory-bound GEMM with
    16 MiB or more of operands, all within L2, keeps aten alone in fast mode (top-k modes still time it)."""
    write_artifact(tmp_path, "_MMRankingTest.py", timing="cudagraph_replay", support=backed(T[0]))
    h200 = dict(H100_META, l2_bytes=60 * 2**20)  # an H200 reports 60 MiB
    ruled = policy(tmp_path)
    assert ruled.select(decode(h200)) == ["extern_mm"]
    # small operands (90 KB): HBM adds about a microsecond, replay judges the template
    assert ruled.select(request(m=32, meta=h200)) == [T[0], "extern_mm"]
    assert ruled.stats.l2_aten == 1  # counted, for ah_plugin.status()
    unknown = dict(H100_META, device_name="a GPU this machine does not have")
    assert policy(tmp_path).select(decode(unknown)) == [T[0], "extern_mm"]  # L2 size unknown
    tiny_l2 = dict(H100_META, l2_bytes=20 * 2**20)  # operands (24 MB) do not fit: replay reads them from HBM
    assert policy(tmp_path).select(decode(tiny_l2)) == [T[0], "extern_mm"]
    assert policy(tmp_path, top_k=2).select(decode(h200))[:2] == [T[0], T[1]]


def test_the_l2_rule_can_be_switched_off_by_variable_and_by_install(tmp_path, monkeypatch):
    """AH_PLUGIN_L2_RULE=off (or install(l2_rule=False)): fast mode times the ranking's template against
    aten on a memory-bound GEMM within L2 as on any other; the switch is part of the compile-cache key."""
    write_artifact(tmp_path, "_MMRankingTest.py", timing="cudagraph_replay", support=backed(T[0]))
    h200 = dict(H100_META, l2_bytes=60 * 2**20)
    import ah_plugin
    from ah_plugin.config import settings

    ruled = settings.describe(settings.current())
    monkeypatch.setenv("AH_PLUGIN_L2_RULE", "off")
    unruled = policy(tmp_path)
    assert unruled.select(decode(h200)) == [T[0], "extern_mm"] and unruled.stats.l2_aten == 0
    assert settings.describe(settings.current()) != ruled  # FX-graph caches keyed on the settings differ
    monkeypatch.setenv("AH_PLUGIN_L2_RULE", "maybe")  # a bad value is warned and the default (on) kept
    with pytest.warns(UserWarning, match="AH_PLUGIN_L2_RULE=.maybe. is not one of"):
        assert policy(tmp_path).select(decode(h200)) == ["extern_mm"]
    monkeypatch.delenv("AH_PLUGIN_L2_RULE")
    try:
        ah_plugin.install(use="mm", l2_rule=False, artifact_dir=str(tmp_path))
        assert policy(tmp_path).select(decode(h200)) == [T[0], "extern_mm"]
    finally:
        ah_plugin.uninstall()
    assert policy(tmp_path).select(decode(h200)) == ["extern_mm"]


def test_which_gemms_replay_misjudges():
    from ah_plugin.use.l2_residency import gemm_bytes_and_intensity, l2_bytes_for, replay_misjudges

    l2 = 60 * 2**20  # an H200
    bf16 = {"mat1_dtype": "torch.bfloat16"}
    # the decoder at decode: 64 rows, 23 MB weights stay in L2 under replay; memory-bound
    assert replay_misjudges(dict(bf16, m=64, k=2048, n=5632), l2)
    # under 16 MiB of operands HBM adds about a microsecond; the latency wins replay measures there stand
    assert not replay_misjudges(dict(bf16, m=64, k=2048, n=2048), l2)
    assert not replay_misjudges(dict(bf16, m=13, k=1000, n=4099), l2)
    assert not replay_misjudges(dict(bf16, m=128, k=768, n=2), l2)
    assert replay_misjudges(dict(bf16, m=1, k=4096, n=4096), l2)  # a 32 MiB weight read by one row
    # the floor itself: the widest 8 x 8192 x n just under 16 MiB of operands is not ruled, n + 1 is
    from ah_plugin.use.l2_residency import MIN_RULED_BYTES
    n = (MIN_RULED_BYTES // 2 - 8 * 8192) // (8192 + 8)
    at_floor = dict(bf16, m=8, k=8192, n=n)
    total, _ = gemm_bytes_and_intensity(at_floor)
    assert total < MIN_RULED_BYTES < gemm_bytes_and_intensity(dict(at_floor, n=n + 1))[0]
    assert not replay_misjudges(at_floor, l2)
    assert replay_misjudges(dict(at_floor, n=n + 1), l2)
    # its vocabulary projection: a 131 MB weight never fits, so replay reads it from HBM as the model does
    assert not replay_misjudges(dict(bf16, m=64, k=2048, n=32000), l2)
    # compute-bound: L2 residency hardly moves its time
    total, intensity = gemm_bytes_and_intensity(dict(bf16, m=2048, k=2048, n=2048))
    assert total == 3 * 2048 * 2048 * 2 and intensity > 600
    assert not replay_misjudges(dict(bf16, m=2048, k=2048, n=2048), l2)
    assert replay_misjudges(dict(bf16, m=64, k=4096, n=2048), l2)
    # fp32 has another ridge (no bf16 tensor-core peak): left to replay, as is any dtype the rule was not
    # measured on
    assert not replay_misjudges({"mat1_dtype": "torch.float32", "m": 64, "k": 2048, "n": 2048}, l2)
    assert gemm_bytes_and_intensity({"mat1_dtype": "torch.int8", "m": 64, "k": 64, "n": 64}) is None
    # a batch multiplies the bytes, not the intensity
    assert not replay_misjudges(dict(bf16, m=64, k=2048, n=2048, b=8), l2)
    # unknown sizes or L2: the rule stays out of the way
    assert not replay_misjudges(dict(bf16, m=64, k=2048), l2) and not replay_misjudges(dict(bf16, m=64, k=8, n=8), None)
    assert l2_bytes_for({"device_capa": (0, 0), "device_name": "cpu"}) is None


def test_time_unbacked_off_by_install_keeps_aten_on_a_gpu_and_changes_the_cache_key(tmp_path):
    """install(time_unbacked=False), the twin of AH_PLUGIN_TIME_UNBACKED=off: an unbacked template first is
    not timed on a GPU; the switch is part of the compile-cache key; uninstall restores timing it."""
    import ah_plugin
    from ah_plugin.config import settings

    write_artifact(tmp_path, "_MMRankingTest.py", timing="cudagraph_replay", support=None)
    try:
        ah_plugin.install(use="mm", artifact_dir=str(tmp_path))
        timing = settings.describe(settings.current())
        ah_plugin.install(use="mm", time_unbacked=False, artifact_dir=str(tmp_path))
        assert policy(tmp_path).select(request(m=32)) == ["extern_mm"]
        assert settings.describe(settings.current()) != timing
    finally:
        ah_plugin.uninstall()
    assert policy(tmp_path).select(request(m=32)) == [T[0], "extern_mm"]
