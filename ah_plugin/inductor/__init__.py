"""The plugin's adapter to Inductor: the only package that uses ``torch._inductor`` or Dynamo's internals.

Importing this package imports nothing of Inductor: ``on_import`` (which waits for torch's own import of
Inductor) lives here beside the modules that do. ``adapter`` installs the hooks; the tools use the facades
``compile_tools``, ``graph_trees``, ``generated_code_capture`` and ``collection``.

It imports torch first: torch's entry point (``import torch`` with a plugin variable set) starts waiting for
Inductor (``on_import``), and a wait started while a module of this package is half imported would find
it so (the plugin's API called before ``import torch``: ``ah_plugin.install()``, ``tunable.enable()``).
Begun here, the wait watches the module's import and calls once it is complete.
"""

import torch  # noqa: F401 - see above; torch's own import, not Inductor's
