"""GPU bar (USE half): with a packaged mm artifact for this GPU, USE benchmarks at most k+1 choices per
mm (pruned before Triton code is generated) and outputs match eager. Run on the GPU machine:

    PYTHONPATH=. python -m pytest tests/test_use_gpu.py -m gpu -q -s

Each mode runs in a fresh process with a fresh Inductor cache; the figures are printed (``-s``).
"""

from __future__ import annotations

import pytest
import torch

from ah_plugin import demo

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.slow,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

K = 10
# five bf16 shapes: square, LLM projection, tall-skinny, large-K, small
SHAPES = [(1024, 1024, 1024), (2048, 4096, 1024), (8192, 256, 512), (128, 8192, 1024), (256, 512, 256)]


def spec():
    return {"shapes": SHAPES, "dtype": "bfloat16", "op": "mm", "device": "cuda",
            "compile_mode": "max-autotune-no-cudagraphs"}


def test_use_mm_benchmarks_at_most_k_plus_one(tmp_path):
    default = demo.run_mode("default", spec(), str(tmp_path), {"AH_PLUGIN_DISABLE": "1"})
    used = demo.run_mode("use", spec(), str(tmp_path), {
        "TORCHINDUCTOR_AUTOHEURISTIC_USE": "mm", "AH_PLUGIN_TOP_K": str(K), "AH_PLUGIN_VERBOSE": "1"})
    if not used["stale"]:
        pytest.skip("no packaged mm artifact matches this GPU (use mode fell back to default choices)")
    for name, result in (("default", default), ("use", used)):
        counts = [len(a["timed"]) for a in result["autotunings"] if a.get("op") == "mm"]
        print(f"\n{name}: compile {result['compile_s']:.1f} s, benchmarked per mm {counts}, "
              f"matched eager {result['matched']} (max abs err {result['max_abs_err']:.3g})")
    print(f"stale report: {used['stale']}")
    if torch.cuda.get_device_name() == "NVIDIA H200":  # the device-specific artifact wins on its device
        assert {r["artifact"] for r in used["stale"]} == {"MMRankingH200"}, used["stale"]
    tunings = [a for a in used["autotunings"] if a.get("op") == "mm"]
    assert len(tunings) == len(SHAPES)
    for tuning in tunings:
        assert 2 <= len(tuning["timed"]) <= K + 1, tuning
        assert "extern_mm" in tuning["offered"]
    default_counts = [len(a["timed"]) for a in default["autotunings"] if a.get("op") == "mm"]
    assert sum(len(t["timed"]) for t in tunings) < sum(default_counts)
    assert used["matched"] and default["matched"]
