"""The decision's contract on plain data: ``ChoicePolicy`` (every question the adapter asks, each a method with
a default that has no opinion and a short contract) and ``PolicyChain`` (the policies asked in order, the
first answer winning, every call guarded). No Inductor here: requests are plain data."""

from __future__ import annotations

import ast
import inspect
import os
import warnings

import pytest

from ah_plugin.policy import AutotuneRequest, ChoicePolicy, PolicyChain, registry

PLUGIN = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "ah_plugin")
QUESTIONS = sorted(name for name, member in vars(ChoicePolicy).items() if callable(member) and not name.startswith("_"))


def _request(*candidates) -> AutotuneRequest:
    return AutotuneRequest("mm", {"m": 64}, {"name": "mm"}, list(candidates))


def test_every_question_has_a_default_without_an_opinion_and_a_short_contract():
    policy = ChoicePolicy()
    request = _request("extern_mm", "t1")
    answers = {
        "select": policy.select(request), "numerical_check": policy.numerical_check(request),
        "on_numerical_check": policy.on_numerical_check(request, [], {}),
        "benchmark_limits": policy.benchmark_limits(request), "on_timings": policy.on_timings(request, {}, []),
        "padding_decision": policy.padding_decision(request), "padding_opinion": policy.padding_opinion(request, request),
        "on_padding_decision": policy.on_padding_decision(request, True, 1.0), "ranks": policy.ranks("mm", {}),
        "cache_key": policy.cache_key(),
    }
    assert sorted(answers) == QUESTIONS  # every method is listed here
    assert all(answer in (None, False) for answer in answers.values()), answers
    for name in QUESTIONS:
        doc = inspect.getdoc(getattr(ChoicePolicy, name))
        assert doc and len(doc.splitlines()) <= 3, f"{name}: a contract of 1-3 lines"
    assert ChoicePolicy.op_names is None and ChoicePolicy.description is None and not ChoicePolicy.says_decisions


def _asked_of_policies() -> set[str]:
    """The methods the plugin calls through the chain: ``p.<method>(...)`` in every ``lambda p: ...``."""
    asked = set()
    for folder, _, files in os.walk(PLUGIN):
        for name in (f for f in files if f.endswith(".py")):
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                tree = ast.parse(f.read())
            for node in ast.walk(tree):
                if isinstance(node, ast.Lambda) and [a.arg for a in node.args.args] == ["p"]:
                    asked |= {call.func.attr for call in ast.walk(node.body) if isinstance(call, ast.Call)
                              and isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name)
                              and call.func.value.id == "p"}
    return asked


def test_the_plugin_asks_policies_the_base_classes_questions_and_no_other():
    """Every question the adapter asks a policy is a method of ``ChoicePolicy``, and every method is asked
    somewhere (nothing is probed for, nothing is left over)."""
    asked = _asked_of_policies()
    assert asked == set(QUESTIONS), asked ^ set(QUESTIONS)


class Keeps(ChoicePolicy):
    def __init__(self, keep, name="keeps"):
        self.keep, self.description = keep, name

    def select(self, request):
        return self.keep


class Raises(ChoicePolicy):
    def __init__(self, error):
        self.error, self.calls = error, 0

    def select(self, request):
        self.calls += 1
        raise self.error

    def benchmark_limits(self, request):
        raise self.error


def test_the_first_answer_that_keeps_an_existing_candidate_wins():
    request = _request("extern_mm", "t1", "t2")
    chain = PolicyChain([Keeps(None), Keeps(["gone"]), Keeps(["t2", "gone"]), Keeps(["t1"])])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert chain.select(request) == ["t2"]
    assert any("kept no existing choice" in str(w.message) for w in caught)  # the one that kept nothing
    assert PolicyChain([]).select(request) is None and not PolicyChain([])


@pytest.mark.parametrize("error", [RuntimeError("artifact bug"), SystemExit(3), OSError(2, "gone", "/x/y")])
def test_a_raising_policy_warns_once_and_has_no_opinion(error):
    raising = Raises(error)
    chain = PolicyChain([raising, Keeps(["t1"])])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert chain.select(_request("extern_mm", "t1")) == ["t1"]
        assert chain.select(_request("extern_mm", "t1")) == ["t1"]
        assert chain.limits(_request("extern_mm", "t1")) is None
    said = [str(w.message) for w in caught if "Raises.select raised" in str(w.message)]
    assert raising.calls == 2 and len(said) <= 1  # once per process (an earlier case may have said it)
    assert not said or type(error).__name__ in said[0]


def test_a_users_keyboard_interrupt_passes():
    with pytest.raises(KeyboardInterrupt):
        PolicyChain([Raises(KeyboardInterrupt())]).select(_request("extern_mm", "t1"))


class Limits(ChoicePolicy):
    def __init__(self, limits=None, tolerances=None):
        self._limits, self._tolerances, self.rejected = limits, tolerances, None

    def benchmark_limits(self, request):
        return self._limits

    def numerical_check(self, request):
        return self._tolerances

    def on_numerical_check(self, request, rejected, timings):
        self.rejected = rejected


def test_the_strictest_limits_and_tolerances_asked_for_apply():
    request = _request("extern_mm", "t1")
    chain = PolicyChain([Limits({"duration_ms": 50, "iterations": 0}), Limits({"duration_ms": 20}),
                         Limits({"iterations": 7}), Limits()])
    assert chain.limits(request) == {"duration_ms": 20, "iterations": 7}
    asking = Limits(tolerances=(1e-2, 1e-3))
    tolerances = PolicyChain([Limits(), asking, Limits(tolerances=(1e-4, 1e-1))]).tolerances(request)
    assert tolerances[1:] == (1e-4, 1e-3) and asking in tolerances[0]
    PolicyChain(tolerances[0]).tell("on_numerical_check", lambda p: p.on_numerical_check(request, ["t1"], {}))
    assert asking.rejected == ["t1"]


def test_the_registry_asks_a_policy_about_its_ops_only_and_refuses_other_objects():
    class OnlyBmm(ChoicePolicy):
        op_names = frozenset({"bmm"})

    every, only_bmm = ChoicePolicy(), OnlyBmm()
    try:
        registry.register_policy(only_bmm, registry.POSITION_CACHE)
        registry.register_policy(every, registry.POSITION_COLLECTOR)
        assert [p for p in registry.policies_for("mm") if p in (every, only_bmm)] == [every]
        assert [p for p in registry.policies_for("bmm") if p in (every, only_bmm)] == [only_bmm, every]
    finally:
        registry.unregister_policy(every)
        registry.unregister_policy(only_bmm)

    class DuckTyped:
        def select(self, request):
            return None

    with pytest.raises(TypeError, match="ChoicePolicy"):
        registry.register_policy(DuckTyped())


def test_each_policy_has_its_part_of_the_cache_key():
    class Keyed(ChoicePolicy):
        def cache_key(self):
            return "rows=3"

    assert PolicyChain([Keyed(), ChoicePolicy(), Raises(RuntimeError())]).cache_key() == \
        "test_each_policy_has_its_part_of_the_cache_key.<locals>.Keyed[rows=3],ChoicePolicy,Raises"
