"""The plugin's ``InductorChoices``: the override points Inductor offers, each with what it does here.

Installed through Inductor's registry of choices handlers where the torch has one (torch 2.15:
``register_inductor_choices``, which composes every registered handler and the configured class, each
hook taken from the first that overrides it), else through ``config.inductor_choices_class`` (a factory
that builds the class set before, with ours mixed in over it, so a user's own choices class keeps its
overrides; ``uuid()`` chains too), set as the entry's default as well so that other threads read it
(``every_thread``), and, for a thread that had already built its handler, ``V.set_choices_handler``. A
handler that runs its own ``_finalize_template_configs`` in place of ours (one listed before ours under
composition, a class set in the config after the plugin) wins that hook:
``overriding_class`` names it, and the selector call warns once with that name (``patches/selector.py``).

Checked on torch 2.11, 2.13, 2.14 and 2.15: ``InductorChoices._finalize_template_configs(template_choices,
kernel_inputs, templates, op_name, kwarg_overrides)`` and ``uuid()`` (used in the FX-graph cache key of
a configured or registered choices class).
"""

from __future__ import annotations

import uuid

import torch._inductor.config as inductor_config
from torch._inductor import choices as inductor_choices
from torch._inductor.choices import InductorChoices
from torch._inductor.virtualized import V

from ..config import settings
from ..policy import PolicyChain
from ..report.messages import warn_once
from ..use.flex_ranking import FLEX_BACKWARD, FLEX_DECODING, FLEX_FORWARD
from . import autotune, contract, every_thread, flex_choices, plans, plugin_timers, thread_choices

_state = {"installed": False, "nonce": uuid.uuid4().hex}  # nonce: this process's part of a collecting key


class PluginChoices(InductorChoices):
    """Inductor's heuristics, with the plugin's say over GEMM candidates."""

    def uuid(self):
        """Cache key part: the plugin's settings and policies, so switching modes never reuses a kernel."""
        parent = None
        base_uuid = getattr(super(), "uuid", None)
        if base_uuid is not None:
            try:
                parent = base_uuid()
            except NotImplementedError:
                parent = None
        current = plans.current_settings()
        described = settings.describe(current) if current is not None else "settings=invalid"
        policies = PolicyChain.registered().cache_key()
        nonce = _state["nonce"] if current is not None and current.collect else ""
        return f"ah_plugin:{described};policies={policies};{nonce};parent={parent}"

    def _finalize_template_configs(self, template_choices, kernel_inputs, templates, op_name, kwarg_overrides=None):
        """Before code generation: widen the GEMM search space and let the policies prune the candidates."""
        ktcs = super()._finalize_template_configs(template_choices, kernel_inputs, templates, op_name, kwarg_overrides)
        if not _state["installed"]:
            return ktcs
        contract.note("choices_handler")
        try:
            with plugin_timers.timed(plugin_timers.DECISION):
                return autotune.pre_codegen(self, ktcs, kernel_inputs, templates, op_name, kwarg_overrides)
        except Exception as exc:
            warn_once(("pre", type(exc)),
                      f"ah_plugin: pre-codegen hook failed ({exc!r}); using Inductor's choices")
            return ktcs

    def get_flex_attention_fwd_configs(self, *args, **kwargs):
        """FlexAttention's forward configs: ranked and narrowed where the use variable names the op (torch 2.14
        added the sequence length to this hook's arguments: they are passed on as given)."""
        return self._flex(FLEX_FORWARD, super().get_flex_attention_fwd_configs, args, kwargs)

    def get_flex_decode_configs(self, *args, **kwargs):
        """FlexAttention's decoding configs (a few query tokens against a long key/value cache)."""
        return self._flex(FLEX_DECODING, super().get_flex_decode_configs, args, kwargs)

    def get_flex_attention_bwd_configs(self, *args, **kwargs):
        """FlexAttention's backward configs."""
        return self._flex(FLEX_BACKWARD, super().get_flex_attention_bwd_configs, args, kwargs)

    def _flex(self, op, parent, args, kwargs):
        def ask():
            return parent(*args, **kwargs)

        if not _state["installed"]:
            return ask()
        contract.note("flex_configs")
        try:
            head_dim, dtype, device_type = flex_choices.hook_arguments(parent, args, kwargs)
            return flex_choices.configs(op, ask, head_dim, dtype, device_type, plans.current_settings())
        except Exception as exc:  # never fail a lowering: Inductor's own list
            warn_once(("flex", type(exc)), f"ah_plugin: flex config hook failed ({exc!r}); using Inductor's configs")
            return ask()


_classes: dict = {}


