#!/usr/bin/env bash
# Results cache benchmark limits (issue 4) on one GPU, about 2 minutes: the GPU test of the tunable limits
# and the benchmarker-signature test (the CPU-path ones run in CI) (max tuning duration/iterations reach Inductor's benchmark_gpu on a tuning miss,
# not with the cache off). Writes $OUT/tunable_limits.txt.
set -uo pipefail
: "${OUT:?set OUT to the output folder}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
python3 -m pytest tests/test_tunable_limits.py -m "gpu or not slow" -k "gpu or limit_maps" -q -rs --durations=10 \
  > "$OUT/tunable_limits.txt" 2>&1
echo "tests rc=$?" >> "$OUT/tunable_limits.txt"
