"""GPU: FlexAttention's decoding kernel collected and used through the plugin, in fresh processes.

Collection logs one row per config default max-autotune times, with the call's flex features and the
configs' ids; use mode (fast) keeps the shipped H200 ranking's first config and off's default config, times
the two, and computes what max-autotune off computes (on an H200: the only GPU a shipped flex ranking
covers); the results cache records the winner of quality mode's timing (on any GPU: without a ranking it
times every config) and answers the next process with it alone. Run on the device machine; skipped without
CUDA.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.slow,
              pytest.mark.skipif(not torch.cuda.is_available(),
                                 reason="needs a CUDA GPU: FlexAttention's configs are autotuned on GPUs only")]

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r'''
import json, sys, torch
import ah_plugin
import ah_plugin.tunable
from ah_plugin.inductor import flex_choices
from torchgen_ah.evaluation.studies.autotune_families import _flex
spec = json.loads(sys.argv[1])
work = _flex("flex_decoding", "decode", 8, 32, 8, 4096, 128, kv_seq=4096)
fn, inputs = work.build()
off = torch.compile(fn, dynamic=False)(*inputs)
torch.compiler.reset()
with ah_plugin.enabled(**spec):
    out = torch.compile(fn, mode="max-autotune-no-cudagraphs", dynamic=False)(*inputs)
torch.cuda.synchronize()
print("RESULT " + json.dumps({"max_diff": (out.float() - off.float()).abs().max().item(),
                              "stats": dict(flex_choices.stats), "cache": ah_plugin.tunable.get_stats()}))
'''


def _child(tmp_path, spec: dict, **variables: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHINDUCTOR_", "AH_"))}
    env.update(TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"), TRITON_CACHE_DIR=str(tmp_path / "triton"),
               PYTHONPATH=REPO, **variables)
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(spec)], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT "):])


def test_collection_logs_every_decoding_config_with_flex_features(tmp_path):
    log = tmp_path / "flex.txt"
    result = _child(tmp_path, {"collect": ["flex_decoding"], "log_path": str(log)})
    assert result["max_diff"] < 1e-2
    lines = log.read_text().splitlines()
    metadata = json.loads(lines[0])
    assert metadata["name"] == "flex_decoding"
    assert metadata["numerical_features"][:5] == ["batch", "q_heads", "kv_heads", "q_seq", "kv_seq"]
    header = lines[1].split(",")
    rows = [dict(zip(header, line.split(","))) for line in lines[2:]]
    choices = {row["choice"] for row in rows}
    assert len(choices) >= 3 and all(c.startswith("flexdecode_BLOCK-N=") for c in choices)
    assert {row["q_heads"] for row in rows} == {"32"} and {row["kv_seq"] for row in rows} == {"4096"}


@pytest.mark.skipif(torch.cuda.is_available() and torch.cuda.get_device_name() != "NVIDIA H200",
                    reason="the shipped FlexAttention rankings are the H200's: on another GPU fast mode keeps off's "
                           "config alone, so there is no ranked config to time")
def test_fast_mode_times_the_rankings_first_config_against_offs_and_matches_off(tmp_path):
    result = _child(tmp_path, {"use": ["flex_decoding"], "top_k": "fast"})
    assert result["stats"]["decided"] >= 1 and result["stats"]["without_ranking"] == 0
    assert result["stats"]["kept"] == 2 * result["stats"]["decided"]  # the first config and off's, timed
    assert result["max_diff"] < 1e-2


def test_the_results_cache_records_the_timed_winner_and_answers_the_next_process_with_it_alone(tmp_path):
    results = tmp_path / "results.csv"
    cache = {"AH_TUNABLE_ENABLED": "1", "AH_TUNABLE_FILENAME": str(results),
             "TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1"}  # Inductor's own caches would skip the lowering
    first = _child(tmp_path, {"use": ["flex_decoding"], "top_k": "quality"}, **cache)
    rows = [line.split(",") for line in results.read_text().splitlines() if line.startswith("flex_decoding,")]
    assert len(rows) == 1 and rows[0][2].startswith("flexdecode_BLOCK-N="), results.read_text()
    assert first["cache"]["tuned"] >= 1 and first["cache"]["hits"] == 0
    second = _child(tmp_path, {"use": ["flex_decoding"], "top_k": "quality"}, **cache)
    assert second["cache"]["hits"] >= 1 and second["cache"]["misses"] == 0
    assert second["max_diff"] < 1e-2
