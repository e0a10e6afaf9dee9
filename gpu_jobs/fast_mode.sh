#!/usr/bin/env bash
# Fast mode on one GPU, in two calls of under 10 minutes each (run from the repository root on the device
# machine; results packed into $OUT/<part>.tgz by run_batch.sh):
#   PART=checks bash gpu_jobs/fast_mode.sh   every GPU test (about 3.5 min), then single GEMMs: compile and
#                                            kernel time per mode on the first 20 evaluation shapes, the
#                                            timing methods' picks, and the results cache's record/hit runs
#   PART=models bash gpu_jobs/fast_mode.sh   real models: off, fast, default max-autotune and k=10, one
#                                            fresh process each (MODEL_REPS repetitions, MODELS_MIN minutes)
set -u
: "${OUT:?set OUT to the output folder}"
PART=${PART:-checks}
SHAPES=${SHAPES:-20}
MODEL_REPS=${MODEL_REPS:-1}
MODELS_MIN=${MODELS_MIN:-8.8}
export AH_BATCH_NAME=$PART
if [ "$PART" = checks ]; then
  bash gpu_jobs/run_batch.sh \
    "tests:200:python3 -m pytest tests/test_fast_gpu.py tests/test_use_gpu.py tests/test_plugin_gpu.py tests/test_tunable_limits.py -m gpu -q -rA -s --durations=20 --basetemp=\$OUT/t" \
    "kernels:250:python3 -m torchgen_ah.compile_cost --shapes $SHAPES --modes off,default,fast,replay_all --max-minutes 4.0 --out \$OUT/cc --results \$OUT/RESULTS.md && rm -rf \$OUT/cc/caches_*" \
    "cache:75:python3 -m torchgen_ah.compile_cost torchgen_ah/data/cache_shapes.csv --shapes 4 --modes cache --max-minutes 1.1 --out \$OUT/cache && rm -rf \$OUT/cache/caches_*"
else
  bash gpu_jobs/run_batch.sh \
    "models:$(python3 -c "print(int($MODELS_MIN * 60 + 20))"):python3 -m torchgen_ah.e2e_models --models gpt2,vit,llama_prefill,llama_decode,vit_train --modes off,fast,default,ours_k10 --reps $MODEL_REPS --max-minutes $MODELS_MIN --run-timeout 150 --out \$OUT/e2e --results \$OUT/RESULTS.md; rm -rf \$OUT/e2e/*/rep*/caches_*"
fi
