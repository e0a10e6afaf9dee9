"""The adapter's boundary, held by reading the source: only ``ah_plugin/inductor/`` reaches into Inductor or
Dynamo's internals, and the plugin's modules import one another without a circle.

The plugin meets torch's internals in one package so that a torch release that moves them breaks one place,
where the version table and the contract tests look (docs/ARCHITECTURE.md). The tools (``torchgen_ah``,
``benchmarks``) go through the adapter's facades (``compile_tools``, ``graph_trees``,
``generated_code_capture``) and the public ``torch.compiler``. Tests are not checked: they may reach into
Inductor to observe it.
"""

from __future__ import annotations

import ast
import functools
import os
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECKED = ("ah_plugin", "torchgen_ah", "benchmarks")
ADAPTER = os.path.join("ah_plugin", "inductor")
PACKAGE = "ah_plugin"
# torch's dynamic-shape documentation names these under torch._dynamo, and torch.compiler has no equivalent
DOCUMENTED_DYNAMO = frozenset({"mark_dynamic", "maybe_mark_dynamic", "mark_static"})
_INTERNALS = ("_inductor", "_dynamo")
# calls that import or reach a module or attribute named by a string: importlib.import_module("torch._inductor"),
# __import__, importlib.util.find_spec, mock.patch("torch._inductor.config.x"), getattr(torch, "_inductor")
_BY_NAME = frozenset({"import_module", "__import__", "find_spec", "patch", "getattr", "hasattr", "setattr"})


# --------------------------------------------------------------------------- torch internals

def _private(dotted: str) -> bool:
    """Whether ``torch._inductor...`` or ``torch._dynamo...`` (a name torch does not document publicly)."""
    parts = dotted.split(".")
    if parts[:2] == ["torch", "_inductor"]:
        return True
    if parts[:2] == ["torch", "_dynamo"]:
        return len(parts) < 3 or parts[2] not in DOCUMENTED_DYNAMO
    return False


def _chain(node: ast.Attribute) -> list[str]:
    """``a.b.c`` as ["a", "b", "c"]; an expression at the root (a call, a subscript) as "<expr>"."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    parts.append(node.id if isinstance(node, ast.Name) else "<expr>")
    return parts[::-1]


def _called(func: ast.AST) -> str:
    """The name a call is made by: ``import_module`` for ``importlib.import_module(...)``."""
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _text(arg: ast.AST) -> str | None:
    """A string argument's text; of an f-string, the text before its first placeholder."""
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
        return str(arg.values[0].value).rstrip(".")
    return None


def private_uses(source: str) -> list[tuple[int, str]]:
    """(line, what) of every reach into Inductor or private Dynamo in ``source``: imports (``import
    torch._inductor.config``, ``from torch import _inductor``), attribute chains on any object
    (``torch._dynamo.reset``, ``self._torch._dynamo.utils``), and module paths as strings (importlib,
    ``mock.patch``, ``getattr(torch, "_inductor")``). Naming a module only to look it up in ``sys.modules``
    (has torch imported Inductor yet?) reaches nothing and is not counted."""
    tree = ast.parse(source)
    inner = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {(node.lineno, f"import {a.name}") for a in node.names if _private(a.name)}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found |= {(node.lineno, f"from {node.module} import {a.name}") for a in node.names
                      if _private(f"{node.module}.{a.name}")}
        elif isinstance(node, ast.Attribute) and id(node) not in inner:
            parts = _chain(node)
            for i, part in enumerate(parts[1:], 1):
                if part in _INTERNALS and _private(".".join(["torch", *parts[i:]])):
                    found.add((node.lineno, ".".join(parts)))
                    break
        elif isinstance(node, ast.Call) and _called(node.func) in _BY_NAME:
            for text in filter(None, map(_text, node.args)):
                if text in _INTERNALS or _private(text):
                    found.add((node.lineno, f"{_called(node.func)}({text!r})"))
    return sorted(found)


