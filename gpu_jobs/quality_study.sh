#!/usr/bin/env bash
# The quality study on one GPU, one device call of under 10 minutes (run from the repository root on the
# device machine; results packed into $OUT/study.tgz by run_batch.sh):
#   1. collect: every candidate of default max-autotune plus Inductor's persistent TMA template (and
#      decompose-K where Inductor offers it), timed by CUDA-graph replay, on torchgen_ah/data/quality_shapes.csv
#      (the real models' GEMMs first, then the evaluation shapes, then large-K and odd shapes), COLLECT_MIN
#      minutes, resumable: the log is the training data of the replay-timed MMRankingH200 and the
#      per-family table of docs/quality_mode.md;
#   2. with FAMILIES=1, families: padding and epilogue fusion against cuBLAS
#      (torchgen_ah.evaluation.studies.family_timings, about 2 minutes).
#   3. with UNALIGNED=1, unaligned: the GEMMs of torchgen_ah/data/unaligned_shapes.csv with shape padding off,
#      timed as they are (about 1.5 minutes; datasets/h200_replay/h200_replay_unaligned_mm.txt.gz);
#   COLLECT_MIN=5.5 FAMILIES=1 bash gpu_jobs/quality_study.sh
set -u
: "${OUT:?set OUT to the output folder}"
COLLECT_MIN=${COLLECT_MIN:-5}
export AH_BATCH_NAME=study
bash gpu_jobs/run_batch.sh \
  "collect:$(python3 -c "print(int($COLLECT_MIN * 60 + 45))"):python3 -m torchgen_ah.mm.gen_data_mm --shapes torchgen_ah/data/quality_shapes.csv --timing replay --search-space default --persistent-tma --num-reps 2 --workers-per-gpu 2 --no-progress --max-minutes $COLLECT_MIN -o \$OUT/h200_replay_mm.txt" \
  ${FAMILIES:+"families:150:python3 -m torchgen_ah.evaluation.studies.family_timings --out \$OUT"} \
  ${UNALIGNED:+"unaligned:245:python3 -m torchgen_ah.mm.gen_data_mm --shapes torchgen_ah/data/unaligned_shapes.csv --timing replay --search-space default --persistent-tma --num-reps 2 --workers-per-gpu 2 --no-progress --shape-padding off --max-minutes 3.3 -o \$OUT/h200_replay_unaligned_mm.txt"}
