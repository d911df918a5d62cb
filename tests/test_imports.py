"""The package's layering: no import cycle at any depth, a core that knows no domain, format or tool,
and modules and functions of a size a reader takes in at once."""

import ast
import os
import re
import subprocess
import sys

import pytest

from tests.support import ROOT as _REPO

ROOT = os.path.join(_REPO, "tfpipe")
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 400, 80  # design.md: "over ~400 lines is a split"


def _modules():
    """{module name: path} for every tfpipe module."""
    found = {}
    for folder, _, files in os.walk(ROOT):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, _REPO).removesuffix(".py").replace(os.sep, ".")
                found[rel.removesuffix(".__init__")] = path
    return found


def _f_string_modules(node, modules):
    """The modules an f-string may name: f"tfpipe.domains.{name}.synthetic" names every module its
    pattern matches (each {...} stands for one or more dotted name parts)."""
    pattern = "".join(re.escape(v.value) if isinstance(v, ast.Constant) else r"\w+(?:\.\w+)*"
                      for v in node.values)
    if not any(isinstance(v, ast.Constant) and "." in v.value and re.search(r"\w", v.value) for v in node.values):
        return set()  # f"{a}.{b}": no named part of a module
    return {m for m in modules if re.fullmatch(pattern, m) or re.fullmatch(pattern + ":.*", m)}


def _run_targets(tree):
    """The string nodes a subprocess argument list runs as `-m MODULE`."""
    return {id(target) for node in ast.walk(tree) if isinstance(node, (ast.List, ast.Tuple))
            for flag, target in zip(node.elts, node.elts[1:])
            if isinstance(flag, ast.Constant) and flag.value == "-m" and isinstance(target, ast.Constant)}


def _named(module, path, modules, processes=True):
    """(top-level imports, every module it names anywhere): imports inside functions, strings that
    name a module (import_module("tfpipe.x"), plug-in declarations, "tfpipe.x:attr"), f-strings
    (import_module(f"tfpipe.domains.{name}.synthetic")) and subprocess `-m` targets."""
    tree = ast.parse(open(path).read())
    run = _run_targets(tree)

    def imports(nodes):
        names = set()
        for node in nodes:
            if isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                base = node.module
                if node.level:  # relative import
                    parts = module.split(".") if path.endswith("__init__.py") else module.split(".")[:-1]
                    base = ".".join(parts[:len(parts) - node.level + 1] + [node.module])
                names.add(base)
                names.update(f"{base}.{a.name}" for a in node.names)
            elif id(node) in run:  # `-m MODULE`: runs the module and its __main__ in another process
                names.update(m for m in (node.value, f"{node.value}.__main__") if m in modules and processes)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and node.value.split(":")[0] in modules:
                names.add(node.value.split(":")[0])
            elif isinstance(node, ast.JoinedStr):
                names.update(_f_string_modules(node, modules))
        return {n for n in names if n.startswith("tfpipe")}

    return imports(tree.body), imports(ast.walk(tree))


