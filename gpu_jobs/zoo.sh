#!/usr/bin/env bash
# The model zoo (python -m torchgen_ah.evaluation.zoo) and the step profile on one GPU, in device calls of
# under 10 minutes each (run from the repository root on the device machine; results packed into
# $OUT/zoo_<part>.tgz by run_batch.sh: results.jsonl, zoo.md / step_profile.md, RESULTS.md, the logs):
#   PART=a bash gpu_jobs/zoo.sh        vision: resnet50_cl, mobilenetv3_cl, convnext_cl, vit_small, swin_tiny and
#                                      the CNN and ViT training steps
#   PART=b bash gpu_jobs/zoo.sh        language: llama_serving, llama_decode/prefill, qwen2_decode/prefill, gpt2,
#                                      bert, t5, mixtral_moe and the decoder training step
#   PART=rest bash gpu_jobs/zoo.sh     every zoo model not yet measured in the results files DONE names
#                                      (comma-separated paths in this tree, e.g. the a and b runs' results.jsonl
#                                      copied under benchmarks/runs/zoo_h200/): what a part's time budget cut
#   PART=quality bash gpu_jobs/zoo.sh  quality mode on the decoders and the encoder (llama_decode, qwen2_decode,
#                                      gpt2, bert, llama_prefill) with MODES off,quality,off_again by default,
#                                      its report against quality mode's bars (--report quality, section
#                                      zoo_quality); add quality_frozen,off_frozen to MODES to price freezing
#   PART=profile bash gpu_jobs/zoo.sh  the step profile (kernels by group, roofline) of the decoders and
#                                      encoders under max-autotune off, one process (about 2-3 minutes)
# MODES (off,fast,off_again) for the zoo parts; quality mode where time is left, beside off in the same call,
# e.g. PART=rest DONE= MODELS=resnet50_cl,llama_decode MODES=off,fast,quality,off_again;
# MODELS= overrides a part's list; ZOO_S (555) is the zoo step's limit in seconds, the zoo's own budget
# 45 s less, so its report is written before the step is stopped.
# Cost per process (one (model, mode) in a fresh process with fresh caches), estimated for the H200 machine:
# 6-8 s of start-up (Python, torch, CUDA, timm or transformers), the compile (max-autotune off 5-15 s for
# these few-layer models, fast mode within 1.3x of that), 2-5 s of step timing (1 s warm-up and 20 windows
# per batch size; the serving pattern times 8 sizes, about 12 s) and an eager check under a second: 15-30 s,
# 45 s for a training step or the serving pattern. A part of 7-10 models x 3 modes fits 8.5 minutes only at
# about 20 s a process; the zoo starts a model only while its budget holds all the model's processes (each
# at 30 s before the first, then at 1.2x the model's longest), cuts whole models, names them in its report,
# and PART=rest with DONE set to the earlier results files runs exactly those.
# Join the parts' results with: python -m torchgen_ah.evaluation.zoo --combine A.jsonl,B.jsonl,... --results
# benchmarks/RESULTS.md (and step_profile --results for the profile).
set -u
: "${OUT:?set OUT to the output folder}"
PART=${PART:-a}
export AH_BATCH_NAME=zoo_$PART
ZOO_S=${ZOO_S:-555}
Q_MODELS=llama_decode,qwen2_decode,gpt2,bert,llama_prefill
if [ "$PART" = quality ]; then MODES=${MODES:-off,quality,off_again}; fi
MODES=${MODES:-off,fast,off_again}
A_MODELS=resnet50_cl,mobilenetv3_cl,convnext_cl,vit_small,swin_tiny,resnet50_cl_train,vit_small_train
B_MODELS=llama_serving,llama_decode,llama_prefill,qwen2_decode,qwen2_prefill,gpt2,bert,t5,mixtral_moe,llama_train
ZOO_MIN=$(python3 -c "print(round(max($ZOO_S - 45, 60) / 60, 2))")
zoo_step() {  # zoo_step MODELS [EXTRA ARGUMENTS]
  echo "zoo:$ZOO_S:python3 -m torchgen_ah.evaluation.zoo --models $1 --modes $MODES --max-minutes $ZOO_MIN --run-timeout ${RUN_TIMEOUT:-150} --out \$OUT/zoo --results \$OUT/RESULTS.md ${2:-}; rm -rf \$OUT/zoo/*/rep*/caches_*"
}
case "$PART" in
  a) bash gpu_jobs/run_batch.sh "$(zoo_step "${MODELS:-$A_MODELS}")" ;;
  b) bash gpu_jobs/run_batch.sh "$(zoo_step "${MODELS:-$B_MODELS}")" ;;
  quality) bash gpu_jobs/run_batch.sh "$(zoo_step "${MODELS:-$Q_MODELS}" "--report quality")" ;;
  rest) bash gpu_jobs/run_batch.sh "$(zoo_step "${MODELS:-$A_MODELS,$B_MODELS}" "${DONE:+--skip-done $DONE}")" ;;
  profile) bash gpu_jobs/run_batch.sh "profile:${PROFILE_S:-300}:python3 -m torchgen_ah.evaluation.studies.step_profile ${MODELS:+--models $MODELS} --steps ${STEPS:-10} --max-minutes $(python3 -c "print(round(max(${PROFILE_S:-300} - 90, 60) / 60, 2))") --out \$OUT/profile --results \$OUT/RESULTS.md; rm -rf \$OUT/profile/caches_*" ;;
  *) echo "zoo.sh: PART=$PART: use a, b, rest, quality or profile" >&2; exit 2 ;;
esac
