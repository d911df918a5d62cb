"""A domain is one complete plug-in: no module outside tfpipe/domains/ names a domain, a domain's config
or corpus settings class, or a domain module; the command line, flags, bench, service bench, training
integrations and the demo ask the registry.

What counts as naming: a string in code (help texts, messages, choices, module paths; docstrings and
comments are prose and may give examples), an identifier (a variable, argument, function or class
name such as `image` or `_IMAGE_FLAGS`), an attribute or name that is a domain config class
(`AudioConfig`), and an import of a domain module. The words come from the registry (each domain's
name and source kind, its config and corpus settings classes, its package), so a domain added later
is covered too.

Allowed, each for a reason:
  - tfpipe/__init__.py: the public API exports the built-in domain configs by name (design.md:
    `tfpipe.AudioConfig`, `tfpipe.ImageConfig`) and declares the built-in plug-in modules; only those
    two statements (`_EXPORTS`, `_plugins.declare(...)`) may name them.
  - tfpipe/compat.py: the deprecation table maps old module paths and names (`tfpipe.audio`,
    `FeatureConfig`) to their homes inside the domains; naming those homes is its job.
"""

import ast
import os
import re

from tests.support import ROOT

SCANNED = ("tfpipe", "estimator_demo")
EXEMPT_MODULES = {os.path.join("tfpipe", "compat.py")}
PACKAGE_TOP = os.path.join("tfpipe", "__init__.py")


def _forbidden():
    """(words, class names, module prefixes) that name the registered domains."""
    from tfpipe.core import registry

    words, classes, modules = set(), set(), {"tfpipe.domains"}
    for domain in registry.domains().values():
        words.update({domain.name, domain.kind} - {""})
        classes.add(domain.config_class.__name__)
        if domain.corpus is not None:
            classes.add(domain.corpus.settings.__name__)
        modules.add(type(domain).__module__.rpartition(".")[0])
    return words, classes, modules


def _docstrings(tree):
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                ids.add(id(first.value))
    return ids


def _allowed_at_the_top(tree):
    """ids of the nodes inside tfpipe/__init__.py's `_EXPORTS = {...}` and `_plugins.declare(...)` calls."""
    allowed = set()
    for node in ast.walk(tree):
        exports = isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "_EXPORTS" for t in node.targets)
        declare = isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "declare"
        if exports or declare:
            allowed.update(id(n) for n in ast.walk(node))
    return allowed


def find_names(source, words, classes, modules, allowed=lambda tree: set()):
    """[(line, what)] where Python `source` names a domain (see the module doc)."""
    tree = ast.parse(source)
    skip = _docstrings(tree) | allowed(tree)
    word = re.compile(r"\b(" + "|".join(map(re.escape, sorted(words))) + r")\b", re.I)
    module = re.compile("|".join(re.escape(m) + r"\b" for m in sorted(modules)))
    found = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        what = None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if word.search(node.value) or module.search(node.value) or any(c in node.value for c in classes):
                what = f"string {node.value[:80]!r}"
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            named = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
            if any(module.match(n) or n in classes for n in named):
                what = f"import of {', '.join(n for n in named if n)}"
        else:
            ident = (node.id if isinstance(node, ast.Name) else node.arg if isinstance(node, ast.arg) else
                     node.name if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else
                     node.attr if isinstance(node, ast.Attribute) else None)
            parts = set(ident.lower().strip("_").split("_")) if ident and not isinstance(node, ast.Attribute) else set()
            if ident in classes or parts & {w.lower() for w in words}:
                what = f"name {ident}"
        if what:
            found.append((node.lineno, what))
    return sorted(set(found))


def _files():
    for top in SCANNED:
        for folder, subfolders, files in os.walk(os.path.join(ROOT, top)):
            subfolders[:] = [s for s in subfolders if s != "__pycache__"]
            rel = os.path.relpath(folder, ROOT)
            if rel == os.path.join("tfpipe", "domains") or rel.startswith(os.path.join("tfpipe", "domains", "")):
                continue
            for name in sorted(files):
                if name.endswith(".py"):
                    yield os.path.join(rel, name)


def test_no_module_outside_the_domains_names_a_domain_its_config_or_its_modules():
    words, classes, modules = _forbidden()
    assert {"audio", "image"} <= words and {"AudioConfig", "ImageConfig"} <= classes  # what the registry says
    problems = []
    for rel in _files():
        if rel in EXEMPT_MODULES:
            continue
        with open(os.path.join(ROOT, rel)) as f:
            source = f.read()
        allowed = _allowed_at_the_top if rel == PACKAGE_TOP else (lambda tree: set())
        problems += [f"{rel}:{line}: {what}" for line, what in find_names(source, words, classes, modules, allowed)]
    assert not problems, "domains named outside tfpipe/domains/ (ask the registry):\n" + "\n".join(problems)


def test_the_scan_finds_each_way_of_naming_a_domain_with_its_line():
    source = '''"""Docstrings may say audio and AudioConfig."""
import tfpipe.domains.audio.ops
from tfpipe.domains.image.config import ImageConfig


def pick(domain, image=None):  # a comment may say audio
    """Prose: images, wav files."""
    if domain == "image":
        return AudioConfig()
    return f"a wav folder, {domain}", tfpipe.ImageConfig, "tfpipe.domains.audio.synthetic:write_files"
'''
    found = find_names(source, {"audio", "image", "wav"}, {"AudioConfig", "ImageConfig"}, {"tfpipe.domains"})
    lines = [line for line, _ in found]
    assert lines == sorted(lines) and set(lines) == {2, 3, 6, 8, 9, 10}, found
    assert (6, "name image") in found and (8, "string 'image'") in found and (9, "name AudioConfig") in found
    assert (10, "name ImageConfig") in found and (10, "string 'a wav folder, '") in found


def test_the_package_top_may_name_them_only_in_its_exports_and_plug_in_declarations():
    source = '''_EXPORTS = {"AudioConfig": "tfpipe.domains.audio.config"}
_plugins.declare(("tfpipe.domains.audio.domain",), domains=True)
DEFAULT = "audio"
'''
    found = find_names(source, {"audio"}, {"AudioConfig"}, {"tfpipe.domains"}, _allowed_at_the_top)
    assert found == [(3, "string 'audio'")]
