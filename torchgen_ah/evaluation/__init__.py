"""Evaluation: policies and rankers scored on measured timings, compile cost, and the benchmarks' reports.

The core a user runs, by job (each command also runs as ``ah-plugin <tool>``):

* Scoring policies on shapes timed side by side (``ah-plugin evaluate``): ``evaluate`` (the command),
  ``eval_worker`` (the timing process it starts), ``timing_table`` (median per input and choice),
  ``policies`` (each policy replayed on the table, its regret), ``plots``.
* Compile and kernel time per autotuning mode: ``compile_cost`` (single GEMMs, ``ah-plugin compile-cost``),
  ``side_by_side`` (the modes' generated code timed in one process), ``kernel_times`` (its per-shape rows),
  ``e2e_models`` (whole models, ``ah-plugin e2e-models``), ``tunable_compile`` (a warm results file).
* The model zoo, fast mode against max-autotune off model by model: ``zoo`` (the command), ``zoo_models``
  (the entries), ``zoo_decoders`` (its static-KV-cache, FlexAttention and fp8 decoders), ``zoo_worker`` (one
  model in one mode), ``zoo_one_process`` (one model's steps judged in one process), ``zoo_report``,
  ``zoo_quality_report``; ``one_process`` (what that judging shares with ``benchmarks/step_ab.py``).
* Checks and report helpers: ``result_check`` (did a compiled GEMM compute its product), ``generated_code``,
  ``results_section`` (a named section of benchmarks/RESULTS.md), ``markdown_tables``, ``json_lines``.

``studies/`` holds the studies behind benchmarks/RESULTS.md (one question each; its docstring lists them).
"""
