"""What the adapter replaces in Inductor, one module per patch, each with ``install()`` and ``uninstall()``
and naming the torch versions it was checked on. The contract's table (``contract.py``) lists them with every
symbol they replace, and the adapter installs them from it. Everything else goes through Inductor's own
override points (``choices.PluginChoices``, the feedback saver, config entries); docs/inductor_versions.md has
the table.

- ``selector``: opens each autotuning's session at the selector call, prunes, checks and plans its candidates,
  and has a GEMM the policies keep on aten lowered as off.
- ``lowerings``: lowers a GEMM as max-autotune off does where the plugin keeps aten alone.
- ``builtin_autoheuristic``: keeps torch's built-in AutoHeuristic off the ops the plugin handles.
- ``benchmarker``: times the candidates of a handled autotuning by CUDA-graph replay, and bounds them.
- ``pad_mm``: decides shape padding with replay timing, and records/replays the decision.
- ``mode_options``: in fast mode, narrows ``mode="max-autotune"`` to GEMM autotuning.
- ``compile_once``: a benchmarked template that wins reuses the binary its autotuning compiled.
- ``fusion_timing``: quality mode times the fused-group decision by replay, the fused kernel winning by a margin.
"""