def _checked_files():
    for top in CHECKED:
        for folder, dirs, files in os.walk(os.path.join(REPO, top)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith(".py"):
                    yield os.path.relpath(os.path.join(folder, name), REPO)


def test_nothing_outside_the_adapter_reaches_into_inductor_or_private_dynamo():
    breaches, checked = [], 0
    for path in _checked_files():
        if path.startswith(ADAPTER + os.sep):
            continue
        checked += 1
        with open(os.path.join(REPO, path), encoding="utf-8") as f:
            breaches += [f"{path}:{line}: {what}" for line, what in private_uses(f.read())]
    assert checked > 100  # the three folders were found and read
    assert not breaches, ("outside ah_plugin/inductor/, go through its facades (compile_tools, graph_trees, "
                          "generated_code_capture) or torch.compiler:\n" + "\n".join(breaches))


def test_the_adapter_is_where_inductor_is_used():
    """The check reads the adapter the same way and finds its uses there (it is not blind)."""
    with open(os.path.join(REPO, ADAPTER, "compile_tools.py"), encoding="utf-8") as f:
        found = private_uses(f.read())
    assert any(what == "import torch._inductor.config" for _, what in found), found
    assert any(what.startswith("import torch._dynamo") for _, what in found), found
    assert any(what.startswith("import_module('torch._inductor.autoheuristic") for _, what in found), found


@pytest.mark.parametrize("code, what", [
    ("import torch._inductor.config as c", "import torch._inductor.config"),
    ("import torch._dynamo", "import torch._dynamo"),
    ("from torch._inductor.graph import GraphLowering", "from torch._inductor.graph import GraphLowering"),
    ("from torch import _inductor", "from torch import _inductor"),
    ("from torch._dynamo.utils import counters", "from torch._dynamo.utils import counters"),
    ("def f(torch):\n    return torch._dynamo.utils.counters['stats']", "torch._dynamo.utils.counters"),
    ("torch._dynamo.reset()", "torch._dynamo.reset"),
    ("x = torch._inductor.config.freezing", "torch._inductor.config.freezing"),
    ("n = self._torch._dynamo.config.cache_size_limit", "self._torch._dynamo.config.cache_size_limit"),
    ("m = get()._inductor", "<expr>._inductor"),
    ("importlib.import_module('torch._inductor.cudagraph_trees')", "import_module('torch._inductor.cudagraph_trees')"),
    ("m = __import__('torch._dynamo.utils')", "__import__('torch._dynamo.utils')"),
    ("importlib.import_module(f'torch._inductor.kernel.{name}')", "import_module('torch._inductor.kernel')"),
    ("mock.patch('torch._inductor.config.freezing', True)", "patch('torch._inductor.config.freezing')"),
    ("getattr(torch, '_inductor')", "getattr('_inductor')"),
])
def test_the_check_finds_each_way_in(code, what):
    assert private_uses(code) == [(code.count("\n") + 1, what)]


@pytest.mark.parametrize("code", [
    "import torch\ntorch.compiler.reset()",
    "import torch._functorch.config",
    "torch._dynamo.mark_dynamic(x, 0)",
    "from torch._dynamo import maybe_mark_dynamic",
    '"""Replaces torch._inductor.list_mode_options while the plugin runs."""',
    "print('torch._dynamo.reset() drops the compiled graphs')",
    "imported = 'torch._inductor' in sys.modules",
    "from .inductor import compile_tools",
])
def test_the_check_passes_public_names_and_prose(code):
    assert private_uses(code) == []


# --------------------------------------------------------------------------- frame walks and policy probes

_FRAME_CALLS = frozenset({"_getframe", "currentframe", "stack", "getouterframes", "getinnerframes", "trace",
                          "extract_stack", "walk_stack", "format_stack", "print_stack"})


def frame_walks(source: str) -> list[tuple[int, str]]:
    """(line, what) of every look at the call stack in ``source``: ``sys._getframe``, ``inspect.stack`` and
    friends, ``traceback.extract_stack``, a frame's ``f_back``/``f_locals``. The plugin learns what it needs
    from the seams Inductor calls it through, never from a caller's frame."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute):
            chain = _chain(node)
            if chain[-1] in ("f_back", "f_locals") or (
                    len(chain) >= 2 and chain[-2] in ("sys", "inspect", "traceback") and chain[-1] in _FRAME_CALLS):
                found.add((node.lineno, ".".join(chain)))
    return sorted(found)


def policy_probes(source: str) -> list[tuple[int, str]]:
    """(line, what) of every ``getattr``/``hasattr`` on a policy: the adapter calls the methods of
    ``ChoicePolicy``, which every policy has."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and _called(node.func) in ("getattr", "hasattr") and node.args:
            target = node.args[0]
            name = target.id if isinstance(target, ast.Name) else target.attr if isinstance(target, ast.Attribute) else ""
            if "polic" in name.lower():
                found.add((node.lineno, f"{_called(node.func)}({name}, ...)"))
    return sorted(found)


def _plugin_sources():
    for folder, dirs, files in os.walk(os.path.join(REPO, PACKAGE)):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(f for f in files if f.endswith(".py")):
            path = os.path.join(folder, name)
            with open(path, encoding="utf-8") as f:
                yield os.path.relpath(path, REPO), f.read()


def test_the_plugin_walks_no_frames_and_probes_no_policy():
    walks, probes = [], []
    for path, source in _plugin_sources():
        walks += [f"{path}:{line}: {what}" for line, what in frame_walks(source)]
        probes += [f"{path}:{line}: {what}" for line, what in policy_probes(source)]
    assert not walks, "a frame walk (take what is needed from the seam's own arguments or session):\n" + "\n".join(walks)
    assert not probes, "a probe of a policy (ChoicePolicy defines every method):\n" + "\n".join(probes)


@pytest.mark.parametrize("code, walks, probes", [
    ("frame = sys._getframe(2)", 1, 0),
    ("import inspect\nfor f in inspect.stack(): pass", 1, 0),
    ("up = frame.f_back.f_locals", 1, 0),
    ("traceback.extract_stack()", 1, 0),
    ("fn = getattr(policy, 'select', None)", 0, 1),
    ("if hasattr(self.policy, 'cache_key'): pass", 0, 1),
    ("names = getattr(module, 'op_names', None)\ntraceback.format_exc()", 0, 0),
])
def test_the_frame_and_probe_checks_see_what_they_look_for(code, walks, probes):
    assert (bool(frame_walks(code)), bool(policy_probes(code))) == (bool(walks), bool(probes))


# --------------------------------------------------------------------------- import circles

def _modules(root: str, package: str) -> dict[str, tuple[str, bool]]:
    """{dotted module name: (path, is a package)} of every file of ``package`` under ``root``."""
    out = {}
    for folder, dirs, files in os.walk(os.path.join(root, package)):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                dotted = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
                is_package = name == "__init__.py"
                out[dotted[: -len(".__init__")] if is_package else dotted] = (path, is_package)
    return out


def _looked_up(node: ast.AST) -> str | None:
    """The module a ``sys.modules`` lookup names (``sys.modules["p.x"]``, ``sys.modules.get("p.x")``): a
    module reached without an import statement still depends on it, and closes a circle all the same."""
    if isinstance(node, ast.Subscript) and _chain_text(node.value) == "sys.modules":
        return _text(node.slice)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("get", "pop") \
            and _chain_text(node.func.value) == "sys.modules" and node.args:
        return _text(node.args[0])
    return None


def _chain_text(node: ast.AST) -> str:
    return ".".join(_chain(node)) if isinstance(node, ast.Attribute) else ""


def _imported(module: str, is_package: bool, node: ast.AST, modules) -> list[str]:
    """The modules one import statement names, relative ones resolved: ``from p import x`` names the module
    ``p.x`` where there is one, else ``p`` (``x`` is then one of its attributes). A ``sys.modules`` lookup
    names the module it looks up."""
    looked_up = _looked_up(node)
    if looked_up is not None:
        return [looked_up]
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:
        parts = module.split(".")
        parts = parts[: len(parts) - (not is_package) - (node.level - 1)]
        base = ".".join(parts + ([node.module] if node.module else []))
    return [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]


def import_graph(root: str = REPO, package: str = PACKAGE) -> dict[str, dict[str, str]]:
    """{module: {module it imports: "file:line"}} among ``package``'s modules, from every import statement of
    each file, those inside functions too (a lazy import closes a circle all the same, only later).
    A statement names the module it imports, not the packages above it: their ``__init__`` runs first,
    but that is Python's order, not a dependency the code chose."""
    modules = _modules(root, package)
    graph: dict[str, dict[str, str]] = {name: {} for name in modules}
    for name, (path, is_package) in modules.items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        for node in ast.walk(tree):
            for target in _imported(name, is_package, node, modules):
                if target in modules and target != name:
                    graph[name].setdefault(target, f"{os.path.relpath(path, root)}:{node.lineno}")
    return graph


def find_circle(graph: dict[str, dict[str, str]]) -> list[str] | None:
    """One circle of ``graph`` as [a, b, ..., a], or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, {})):
            if state.get(target) == 1:
                return path[path.index(target):] + [target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        state[node] = 2
        path.pop()
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start)
            if found:
                return found
    return None


def _described(graph, circle: list[str]) -> str:
    return "\n".join(f"  {a} -> {b}  ({graph[a][b]})" for a, b in zip(circle, circle[1:]))


def _without(graph, edges) -> dict:
    return {a: {b: where for b, where in targets.items() if (a, b) not in edges} for a, targets in graph.items()}


@functools.lru_cache(maxsize=None)
def _plugin_graph() -> dict:
    return import_graph()


def test_no_import_circle_among_the_plugins_modules():
    graph = _plugin_graph()
    assert len(graph) > 40 and graph[PACKAGE]  # the package was read, its edges found
    circle = find_circle(graph)
    assert circle is None, "an import circle (function-level imports count):\n" + _described(graph, circle)


def test_ah_plugins_top_level_has_at_most_twelve_modules():
    """One module or subpackage per stage at the top (docs/ARCHITECTURE.md's module map)."""
    top = sorted(name for name in os.listdir(os.path.join(REPO, PACKAGE))
                 if (name.endswith(".py") and name != "__init__.py")
                 or os.path.isfile(os.path.join(REPO, PACKAGE, name, "__init__.py")))
    assert 6 <= len(top) <= 12, top


def test_the_circle_check_sees_lazy_and_relative_imports(tmp_path):
    """A package whose circle runs through a relative import and an import inside a function."""
    files = {"pkg/__init__.py": "from . import a\n",
             "pkg/a.py": "from .sub import b\n",
             "pkg/sub/__init__.py": "",
             "pkg/sub/b.py": "def later():\n    from .. import c\n    return c\n",
             "pkg/c.py": "import pkg.a\nimport os\n",
             "pkg/d.py": "from pkg import a\nfrom pkg.sub import b\n",
             "pkg/e.py": "import sys\ndef later():\n    return sys.modules.get('pkg.d')\n",
             "pkg/f.py": "import sys\nm = sys.modules['pkg.e']\n"}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(textwrap.dedent(text))
    graph = import_graph(str(tmp_path), "pkg")
    assert graph["pkg.d"] == {"pkg.a": os.path.join("pkg", "d.py") + ":1",
                              "pkg.sub.b": os.path.join("pkg", "d.py") + ":2"}
    assert graph["pkg.sub.b"] == {"pkg.c": os.path.join("pkg", "sub", "b.py") + ":2"}
    assert graph["pkg.e"] == {"pkg.d": os.path.join("pkg", "e.py") + ":3"}  # sys.modules lookups count
    assert graph["pkg.f"] == {"pkg.e": os.path.join("pkg", "f.py") + ":2"}
    assert find_circle(graph) == ["pkg.a", "pkg.sub.b", "pkg.c", "pkg.a"]
    assert find_circle(_without(graph, {("pkg.c", "pkg.a")})) is None
