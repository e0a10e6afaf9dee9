#!/usr/bin/env bash
# Fast mode on one GPU, in two calls of under 10 minutes each (run from the repository root on the device
# machine; results packed into $OUT/<part>.tgz by run_batch.sh; each step has its own time limit):
#   PART=models bash gpu_jobs/fast_mode.sh   GPT-2 small, a ViT, Llama prefill and decode, and a ViT training
#                                            step: REPS (3) processes of max-autotune off and fast mode, one of
#                                            default max-autotune and k=10 in the first repetition (ONCE=
#                                            lists those modes; empty: every mode REPS times);
#                                            MODELS=, MODES= to choose. One repetition of off and fast over the
#                                            four inference models took 270 s on an H200: split MODELS over
#                                            calls and join the results with e2e_models --combine
#   PART=ab bash gpu_jobs/fast_mode.sh       AB_MODELS (llama_prefill,llama_decode), each compiled off, fast, with
#                                            fast's Inductor options and aten alone, and off with the plugin on,
#                                            in one process, step windows interleaved (benchmarks/step_ab.py),
#                                            generated code kept; AB_COPIES (1) compiles each variant that many
#                                            times, AB_VARIANTS (all) picks them, e.g. AB_VARIANTS=off,fast
#                                            AB_COPIES=3
#   PART=state bash gpu_jobs/fast_mode.sh    STATE_MODEL (llama_decode) compiled in STATE_PROCS (3) rounds of
#                                            fresh processes, one per entry of STATE_FIRSTS (off; off,fast: a
#                                            max-autotune off and a fast-mode process each round), its step
#                                            timed again after each thing the process does next
#                                            (benchmarks/process_state.py; about 45 s a process on an H200)
#   PART=checks bash gpu_jobs/fast_mode.sh   every GPU test, single GEMMs (compile and kernel time per mode on
#                                            the first SHAPES evaluation shapes, the timing methods' picks) and
#                                            the results cache's record/hit runs (CHECKS= a subset of
#                                            tests,kernels,cache; TESTS= the test files or node ids). The
#                                            cache step records, then hits, the first CACHE_SHAPES (2: a padded
#                                            and an aligned one) of cache_shapes.csv in CACHE_S (170) seconds:
#                                            a record run of 4 shapes took over 65 s on an H200
# Default max-autotune needs RUN_TIMEOUT above 140 s on the decoder at decode and the ViT; give it its own
# call: PART=models MODES=default ONCE= REPS=1 RUN_TIMEOUT=230 MODELS=vit,llama_decode bash gpu_jobs/fast_mode.sh
set -u
: "${OUT:?set OUT to the output folder}"
PART=${PART:-models}
SHAPES=${SHAPES:-10}
MODELS_MIN=${MODELS_MIN:-8.6}
export AH_BATCH_NAME=$PART
MODES=${MODES:-off,fast,default,ours_k10}
# the ONCE modes (default: default,ours_k10; ONCE= for none) that are among MODES
ONCE=$(python3 -c "import sys; m = sys.argv[1].split(','); print(','.join(x for x in sys.argv[2].split(',') if x in m))" \
  "$MODES" "${ONCE-default,ours_k10}")
if [ "$PART" = ab ]; then
  steps=()
  for model in $(echo "${AB_MODELS:-llama_prefill,llama_decode}" | tr , ' '); do
    steps+=("ab_$model:${AB_S:-150}:python3 benchmarks/step_ab.py --model $model ${AB_VARIANTS:+--variants $AB_VARIANTS} --windows ${AB_WINDOWS:-30} --copies ${AB_COPIES:-1} --code-dir \$OUT/code --json \$OUT/ab.json --results \$OUT/RESULTS.md")
  done
  bash gpu_jobs/run_batch.sh "${steps[@]}"
elif [ "$PART" = state ]; then
  # STATE_FIRSTS: how each round's processes compile the model (off, fast), interleaved round by round
  firsts=$(echo "${STATE_FIRSTS:-off}" | tr , ' ')
  nfirsts=$(echo $firsts | wc -w)
  bash gpu_jobs/run_batch.sh \
    "state:$(( ${STATE_PROCS:-3} * nfirsts * 75 + 15 )):for i in \$(seq ${STATE_PROCS:-3}); do for first in $firsts; do env \$( [ \$first = fast ] && echo TORCHINDUCTOR_AUTOHEURISTIC_USE=mm ) python3 benchmarks/process_state.py --model ${STATE_MODEL:-llama_decode} --first \$first --json \$OUT/process_state.json --no-write || exit 1; done; done; python3 benchmarks/process_state.py --from-json \$OUT/process_state.json --results \$OUT/RESULTS.md"
elif [ "$PART" = models ]; then
  bash gpu_jobs/run_batch.sh \
    "models:$(python3 -c "print(int($MODELS_MIN * 60 + 15))"):python3 -m torchgen_ah.e2e_models --models ${MODELS:-gpt2,vit,llama_prefill,llama_decode,vit_train} --modes $MODES --reps ${REPS:-3} ${ONCE:+--once $ONCE} --run-timeout ${RUN_TIMEOUT:-110} --max-minutes $MODELS_MIN --out \$OUT/e2e --results \$OUT/RESULTS.md; rm -rf \$OUT/e2e/*/rep*/caches_*"
else
  steps=()
  case ",${CHECKS:-tests,kernels,cache}," in *,tests,*) steps+=("tests:${TESTS_S:-330}:python3 -m pytest ${TESTS:-tests/test_fast_gpu.py tests/test_use_gpu.py tests/test_plugin_gpu.py tests/test_tunable_limits.py} -m gpu -q -rA --durations=20 --basetemp=\$OUT/t; rm -rf \$OUT/t") ;; esac
  case ",${CHECKS:-tests,kernels,cache}," in *,kernels,*) steps+=("kernels:140:python3 -m torchgen_ah.compile_cost --shapes $SHAPES --modes off,fast,default,replay_all --max-minutes 2.2 --out \$OUT/cc --results \$OUT/RESULTS.md; rm -rf \$OUT/cc/caches_*") ;; esac
  case ",${CHECKS:-tests,kernels,cache}," in *,cache,*) steps+=("cache:${CACHE_S:-170}:python3 -m torchgen_ah.compile_cost torchgen_ah/data/cache_shapes.csv --shapes ${CACHE_SHAPES:-2} --modes cache --max-minutes $(python3 -c "print(round((${CACHE_S:-170} - 15) / 60, 2))") --out \$OUT/cache; rm -rf \$OUT/cache/caches_*") ;; esac
  [ "${#steps[@]}" -gt 0 ] || { echo "fast_mode.sh: CHECKS=$CHECKS names none of tests, kernels, cache" >&2; exit 2; }
  bash gpu_jobs/run_batch.sh "${steps[@]}"
fi
