#!/usr/bin/env bash
# Every GPU test of the project in one command, on one GPU (run from the repository root on the device
# machine): the tests marked gpu (they skip without CUDA, so a CPU run only lists them). The log and a
# junit report land in $OUT (gpu_tests.log, gpu_tests.xml); FILES= names a subset of test files or node ids,
# GPU_TESTS_S (570) bounds the run: no test starts in its last GPU_TESTS_MARGIN_S (90, at most half the limit)
# seconds (pytest's --time-budget, tests/conftest.py: each one left is reported as skipped, saying so, and the
# junit report is written), and a test still running at the limit is stopped; each test's name and outcome is
# its own line of the log, so even a stopped run says which tests passed. Each GPU test compiles in fresh processes with
# fresh caches: the whole set takes longer than one device call of 10 minutes (on an H100, 14 of the 26 in
# 565 s), so a session runs it in two calls, or runs the files it changed.
set -u
: "${OUT:?set OUT to the output folder}"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/gpu_tests_install.txt" 2>&1 \
  || export PYTHONPATH=$PWD
LIMIT=${GPU_TESTS_S:-570}
BUDGET=$(( LIMIT - ${GPU_TESTS_MARGIN_S:-90} )); [ "$BUDGET" -ge $(( LIMIT / 2 )) ] || BUDGET=$(( LIMIT / 2 ))
timeout -k 10 "$LIMIT" python3 -m pytest -v -m gpu --time-budget "$BUDGET" -p no:cacheprovider --durations=15 \
  --junitxml="$OUT/gpu_tests.xml" ${FILES:-tests} 2>&1 | tee "$OUT/gpu_tests.log"
