"""The results-cache compile benchmark (torchgen_ah.evaluation.tunable_compile) without compiling anything: the bar rule on hand-made results, and the run
order (and the median of repeated warm runs) under a budget, with `run` replaced by a fake."""

from __future__ import annotations

import argparse
import statistics

import pytest

from torchgen_ah.evaluation import tunable_compile as tc

CHOICES = {"mm,8x768x768": "triton_mm_1", "mm,8x768x3072": "triton_mm_4"}


def result(seconds: float, other: int = 0, benchmarked=(), choices=None, wall: float = 30.0) -> dict:
    """One run's result as `run` returns it."""
    return {"model": "BERT", "seconds": seconds, "wall": wall, "benchmarked": [list(b) for b in benchmarked],
            "other": {"config_benchmarks": other, "coordinate_descent": 0}, "stats": {},
            "choices": dict(choices or {})}


def gemm_results(hit_other: int, off_other: int = 6) -> dict:
    """GEMM-only variant, warm phase: hit within 1.10x of off, no GEMM benchmarks, the tuning run's kernels."""
    return {
        "off": {"warm": result(5.5, other=off_other)},
        "gemm_tune": {"cold": result(20.7, other=off_other, benchmarked=[("mm", 21)], choices=CHOICES)},
        "gemm_hit": {"warm": result(5.8, other=hit_other, choices=CHOICES)},
    }


def gemm_warm_line(results: dict) -> str:
    return next(line for line in tc.bar_lines(results) if line.startswith("- GEMM autotuning only, warm"))


def test_bar_passes_when_hit_autotunes_no_more_than_off():
    # The H200 run: off did 6 reduction-config benchmarks, the hit 5. The old rule (none at all) failed this.
    line = gemm_warm_line(gemm_results(hit_other=5))
    assert "non-GEMM autotunings: 5 (off: 6)" in line
    assert line.endswith("**PASS**")
    assert gemm_warm_line(gemm_results(hit_other=6)).endswith("**PASS**")


def test_bar_fails_when_hit_autotunes_more_than_off():
    line = gemm_warm_line(gemm_results(hit_other=7))
    assert "non-GEMM autotunings: 7 (off: 6)" in line
    assert line.endswith("**FAIL**")


def test_bar_still_fails_on_gemm_benchmarks_or_ratio():
    results = gemm_results(hit_other=0, off_other=0)
    results["gemm_hit"]["warm"]["benchmarked"] = [["mm", 3]]
    assert gemm_warm_line(results).endswith("**FAIL**")
    results = gemm_results(hit_other=0, off_other=0)
    results["gemm_hit"]["warm"]["seconds"] = 5.5 * 1.2
    assert gemm_warm_line(results).endswith("**FAIL**")


def test_plan_puts_the_bar_runs_repeats_and_profile_before_the_informational_runs():
    steps = tc.plan(["gemm"], warm_repeats=3, profile="gemm_hit")
    assert steps == [
        ("off", "cold", "run"), ("gemm_tune", "cold", "run"), ("gemm_hit", "cold", "run"),
        ("off", "warm", "run"), ("gemm_hit", "warm", "run"),
        ("off", "warm", "repeat"), ("gemm_hit", "warm", "repeat"),
        ("off", "warm", "repeat"), ("gemm_hit", "warm", "repeat"),
        ("gemm_hit", "warm", "profile"),
        ("gemm_default", "cold", "run"), ("gemm_tune", "warm", "run"), ("gemm_default", "warm", "run"),
    ]


def test_plan_two_variants_first_named_first_and_off_warm_once():
    steps = [(key, phase) for key, phase, kind in tc.plan(["gemm", "mode"]) if kind == "run"]
    assert steps[:8] == [("off", "cold"), ("gemm_tune", "cold"), ("gemm_hit", "cold"), ("off", "warm"),
                         ("gemm_hit", "warm"), ("mode_tune", "cold"), ("mode_hit", "cold"), ("mode_hit", "warm")]
    assert steps.count(("off", "warm")) == 1
    assert len(steps) == len(set(steps)) == 2 + 2 * 6  # every run, each phase once


class FakeClock:
    """Stands in for the `time` module in tunable_compile: advanced by the fake runs' walls."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


@pytest.fixture
def fake_runs(monkeypatch):
    """Replace `run` by a fake taking 30 s of fake time; returns the list of (key, phase, profile) calls."""
    clock, calls = FakeClock(), []
    warm_seconds = {"off": iter([5.0, 7.0, 5.5]), "gemm_hit": iter([6.0, 4.0, 5.0])}

    def fake_run(key, phase, device, model, out_dir, profile=False):
        calls.append((key, phase, profile))
        clock.now += 30.0
        seconds = next(warm_seconds[key]) if phase == "warm" and not profile and key in warm_seconds else 10.0
        return result(seconds, choices=CHOICES if key.startswith("gemm_") else None)

    monkeypatch.setattr(tc, "time", clock)
    monkeypatch.setattr(tc, "run", fake_run)
    return calls


def args(max_minutes: float) -> argparse.Namespace:
    return argparse.Namespace(variants=["gemm"], warm_repeats=3, profile="gemm_hit", max_minutes=max_minutes,
                              device="cuda", model="auto", out_dir="/nonexistent")


def test_run_all_under_budget_spends_it_on_the_bar_and_its_repeats(fake_runs, capsys):
    # 4.2 minutes = 8 runs of 30 s: the five bar runs and three repeats; the rest is skipped.
    checkpoints = []
    results, skipped = tc.run_all(args(4.2), checkpoint=lambda r, s: checkpoints.append(len(s)))
    assert fake_runs == [("off", "cold", False), ("gemm_tune", "cold", False), ("gemm_hit", "cold", False),
                         ("off", "warm", False), ("gemm_hit", "warm", False),
                         ("off", "warm", False), ("gemm_hit", "warm", False), ("off", "warm", False)]
    assert skipped == [("gemm_default", "cold"), ("gemm_tune", "warm"), ("gemm_default", "warm")]
    assert len(checkpoints) == len(fake_runs)
    assert "[profile] gemm_hit (warm): skipped" in capsys.readouterr().err
    assert results["off"]["warm"]["seconds_all"] == [5.0, 7.0, 5.5]
    assert results["off"]["warm"]["seconds"] == 5.5
    assert results["gemm_hit"]["warm"]["seconds_all"] == [6.0, 4.0]


def test_run_all_repeats_report_the_median_of_all_samples(fake_runs):
    results, skipped = tc.run_all(args(0))
    assert skipped == []
    assert fake_runs[9] == ("gemm_hit", "warm", True)  # the profile, before the informational runs
    assert [call[0] for call in fake_runs[10:]] == ["gemm_default", "gemm_tune", "gemm_default"]
    for key, samples in (("off", [5.0, 7.0, 5.5]), ("gemm_hit", [6.0, 4.0, 5.0])):
        assert results[key]["warm"]["seconds_all"] == samples
        assert results[key]["warm"]["seconds"] == statistics.median(samples)
