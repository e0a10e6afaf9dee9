"""Each autotuning's session, opened and closed by the selector call.

Inductor autotunes one operation by calling its process-wide ``AlgorithmSelectorCache`` with the autotuning's
name, candidates, input nodes, output layout and input generators; a preprocessing function would see the
candidates only. The call is wrapped here: the autotuning's session (``session.Autotuning``) is open while
it runs, the plugin's preprocessing (``autotune.preprocess``) prunes, checks and plans the candidates before
Inductor sees them, and where the policies keep aten alone in a GEMM lowering the plugin wrapped, the GEMM is
lowered again as max-autotune off lowers it and its node returned, in place of Inductor building aten's.

Checked on torch 2.11, 2.13, 2.14 and 2.15: ``AlgorithmSelectorCache.__call__(self, name, choices,
input_nodes, layout, input_gen_fns=None, ...)``. From torch 2.13 it returns ``(node, choice)``; torch 2.11
returns the node alone unless its caller passes ``return_choice=True`` (its GEMM lowerings return the call's
result as their own), so the relowered node is returned in the form the caller asked for.
"""

from __future__ import annotations

import inspect

from torch._inductor import select_algorithm

from ...report.messages import warn_once
from .. import autotune, contract, plans
from .. import choices as choices_handler
from ..session import TUNED, Autotuning, Lowering, innermost, opened

_saved: dict = {}


def _lowering_of(name: str) -> Lowering | None:
    """The wrapped lowering this autotuning is the first (TUNED) attempt of, or None."""
    lowering = innermost(Lowering)
    if lowering is not None and lowering.attempt == TUNED and lowering.name == name:
        return lowering
    return None


def _say_if_overridden() -> None:
    """Once per class: a user's choices handler runs its own pre-codegen hook in place of the plugin's."""
    if not plans.acting():
        return
    overriding = choices_handler.overriding_class()
    if overriding is not None:
        warn_once(("choices_handler", overriding),
                  f"ah_plugin: the choices handler {overriding} runs its own _finalize_template_configs in place "
                  "of the plugin's: GEMM candidates are pruned only after their code is generated, and collection "
                  "times Inductor's default search space")


def _node_alone_unless(original):
    """For a torch whose selector returns the node alone unless asked for the choice (2.11): a function of
    the call's arguments saying whether this caller asked (``return_choice``); None where the selector
    always returns ``(node, choice)``."""
    try:
        signature = inspect.signature(original)
    except (TypeError, ValueError):
        return None
    if "return_choice" not in signature.parameters:
        return None

    def asked(self, args, kwargs) -> bool:
        try:
            bound = signature.bind(self, *args, **kwargs)
        except TypeError:
            return False
        return bool(bound.arguments.get("return_choice", False))
    return asked


def install() -> None:
    """Wrap ``AlgorithmSelectorCache.__call__``."""
    if "call" in _saved:
        return
    cls = select_algorithm.AlgorithmSelectorCache
    original = cls.__call__
    _saved["call"] = (cls, original)
    choice_asked = _node_alone_unless(original)

    def __call__(self, name, choices, input_nodes, layout, input_gen_fns=None, *args, **kwargs):
        if not plans.installed():
            return original(self, name, choices, input_nodes, layout, input_gen_fns, *args, **kwargs)
        contract.note("selector_call")
        _say_if_overridden()
        autotuning = Autotuning(name, list(input_nodes), layout, input_gen_fns, lowering=_lowering_of(name))
        with opened(autotuning):
            try:
                choices, relower = autotune.preprocess(autotuning, choices)
            except Exception as exc:  # the adapter's own error: Inductor's candidates as they are
                warn_once(("selector", type(exc)), f"ah_plugin: preprocessing failed ({exc!r}); using Inductor's choices")
                relower = False
            if not relower:
                return original(self, name, choices, input_nodes, layout, input_gen_fns, *args, **kwargs)
        node = autotuning.lowering.relower()
        if choice_asked is not None and not choice_asked(self, (name, choices, input_nodes, layout,
                                                                 input_gen_fns, *args), kwargs):
            return node
        return node, choices[0]

    __call__.__wrapped__ = original
    cls.__call__ = __call__


def uninstall() -> None:
    saved = _saved.pop("call", None)
    if saved is not None:
        cls, original = saved
        cls.__call__ = original
