"""The decision's contract: ``AutotuneRequest`` (one autotuning as plain data), ``ChoicePolicy`` (the class a
decider subclasses: every question the adapter asks, each with a default that has no opinion), the registered
policies in their order (``registry``) and ``PolicyChain``, which asks them. Nothing here imports Inductor."""

from .base import ChoicePolicy
from .chain import PolicyChain
from .request import AutotuneRequest

__all__ = ["AutotuneRequest", "ChoicePolicy", "PolicyChain"]
