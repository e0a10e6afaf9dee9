#!/usr/bin/env bash
# GPU tests of the plugin core (collect on 5 bf16 shapes + built-in parity, pre-codegen pruning) and
# the overhead benchmark. Runs from the repo root; results under $OUT. Expected: 8-12 minutes on one H200.
set -uo pipefail
OUT="${OUT:-/tmp/ah_plugin_out}"
mkdir -p "$OUT"
export PYTHONPATH=.
python3 -c "import torch; print(torch.__version__, torch.cuda.get_device_name())" | tee "$OUT/plugin_env.txt"
timeout 1500 python3 -m pytest tests/test_plugin_gpu.py -m gpu -q -s -rA --durations=10 \
  --basetemp="$OUT/plugin_tmp" 2>&1 | tee "$OUT/plugin_gpu_tests.txt"
timeout 300 python3 benchmarks/plugin_overhead.py --runs 7 2>&1 | tee "$OUT/plugin_overhead.txt"
cp benchmarks/RESULTS.md "$OUT/RESULTS.md" 2>/dev/null || true
