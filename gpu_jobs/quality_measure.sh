#!/usr/bin/env bash
# Fast and quality modes against max-autotune off and default max-autotune on one GPU (run from the
# repository root on the device machine; results packed into $OUT/<part>.tgz by run_batch.sh):
#   PART=models bash gpu_jobs/quality_measure.sh    real models: off, fast and quality on MODELS (GPT-2 small,
#                                                   ViT-small, Llama prefill and decode, a ViT training step),
#                                                   then default max-autotune on DEFAULT_MODELS (the ones it
#                                                   finishes within RUN_TIMEOUT)
#   PART=kernels bash gpu_jobs/quality_measure.sh   single GEMMs (torchgen_ah/data/quality_eval_shapes.csv):
#                                                   compile and replay-timed kernel per mode, REPS processes
#   PART=repeat bash gpu_jobs/quality_measure.sh    more processes of off, fast and quality on REPEAT_MODELS
set -u
: "${OUT:?set OUT to the output folder}"
PART=${PART:-models}
export AH_BATCH_NAME=$PART
E2E="python3 -m torchgen_ah.e2e_models"
# a tool's own time budget: its step's limit less 25 s, so it writes its report before the step is killed
budget() { python3 -c "print(round(max($1 - 25, 30) / 60, 2))"; }
if [ "$PART" = models ]; then
  bash gpu_jobs/run_batch.sh \
    "ours:${OURS_S:-330}:$E2E --models ${MODELS:-gpt2,vit,llama_prefill,llama_decode,vit_train} --modes off,fast,quality --run-timeout 90 --max-minutes $(budget ${OURS_S:-330}) --out \$OUT/e2e; rm -rf \$OUT/e2e/*/rep*/caches_*" \
    "default:${DEFAULT_S:-230}:$E2E --models ${DEFAULT_MODELS:-gpt2,vit,llama_prefill} --modes default --run-timeout ${RUN_TIMEOUT:-95} --max-minutes $(budget ${DEFAULT_S:-230}) --out \$OUT/e2e_default; rm -rf \$OUT/e2e_default/*/rep*/caches_*"
elif [ "$PART" = kernels ]; then
  bash gpu_jobs/run_batch.sh \
    "kernels:${KERNELS_S:-260}:python3 -m torchgen_ah.compile_cost torchgen_ah/data/quality_eval_shapes.csv --shapes ${SHAPES:-12} --modes off,fast,quality,default --reps ${REPS:-1} --max-minutes $(budget ${KERNELS_S:-260}) --out \$OUT/cc; rm -rf \$OUT/cc/caches_* \$OUT/cc/proc*/caches_*"
else
  bash gpu_jobs/run_batch.sh \
    "repeat:${REPEAT_S:-200}:$E2E --models ${REPEAT_MODELS:-llama_decode,gpt2} --modes off,fast,quality --reps ${REPS:-2} --run-timeout 90 --max-minutes $(budget ${REPEAT_S:-200}) --out \$OUT/e2e_repeat; rm -rf \$OUT/e2e_repeat/*/rep*/caches_*"
fi
