"""What the adapter still has to patch, one module per patch, each naming the torch versions it was
checked on. Everything else goes through Inductor's own override points (``choices.PluginChoices``,
preprocessing functions and feedback savers); docs/inductor_versions.md has the table.

- ``builtin_autoheuristic``: keeps torch's built-in AutoHeuristic off the ops the plugin handles.
- ``benchmarker``: times the candidates of a handled autotuning by CUDA-graph replay, and bounds them.
- ``selector_frame``: reads the op name and inputs of the autotuning a preprocessing function serves.
- ``pad_mm``: decides shape padding with replay timing, and records/replays the decision.
- ``mode_options``: in fast mode, narrows ``mode="max-autotune"`` to GEMM autotuning.
- ``compile_once``: a benchmarked template that wins reuses the binary its autotuning compiled.
- ``fusion_timing``: quality mode times the fused-group decision by replay, the fused kernel winning by a margin.
"""
