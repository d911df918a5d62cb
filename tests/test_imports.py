"""The package's layering: no import cycles, and a core that knows no domain, format or tool."""

import ast
import os
import subprocess
import sys

import pytest

from tests.support import ROOT as _REPO

ROOT = os.path.join(_REPO, "tfpipe")


def _modules():
    """{module name: (top-level imports, all imports incl. inside functions)} for every tfpipe module."""
    found = {}
    for folder, _, files in os.walk(ROOT):
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, os.path.join(ROOT, "..")).removesuffix(".py").replace(os.sep, ".")
            module = rel.removesuffix(".__init__")
            tree = ast.parse(open(path).read())
            top = _imports(tree.body, module)
            every = _imports(list(ast.walk(tree)), module)
            found[module] = (top, every)
    return found


def _imports(nodes, module):
    names = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            base = node.module
            if node.level:  # relative import
                base = ".".join(module.split(".")[:-node.level] + [node.module])
            names.add(base)
            names.update(f"{base}.{a.name}" for a in node.names)
    return {n for n in names if n.startswith("tfpipe")}


def _resolve(name, modules):
    """The longest module name that `name` (a module or module.attribute) refers to."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name


def test_module_level_imports_have_no_cycles():
    modules = _modules()
    graph = {m: {_resolve(n, modules) for n in top} - {m, ""} for m, (top, _) in modules.items()}
    # tfpipe/__init__ imports nothing eagerly; packages importing their own submodules are not cycles
    state, path = {}, []

    def visit(m):
        state[m] = "open"
        path.append(m)
        for n in sorted(graph.get(m, ())):
            if n.startswith(m + "."):
                continue
            if state.get(n) == "open":
                cycle = path[path.index(n):] + [n]
                if not all(a.startswith(b + ".") or b.startswith(a + ".") for a, b in zip(cycle, cycle[1:])):
                    pytest.fail("import cycle: " + " -> ".join(cycle))
            elif n not in state:
                visit(n)
        path.pop()
        state[m] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m)


def test_the_core_imports_no_domain_format_or_tool():
    modules = _modules()
    forbidden = ("tfpipe.domains", "tfpipe.storage", "tfpipe.shards", "tfpipe.bench", "tfpipe.cli",
                 "tfpipe.service", "tfpipe.estimator", "tfpipe.audio", "tfpipe.sources", "tfpipe.pipeline",
                 "tfpipe.synthetic")
    for module, (top, every) in modules.items():
        # config.py also keeps the old `tfpipe.config.AudioConfig` name, resolved on first use only
        checked = every if module.startswith("tfpipe.core") else top
        if module.startswith("tfpipe.core") or module in ("tfpipe.config", "tfpipe.errors"):
            bad = sorted(n for n in checked if n.startswith(forbidden))
            assert not bad, f"{module} imports {bad}"


def test_domains_import_the_core_not_each_other_or_the_tools():
    for module, (_, every) in _modules().items():
        if module.startswith("tfpipe.domains."):
            own = ".".join(module.split(".")[:3])
            bad = sorted(n for n in every if n.startswith("tfpipe.domains.") and not n.startswith(own)
                         or n.startswith(("tfpipe.storage", "tfpipe.bench", "tfpipe.cli", "tfpipe.estimator")))
            assert not bad, f"{module} imports {bad}"


def test_import_tfpipe_alone_loads_neither_tensorflow_nor_a_domain():
    code = ("import sys, tfpipe; print(sorted(m for m in sys.modules "
            "if m.startswith(('tensorflow', 'tfpipe.domains', 'tfpipe.storage'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
