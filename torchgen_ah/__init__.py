"""Offline tools, one sub-package per stage: data, datagen, training (with code generation), evaluation.

``mm`` holds the mm command lines. Every tool runs as ``ah-plugin <tool>`` (``ah_plugin.report.console``); the
older ``python -m torchgen_ah.<name>`` names resolve through ``old_names``.
"""

from . import old_names

old_names.install()
