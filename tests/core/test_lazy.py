"""core/lazy.py: a module bound by name imports on its first attribute, and is not in sys.modules before."""

import subprocess
import sys


def test_a_lazy_module_imports_on_first_use_only():
    code = ("import sys; from tfpipe.core import lazy; m = lazy.module('json'); sys.modules.pop('json', None); "
            "before = 'json' in sys.modules; out = m.dumps([1]); print(before, 'json' in sys.modules, out, repr(m))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False True [1] <lazy module 'json'>"


def test_a_lazy_module_is_the_module_once_used():
    import json

    from tfpipe.core import lazy

    m = lazy.module("json")
    assert m.dumps is json.dumps and m.JSONDecodeError is json.JSONDecodeError
