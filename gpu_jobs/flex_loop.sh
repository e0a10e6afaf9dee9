#!/usr/bin/env bash
# FlexAttention's loop on one GPU, in one device call (run from the repository root on the device machine):
#   1. the flex GPU tests (collection logs every decoding config; fast mode times the shipped ranking's first
#      config against off's and matches off), log in $OUT/flex_gpu_tests.log;
#   2. decoding with a static KV cache through FlexAttention, every mode compiled and timed in one process
#      (torchgen_ah.evaluation.studies.kv_decode), $OUT/kv_decode_flex.{json,md};
#   3. more flex data from the generator for the time left (torchgen_ah.flex.gen_data_flex), packed into
#      $OUT/flex_gen.tgz.
# TESTS_S, DECODE_S, GEN_S bound each step (120, 300, 90 s); KV_ARGS adds to the decode study's arguments.
set -u
: "${OUT:?set OUT to the output folder}"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/install.txt" 2>&1 || export PYTHONPATH=$PWD
timeout -k 5 "${TESTS_S:-120}" python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_flex_gpu.py 2>&1 \
  | tee "$OUT/flex_gpu_tests.log"
timeout -k 5 "${DECODE_S:-300}" python3 -m torchgen_ah.evaluation.studies.kv_decode --attention flex \
  --budget-s "$(( ${DECODE_S:-300} - 90 ))" --json "$OUT/kv_decode_flex.json" ${KV_ARGS:-} 2>&1 \
  | tee "$OUT/kv_decode_flex.md"
mkdir -p /tmp/flex_gen
timeout -k 5 "${GEN_S:-90}" python3 -m torchgen_ah.flex.gen_data_flex -o /tmp/flex_gen/flex.txt --num-reps 1 \
  --max-minutes "$(python3 -c "print(max(0.2, (${GEN_S:-90} - 40) / 60))")" --no-progress > /tmp/flex_gen/run.log 2>&1
tar -czf "$OUT/flex_gen.tgz" -C /tmp flex_gen
