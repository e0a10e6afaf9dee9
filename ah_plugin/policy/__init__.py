"""The decision's contract: ``AutotuneRequest`` (one autotuning as plain data) and the registered policies,
asked in order (``registry``). Nothing here imports Inductor."""

from .request import AutotuneRequest

__all__ = ["AutotuneRequest"]
