"""``python -m torchgen_ah.<name>``, the commands' older names, kept working without a module per name.

``ah_plugin.report.console.OLD_NAMES`` maps each older name (``torchgen_ah.compile_cost``) to the module that
runs under it (``torchgen_ah.evaluation.compile_cost``), and each study's name from before it moved to
``torchgen_ah.evaluation.studies`` (``torchgen_ah.evaluation.step_profile``) to its module there. A
finder on ``sys.meta_path``, put there when ``torchgen_ah`` is imported (as ``python -m`` does first),
answers for those names only: the module's own file, loaded under the older name, so ``python -m`` runs
its ``__main__`` block as before.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys

from ah_plugin.report.console import OLD_NAMES


class OldNameFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        module = OLD_NAMES.get(fullname)
        if module is None:
            return None
        spec = importlib.util.find_spec(module)
        if spec is None or not spec.origin:
            return None
        return importlib.util.spec_from_file_location(fullname, spec.origin)


def install() -> None:
    if not any(isinstance(finder, OldNameFinder) for finder in sys.meta_path):
        sys.meta_path.append(OldNameFinder())
