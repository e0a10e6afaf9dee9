#!/usr/bin/env bash
# Use mode on the GPU machine (~10 minutes on one H200): the GPU bar's USE half and the demo on CUDA.
# Run from the repo root. Writes results under $OUT.
set -u
export PYTHONPATH=.
OUT=${OUT:-/tmp/ah_use_gpu}
mkdir -p "$OUT"
python -m pytest tests/test_use_gpu.py -m gpu -q -s 2>&1 | tee "$OUT/test_use_gpu.txt"
timeout 420 python -m ah_plugin.demo --workdir "$OUT/demo" 2>&1 | tee "$OUT/demo.txt"
python benchmarks/use_overhead.py 2>&1 | tee "$OUT/use_overhead.txt"
cp benchmarks/RESULTS.md "$OUT/RESULTS.md"
