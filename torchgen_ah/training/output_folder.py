"""Where a trainer's command line writes the artifact: the current folder unless told otherwise, and the
installed package's artifact folder only with ``--into-package``.

A file in that folder is loaded by every program using this install and replaces a packaged artifact of the
same name; in an editable install (``pip install -e .``) the folder is the repository's ``artifacts/``, so
a trainer run from the repository root with ``--out artifacts`` would write there without anyone meaning to.
"""

from __future__ import annotations

import importlib.util
import os

PACKAGE = "ah_plugin.artifacts"
FLAG = "--into-package"


def package_folder() -> str | None:
    """The folder the installed ``ah_plugin.artifacts`` is loaded from (None: not installed)."""
    spec = importlib.util.find_spec(PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    return os.path.realpath(locations[0]) if locations else None


def output_folder(out: str | None, into_package: bool) -> str:
    """The folder to write into; ValueError when ``out`` is the package's folder without ``into_package``."""
    package = package_folder()
    if into_package:
        if package is None:
            raise ValueError(f"{FLAG}: the package {PACKAGE} is not installed here")
        if out is not None and os.path.realpath(out) != package:
            raise ValueError(f"{FLAG} writes into {package}; leave out --out {out}")
        return package
    out = out or "."
    if package is not None and os.path.realpath(out) == package:
        raise ValueError(f"--out {out} is the installed package's artifact folder ({package}): an artifact "
                         "written there is loaded by every program using this install and replaces a packaged "
                         f"one of the same name. Pass {FLAG} to write there on purpose, or --out another folder")
    return out