def _resolve(name, modules):
    """The longest module name that `name` (a module or module.attribute) refers to."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name


def _graph(every=True, processes=True):
    """{module: the modules it names}; processes=False leaves out the modules it runs as `-m` subprocesses."""
    modules = _modules()
    graph = {}
    for module, path in modules.items():
        top, everything = _named(module, path, modules, processes)
        targets = {_resolve(n, modules) for n in (everything if every else top)} - {module, ""}
        # A module's own packages are imported before it anyway: not an edge of a cycle.
        graph[module] = {t for t in targets if not module.startswith(t + ".")}
    return graph


def _cycles(graph):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_at_any_depth():
    """Counting imports inside functions and module names in strings (import_module, plug-in lists, f-strings)."""
    assert _cycles(_graph(processes=False)) == []


# Loops that only close through a subprocess (another process, so no import cycle), each with why.
PROCESS_LOOPS = [
    # `tfpipe serve bench` (cli.serve imports service.bench) starts real `python -m tfpipe.cli serve worker`
    # processes: the benchmark measures the workers users run.
    ["tfpipe.cli", "tfpipe.cli.serve", "tfpipe.service.bench"],
]


def test_modules_run_as_subprocesses_close_no_loop_but_the_known_ones():
    assert _cycles(_graph()) == PROCESS_LOOPS


def test_the_cycle_finder_finds_a_lazy_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_module_names_in_f_strings_and_subprocess_targets_are_seen(tmp_path):
    modules = {"tfpipe.domains.audio.synthetic": "", "tfpipe.domains.image.synthetic": "", "tfpipe.cli": "",
               "tfpipe.cli.__main__": "", "tfpipe.bench.worker": ""}
    source = tmp_path / "m.py"
    source.write_text("import importlib, subprocess, sys\n"
                      "def f(name, package):\n"
                      "    importlib.import_module(f'tfpipe.domains.{name}.synthetic')\n"
                      "    importlib.import_module(f'{package}.synthetic')\n"
                      "    print(f'{name}: {package}', f'{package}.{name}')\n"
                      "    subprocess.run([sys.executable, '-m', 'tfpipe.cli', 'serve'])\n")
    _, everything = _named("tfpipe.x", str(source), modules)
    assert everything == {"tfpipe.domains.audio.synthetic", "tfpipe.domains.image.synthetic", "tfpipe.cli",
                          "tfpipe.cli.__main__"}


def test_only_the_package_top_imports_compat():
    for module, path in _modules().items():
        if module not in ("tfpipe", "tfpipe.compat"):
            _, everything = _named(module, path, _modules())
            assert "tfpipe.compat" not in everything, f"{module} names tfpipe.compat"


def test_the_core_names_no_domain_format_or_tool_anywhere():
    forbidden = ("tfpipe.domains", "tfpipe.storage", "tfpipe.bench", "tfpipe.cli", "tfpipe.service",
                 "tfpipe.train", "tfpipe.estimator", "tfpipe.keras", "tfpipe.compat")
    for module, targets in _graph().items():
        if module.startswith("tfpipe.core") or module in ("tfpipe.config", "tfpipe.errors"):
            bad = sorted(n for n in targets if n.startswith(forbidden))
            assert not bad, f"{module} names {bad}"


def test_domains_import_the_core_not_each_other_or_the_tools():
    for module, targets in _graph().items():
        if module.startswith("tfpipe.domains."):
            own = ".".join(module.split(".")[:3])
            bad = sorted(n for n in targets if n.startswith("tfpipe.domains.") and not n.startswith(own)
                         or n.startswith(("tfpipe.storage", "tfpipe.bench", "tfpipe.cli", "tfpipe.service", "tfpipe.train",
                                             "tfpipe.estimator")))
            assert not bad, f"{module} imports {bad}"


def test_modules_and_functions_stay_readable_in_one_sitting():
    too_long = []
    for module, path in _modules().items():
        source = open(path).read()
        if source.count("\n") > MAX_MODULE_LINES:
            too_long.append(f"{module}: {source.count(chr(10))} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    too_long.append(f"{module}.{node.name}: {length} lines")
    assert not too_long, too_long


def test_import_tfpipe_alone_loads_neither_tensorflow_nor_a_domain():
    code = ("import sys, tfpipe; print(sorted(m for m in sys.modules "
            "if m.startswith(('tensorflow', 'tfpipe.domains', 'tfpipe.storage'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("plugin", ["tfpipe.domains.audio.domain", "tfpipe.domains.image.domain", "tfpipe.storage",
                                    "tfpipe.service.client"])
def test_the_built_in_plug_ins_are_declared_by_the_package_top_not_named_by_the_core(plugin):
    import tfpipe  # noqa: F401  (declares them)
    from tfpipe.core import plugins

    assert plugin in plugins._declared  # pylint: disable=protected-access
