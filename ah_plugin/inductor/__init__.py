"""The plugin's adapter to Inductor: the only package that uses ``torch._inductor`` or Dynamo's internals.

Importing this package imports nothing of Inductor: ``on_import`` (which waits for torch's own import of
Inductor) lives here beside the modules that do. ``adapter`` installs the hooks; the tools use the facades
``compile_tools``, ``graph_trees``, ``generated_code_capture`` and ``collection``.
"""