def plugin_class(base_cls) -> type:
    """``PluginChoices`` over ``base_cls`` (a user's subclass of InductorChoices keeps its overrides)."""
    if base_cls is InductorChoices or issubclass(base_cls, PluginChoices):
        return PluginChoices if base_cls is InductorChoices else base_cls
    cls = _classes.get(base_cls)
    if cls is None:
        cls = _classes[base_cls] = type(f"AHPlugin{base_cls.__name__}", (PluginChoices, base_cls), {})
    return cls


class ChoicesFactory:
    """The ``config.inductor_choices_class`` value: builds the class that was set before, with ours over it."""

    def __init__(self, previous):
        self.previous = previous

    def _base(self) -> type:
        if self.previous is None:
            return InductorChoices
        return self.previous if isinstance(self.previous, type) else type(self.previous())

    def __call__(self):
        return plugin_class(self._base())()

    def uuid(self):
        return self().uuid()

    def __deepcopy__(self, memo):  # torch deep-copies config values when it snapshots them
        return self

    def __reduce__(self):
        # pickled with the config (save_config): the uuid travels along, so torch versions that hash
        # the pickled config also see a mode change
        return (_restore_factory, (self.previous, self.uuid()))


def _restore_factory(previous, _uuid_at_pickling=None):
    return ChoicesFactory(previous)


REGISTRY_KEY = "ah_plugin"


def has_registry() -> bool:
    """Whether this torch composes registered choices handlers (torch 2.15 and newer)."""
    return callable(getattr(inductor_choices, "register_inductor_choices", None))


def overriding_class() -> str | None:
    """The class whose own ``_finalize_template_configs`` Inductor's current handler runs in place of the
    plugin's, or None (the plugin's runs, or nothing can tell)."""
    if not _state["installed"]:
        return None
    try:
        owner = getattr(V.choices._finalize_template_configs, "__self__", None)
    except Exception:  # no handler can be built here: nothing to tell
        return None
    if owner is None or isinstance(owner, PluginChoices):
        return None
    for cls in type(owner).__mro__:
        if "_finalize_template_configs" in vars(cls):
            return None if cls is InductorChoices else cls.__qualname__
    return None


def install() -> None:
    """Make Inductor build our choices class from now on, in this thread too."""
    if has_registry():
        if not _state.get("registered"):
            inductor_choices.register_inductor_choices(REGISTRY_KEY, PluginChoices)
            _state["registered"] = True
        _state["installed"] = True
        return
    if not isinstance(inductor_config.inductor_choices_class, ChoicesFactory):
        _state["previous"] = inductor_config.inductor_choices_class
        # every thread: the FX-graph cache key of a backward compiled in autograd's device thread is built
        # from that thread's config before any lowering; without the default it lacked our uuid(), and a
        # backward compiled under other plugin settings (or none) was loaded from the cache
        _state["default_previous"] = every_thread.assign(
            inductor_config, "inductor_choices_class", ChoicesFactory(_state["previous"]))
    handler = V.choices  # built from the config just set when this thread had none yet
    if not isinstance(handler, PluginChoices):
        _state["thread_previous"] = handler
        V.set_choices_handler(plugin_class(type(handler))())
    _state["installed"] = True


def ensure_in_thread() -> None:
    """Our handler in the calling thread as well, while the plugin is installed (the lowering hooks call it
    through ``thread_choices``).

    Before torch 2.15 the plugin reaches Inductor through ``config.inductor_choices_class``, and an assignment
    to Inductor's config holds for the thread that made it only; ``V.choices`` is built once per thread. A
    training step's backward is compiled lazily in autograd's device thread, which so lowered its GEMMs with
    Inductor's own handler: every template candidate rendered and loaded, pruned only afterwards by the
    selector (on an H100, 4.6 s of a Llama-style training step's compile under cProfile). One isinstance per
    call; a handler left in another thread after ``uninstall`` passes every hook through."""
    if not _state["installed"] or _state.get("registered"):
        return
    handler = V.choices
    if not isinstance(handler, PluginChoices):
        V.set_choices_handler(plugin_class(type(handler))())


thread_choices.set_installer(ensure_in_thread)


def uninstall() -> None:
    """Inductor's choices class back as it was, in this thread too."""
    if _state.pop("registered", False):
        inductor_choices.unregister_inductor_choices(REGISTRY_KEY)
        _state["installed"] = False
        return
    if isinstance(inductor_config.inductor_choices_class, ChoicesFactory):
        inductor_config.inductor_choices_class = _state.pop("previous", None)
    if "default_previous" in _state:
        every_thread.restore_default(inductor_config, "inductor_choices_class", _state.pop("default_previous"))
    previous = _state.pop("thread_previous", None)
    if previous is None:
        factory = inductor_config.inductor_choices_class
        previous = factory() if factory is not None else InductorChoices()
    V.set_choices_handler(previous)
    _state["installed"] = False


def is_installed() -> bool:
    return _state["installed"]
