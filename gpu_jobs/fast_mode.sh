#!/usr/bin/env bash
# Fast mode on one GPU, in two calls of under 10 minutes each (run from the repository root on the device
# machine; results packed into $OUT/<part>.tgz by run_batch.sh; each step has its own time limit):
#   PART=one bash gpu_jobs/fast_mode.sh   every GPU test, then GPT-2 small, the ViT and Llama prefill in
#                                         max-autotune off, fast mode and default max-autotune
#   PART=two bash gpu_jobs/fast_mode.sh   Llama decode and the ViT training step in the same modes (and
#                                         k=10 while time is left), single GEMMs (compile and kernel time per
#                                         mode on the first SHAPES evaluation shapes, the timing methods' picks)
#                                         and the results cache's record/hit runs
set -u
: "${OUT:?set OUT to the output folder}"
PART=${PART:-one}
SHAPES=${SHAPES:-14}
export AH_BATCH_NAME=$PART
MODELS="python3 -m torchgen_ah.e2e_models --run-timeout 170 --results \$OUT/RESULTS.md"
if [ "$PART" = one ]; then
  bash gpu_jobs/run_batch.sh \
    "tests:210:python3 -m pytest tests/test_fast_gpu.py tests/test_use_gpu.py tests/test_plugin_gpu.py tests/test_tunable_limits.py -m gpu -q -rA -s --durations=20 --basetemp=\$OUT/t; rm -rf \$OUT/t" \
    "models:320:$MODELS --models gpt2,vit,llama_prefill --modes off,fast,default --max-minutes 5.1 --out \$OUT/e2e; rm -rf \$OUT/e2e/*/rep*/caches_*"
else
  bash gpu_jobs/run_batch.sh \
    "models:290:$MODELS --models llama_decode,vit_train --modes off,fast,default,ours_k10 --max-minutes 4.6 --out \$OUT/e2e; rm -rf \$OUT/e2e/*/rep*/caches_*" \
    "kernels:185:python3 -m torchgen_ah.compile_cost --shapes $SHAPES --modes off,fast,default,replay_all --max-minutes 2.9 --out \$OUT/cc --results \$OUT/RESULTS.md; rm -rf \$OUT/cc/caches_*" \
    "cache:70:python3 -m torchgen_ah.compile_cost torchgen_ah/data/cache_shapes.csv --shapes 4 --modes cache --max-minutes 1.0 --out \$OUT/cache; rm -rf \$OUT/cache/caches_*"
fi
