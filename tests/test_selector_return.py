"""Where fast mode keeps aten alone, the plugin's selector wrapper lowers the GEMM as max-autotune off does and
returns the node in the form the caller asked for: torch 2.13 on always returns ``(node, choice)``; torch
2.11's selector returns the node alone unless called with ``return_choice=True`` (its GEMM lowerings return
the call's result as their own, so a pair there fails the user's compile: "ExternKernelCaller, which is not
a supported top level IR node"). The end-to-end check is a real compile that relowers
(tests/test_off_lowering.py's bmm case), run on every torch the project claims; on the CI's torch this file
checks the convention is read from the running torch's own selector."""

from __future__ import annotations

import inspect

import pytest

torch = pytest.importorskip("torch")

from torch._inductor import select_algorithm  # noqa: E402

from ah_plugin.inductor.patches import selector  # noqa: E402


def test_the_convention_is_read_from_the_running_torchs_selector():
    original = select_algorithm.AlgorithmSelectorCache.__call__
    original = getattr(original, "__wrapped__", original)
    asked = selector._node_alone_unless(original)
    has_flag = "return_choice" in inspect.signature(original).parameters
    assert (asked is None) == (not has_flag)


def test_a_node_alone_selector_says_which_calls_asked_for_the_choice():
    def selector_2_11(self, name, choices, input_nodes, layout, input_gen_fns=None,
                      precompilation_timeout_seconds=3600, return_multi_template=False, best_config_future=None,
                      return_choice=False, is_collective=False):
        """The parameters of torch 2.11's ``AlgorithmSelectorCache.__call__``."""

    asked = selector._node_alone_unless(selector_2_11)
    assert asked is not None
    assert not asked(None, ("mm", [], [], None), {})  # tuned_mm on 2.11: the node alone
    assert not asked(None, ("mm", [], [], None, None), {"return_multi_template": True})
    assert asked(None, ("mm", [], [], None), {"return_choice": True})  # custom ops ask for the pair
    assert asked(None, ("mm", [], [], None, None, 60, False, None, True), {})  # asked positionally

    def selector_2_13(self, name, choices, input_nodes, layout, input_gen_fns=None,
                      precompilation_timeout_seconds=3600, return_multi_template=False,
                      best_config_future=None, is_collective=False):
        """A selector that always returns ``(node, choice)``."""

    assert selector._node_alone_unless(selector_2_13) is None
