"""The studies behind benchmarks/RESULTS.md: one question each, answered from measured logs and runs.

None of them is needed to score, time or compare a policy (that is ``torchgen_ah.evaluation``). Each runs as
``python -m torchgen_ah.evaluation.studies.<name>`` (or from a ``benchmarks/`` script); the older
``python -m torchgen_ah.evaluation.<name>`` still runs it (``ah_plugin.report.console.OLD_NAMES``).

Held-out quality of the rankings:

* ``h200_quality``: is MMRankingH200 better than the H100 rankings on held-out H200 inputs? (issue 5)
* ``h200_eval_rescore``: does MMRankingH200 beat the packaged ranking on the H200 evaluation run? (ship check)
* ``fast_heldout``: how does fast mode do on inputs its ranking never saw (5 folds, replay-timed log)?
* ``pad_decision``: should fast mode pad an unaligned GEMM, against the pad_mm pass's own rule?

Ceilings, what any kernel choice could still win:

* ``quality_ceiling``: what would a perfect pick among today's candidates reach on single GEMMs?
* ``model_ceiling``: how much of a real model's step could GEMM selection save at most?
* ``step_profile``: where does a step's time go under max-autotune off, against its roofline?
  (``kernel_groups`` groups its kernels by name, ``roofline`` gives the step's floor)

GEMM families and timing methods:

* ``family_timings``: what do padding and epilogue fusion cost against cuBLAS (replay-timed)?
* ``gemm_families``: how does each GEMM family of a replay-timed collection log fare against cuBLAS?
* ``method_agreement``: how often does each timing method miss the replay-fastest candidate, at what cost?

The collected data itself:

* ``rep_consistency``: would a log's second repetition pick the same kernel as the first?
* ``run_agreement``: do two collection runs' timings agree, against each run's own repetition noise?
* ``compile_pool_report``: collection with Inductor's compile pool against the worker's threads: throughput
  and agreement.
"""
