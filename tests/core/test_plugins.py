"""Plug-ins: an installed package's entry point adds a domain; entry points are read once per process."""

import subprocess
import sys
import textwrap

_PLUGIN = '''
from tfpipe.core.registry import register_domain
from tfpipe.domains.audio.domain import AudioDomain


class TextDomain(AudioDomain):
    """A stand-in domain for .txt files (the audio domain's code under another name)."""

    name = "text"
    extensions = (".txt",)


register_domain(TextDomain())
'''

_CHECK = '''
import importlib.metadata as metadata
calls = []
real = metadata.entry_points
def counted(*args, **kwargs):
    calls.append(kwargs.get("group"))
    return real(*args, **kwargs)
metadata.entry_points = counted
import tfpipe
from tfpipe.core.registry import domain_of
names = [getattr(domain_of(f"f{i}.{ext}"), "name", None) for i in range(200) for ext in ("txt", "wav", "png")]
print(sorted(set(map(str, names))), calls.count("tfpipe.plugins"))
'''


def test_an_installed_entry_point_adds_a_domain_and_entry_points_are_read_once(tmp_path):
    # An installed distribution as pip leaves it: a module and its dist-info with the entry point.
    (tmp_path / "tfpipe_text_plugin.py").write_text(_PLUGIN)
    info = tmp_path / "tfpipe_text_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tfpipe-text-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[tfpipe.plugins]\ntext = tfpipe_text_plugin\n")
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(_CHECK)], capture_output=True, text=True,
                         check=True, env={"PYTHONPATH": f"{tmp_path}:{':'.join(sys.path)}",
                                          "TF_CPP_MIN_LOG_LEVEL": "3"}).stdout
    # 600 lookups: the plug-in's domain is found, and the installed packages' metadata was read once
    # (reading it per lookup took ~13 ms each: 26 s to list 2,000 files).
    assert out.strip().splitlines()[-1] == "['audio', 'image', 'text'] 1"


def test_the_domains_load_alone_and_without_tensorflow():
    # The command line lists domains, configs, stores and corpora before any work: no TensorFlow, and
    # not the other plug-ins (storage, the data service), which are loaded by the lookups that need them.
    code = ("import sys, tfpipe; from tfpipe.core import registry; "
            "d = registry.domains(); print(sorted(d), registry.default_domain().name, "
            "[d[n].stores() for n in sorted(d)], [d[n].corpus.settings.__name__ for n in sorted(d)], "
            "'tensorflow' in sys.modules, 'tfpipe.service.client' in sys.modules, 'numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ("['audio', 'image'] audio [('log_mel', 'waveform'), ('jpeg', 'raw')] "
                           "['AudioCorpusConfig', 'ImageCorpusConfig'] False False False")


def test_domain_modules_are_declared_apart_from_the_other_plug_ins():
    import tfpipe  # noqa: F401  (declares the built-in ones)
    from tfpipe.core import plugins

    only = plugins.modules(domains_only=True)
    assert {"tfpipe.domains.audio.domain", "tfpipe.domains.image.domain"} <= set(only)
    assert not {"tfpipe.storage", "tfpipe.service.client"} & set(only)
    assert {"tfpipe.storage", "tfpipe.service.client"} <= set(plugins.modules())
