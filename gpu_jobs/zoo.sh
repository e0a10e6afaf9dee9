#!/usr/bin/env bash
# The model zoo (python -m torchgen_ah.evaluation.zoo) and the step profile on one GPU, in device calls of
# under 10 minutes each (run from the repository root on the device machine; results packed into
# $OUT/zoo_<part>.tgz by run_batch.sh: results.jsonl, zoo.md / step_profile.md, RESULTS.md, the logs):
#   PART=a bash gpu_jobs/zoo.sh        vision: resnet50_cl, mobilenetv3_cl, convnext_cl, vit_small, swin_tiny and
#                                      the CNN and ViT training steps
#   PART=b bash gpu_jobs/zoo.sh        language: llama_serving, llama_decode/prefill, qwen2_decode/prefill, gpt2,
#                                      bert, t5 and the decoder training step
#   PART=kv_sdpa, PART=kv_flex         decoding with a static KV cache (the gpt-fast-style Llama, SDPA or
#                                      FlexAttention) at batch 1, 8, 32 and contexts 512, 2048: six models each
#   PART=c bash gpu_jobs/zoo.sh        the ops users turn max-autotune on for: FlexAttention prefill (sliding
#                                      window, packed documents), the fp8 decoder at decode and prefill, the
#                                      mixture of experts; MODES off,fast,quality,off_again by default
#   PART=rest bash gpu_jobs/zoo.sh     every zoo model not yet measured in the results files DONE names
#                                      (comma-separated paths in this tree, e.g. the parts' results.jsonl
#                                      copied under benchmarks/runs/zoo_h200/): what a part's time budget cut
#   PART=quality bash gpu_jobs/zoo.sh  quality mode on the decoders and the encoder (llama_decode, qwen2_decode,
#                                      gpt2, bert, llama_prefill) with MODES off,quality,off_again by default,
#                                      its report against quality mode's bars (--report quality, section
#                                      zoo_quality); add quality_frozen,off_frozen to MODES to price freezing
#   PART=profile bash gpu_jobs/zoo.sh  the step profile (kernels by group, roofline) of the decoders and
#                                      encoders under max-autotune off, one process (about 2-3 minutes)
#   PART=compile MODELS=a,b            where fast mode's compile goes: per model, the compile profile study in
#                                      both orders (off,fast,off_again and off,off_again,fast; phase times, no
#                                      cProfile), about 30-60 s an order (CP_S, 120, bounds each): two models
#                                      a device call at most (the results are packed when every step is done);
#                                      CP_PROFILE=off_again,fast adds cProfile's function tables and their diff
# MODES (off,fast,off_again) for the zoo parts, e.g. PART=rest DONE= MODELS=fp8_decode
# MODES=off,fast,quality,default,off_again (default where time is left: its compile takes minutes);
# MODES=off,fast,fast_backed,off_again prices AH_PLUGIN_TIME_UNBACKED=off beside fast mode (the models that
# kept templates: MODELS=llama_decode,fp8_decode,llama_prefill,llama_train,llama_serving, with
# COMPILE=one_process and PART=b);
# MODELS= overrides a part's list; ZOO_S (555) is the zoo step's limit in seconds, the zoo's own budget
# 45 s less, so its report is written before the step is stopped. STEPS (one_process) is the zoo's --steps:
# each model's steps are judged in one more process that compiles every mode (each in its own plugin scope)
# and times them with interleaved windows; the modes' own fresh processes then measure compile only.
# STEPS=fresh times steps in the modes' own processes instead (as the zoo's runs before one-process judging).
# COMPILE (fresh) is the zoo's --compile: COMPILE=one_process runs the one-process judging alone (off compiled
# first there is off's compile, the modes estimated over the control): about 30 s a model with three modes on
# the H200 for each of its two repetitions (the zoo's --reps, 2 with COMPILE=one_process, else 1; REPS= sets
# it): each model is judged twice in a row, the control before the modes the second time, so the compile
# estimate is the mean of two orders that lean opposite ways (one order alone moved it by up to 0.4x off's
# compile on an H100); the budget starts a model only with time for both.
# Cost, estimated for the H200 machine: a mode's fresh process (one (model, mode), fresh caches) 6-8 s of
# start-up (Python, torch, CUDA, timm or transformers), the compile (max-autotune off 5-15 s for these
# few-layer models, fast mode within 1.3x of that) and an eager check: 15-25 s. The one-process judging
# compiles every mode once more in one process, warms each up for a second per batch size and times 20
# rounds of one window (at least 20 ms) per mode: about a fresh process per mode, 45-80 s for three modes,
# several minutes for the serving pattern's 8 batch sizes or with default. So a model with three modes takes
# about 100 s and a part of 6-10 models needs two calls: the zoo starts a model only while its budget holds
# all the model's processes (each at 30 s before the first, then at 1.2x the model's longest, the one
# process at that times its modes), cuts whole models, names them in its report, and PART=rest with DONE set
# to the earlier results files runs exactly those.
# Join the parts' results with: python -m torchgen_ah.evaluation.zoo --combine A.jsonl,B.jsonl,... --results
# benchmarks/RESULTS.md (and step_profile --results for the profile).
set -u
: "${OUT:?set OUT to the output folder}"
PART=${PART:-a}
export AH_BATCH_NAME=zoo_$PART
ZOO_S=${ZOO_S:-555}
Q_MODELS=llama_decode,qwen2_decode,gpt2,bert,llama_prefill
if [ "$PART" = quality ]; then MODES=${MODES:-off,quality,off_again}; fi
if [ "$PART" = c ]; then MODES=${MODES:-off,fast,quality,off_again}; fi
MODES=${MODES:-off,fast,off_again}
A_MODELS=resnet50_cl,mobilenetv3_cl,convnext_cl,vit_small,swin_tiny,resnet50_cl_train,vit_small_train
B_MODELS=llama_serving,llama_decode,llama_prefill,qwen2_decode,qwen2_prefill,gpt2,bert,t5,llama_train
kv_models() {  # kv_models ATTENTION: the six static-cache decoding entries of one attention
  local out=""
  for batch in 1 8 32; do for context in 512 2048; do out="$out,kv_decode_$1_b${batch}_c$context"; done; done
  echo "${out#,}"
}
C_MODELS=flex_prefill_sliding,flex_prefill_document,fp8_decode,fp8_prefill,mixtral_moe
ALL_MODELS=$A_MODELS,$B_MODELS,$(kv_models sdpa),$(kv_models flex),$C_MODELS
ZOO_MIN=$(python3 -c "print(round(max($ZOO_S - 45, 60) / 60, 2))")
zoo_step() {  # zoo_step MODELS [EXTRA ARGUMENTS]
  echo "zoo:$ZOO_S:python3 -m torchgen_ah.evaluation.zoo --models $1 --modes $MODES --steps ${STEPS:-one_process} --compile ${COMPILE:-fresh} ${REPS:+--reps $REPS} --max-minutes $ZOO_MIN --run-timeout ${RUN_TIMEOUT:-150} --out \$OUT/zoo --results \$OUT/RESULTS.md ${2:-}; rm -rf \$OUT/zoo/*/rep*/caches_*"
}
case "$PART" in
  a) bash gpu_jobs/run_batch.sh "$(zoo_step "${MODELS:-$A_MODELS}")" ;;
  b) bash gpu_jobs/run_batch.sh "$(zoo_step "${MODELS:-$B_MODELS}")" ;;
  kv_sdpa) bash gpu_jobs/run_batch.sh "$(zoo_step "${MODELS:-$(kv_models sdpa)}")" ;;
  kv_flex) bash gpu_jobs/run_batch.sh "$(zoo_step "${MODELS:-$(kv_models flex)}")" ;;
  c) bash gpu_jobs/run_batch.sh "$(zoo_step "${MODELS:-$C_MODELS}")" ;;
  quality) bash gpu_jobs/run_batch.sh "$(zoo_step "${MODELS:-$Q_MODELS}" "--report quality")" ;;
  rest) bash gpu_jobs/run_batch.sh "$(zoo_step "${MODELS:-$ALL_MODELS}" "${DONE:+--skip-done $DONE}")" ;;
  compile)
    steps=()
    models=${MODELS:-}
    for model in ${models//,/ }; do
      for order in off,fast,off_again off,off_again,fast; do
        steps+=("cp_${model}_${order//,/_}:${CP_S:-120}:python3 -m torchgen_ah.evaluation.studies.compile_profile --model $model --modes $order --profile '${CP_PROFILE:-}' --out \$OUT/cp")
      done
    done
    [ ${#steps[@]} -gt 0 ] || { echo "zoo.sh: PART=compile needs MODELS" >&2; exit 2; }
    [ $(( ${#steps[@]} * ${CP_S:-120} )) -le 540 ] || {
      echo "zoo.sh: PART=compile: ${#steps[@]} steps of up to ${CP_S:-120} s exceed a device call; name fewer MODELS" >&2; exit 2; }
    bash gpu_jobs/run_batch.sh "${steps[@]}" ;;
  profile) bash gpu_jobs/run_batch.sh "profile:${PROFILE_S:-300}:python3 -m torchgen_ah.evaluation.studies.step_profile ${MODELS:+--models $MODELS} --steps ${STEPS:-10} --max-minutes $(python3 -c "print(round(max(${PROFILE_S:-300} - 90, 60) / 60, 2))") --out \$OUT/profile --results \$OUT/RESULTS.md; rm -rf \$OUT/profile/caches_*" ;;
  *) echo "zoo.sh: PART=$PART: use a, b, kv_sdpa, kv_flex, c, rest, quality, profile or compile" >&2; exit 2 ;;
esac
