"""A domain tfpipe does not ship works end to end: docs/examples/plugin_domain/ (`.npy` arrays in class
folders) installed with pip, found through its `tfpipe.plugins` entry point, with no edit to tfpipe:
`tfpipe synth --domain npy` (no TensorFlow), `build_dataset`, `tfpipe prepare`, `tfpipe bench --data`
and `python -m estimator_demo --domain npy`, each in its own process as a user runs them."""

import os
import re
import shutil
import subprocess
import sys

import pytest

from tests.support import ROOT, SAYS_IF_TF_LOADED

PACKAGE = os.path.join(ROOT, "docs", "examples", "plugin_domain")
SHAPE = "8,8"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The package pip-installed into a folder of its own (copied first: pip builds in the source tree)."""
    pytest.importorskip("setuptools", reason="pip builds the package with this environment's setuptools")
    tmp = tmp_path_factory.mktemp("plugin")
    source, target = tmp / "src", tmp / "site"
    shutil.copytree(PACKAGE, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--target", str(target), str(source)], check=True, capture_output=True, timeout=300)
    assert (target / "tfpipe_npy" / "domain.py").exists()
    return target


def _run(site, *args, timeout=240):
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{ROOT}", "TF_CPP_MIN_LOG_LEVEL": "3"}
    run = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return run


_READ = """
import sys
import numpy as np
import tfpipe
from tfpipe.core.registry import get_domain
from tfpipe_npy.config import NpyConfig

corpus, shards, bad = sys.argv[1:4]
features = NpyConfig(array_shape=(8, 8))
assert type(get_domain("npy")).__module__ == "tfpipe_npy.domain"
source = tfpipe.find(corpus)
assert (source.domain, source.kind, source.class_names) == ("npy", "npy", ("blob", "diagonal", "horizontal", "vertical"))
want = np.stack([np.load(p) for p in source.paths])
for pipe in (tfpipe.PipelineConfig.optimized(batch_size=5), tfpipe.PipelineConfig.naive(batch_size=5)):
    batches = list(tfpipe.build_dataset(corpus, "eval", pipe, features))  # every example once, in order
    assert np.array_equal(np.concatenate([b[0]["array"] for b in batches]), want)
    assert np.array_equal(np.concatenate([b[1] for b in batches]), source.labels)
    x, y = next(iter(tfpipe.build_dataset(corpus, "train", pipe, features)))
    assert x["array"].shape == (5, 8, 8) and x["array"].dtype.name == "float32" and y.shape == (5,)
stored = list(tfpipe.build_dataset(shards, "eval", tfpipe.PipelineConfig.optimized(batch_size=8), features))
assert sum(len(b[1]) for b in stored) == len(want) and stored[0][0]["array"].dtype.name == "float32"
try:
    tfpipe.build_dataset(bad, "train", tfpipe.PipelineConfig.optimized(), features)
    raise AssertionError("a float64 array was read")
except tfpipe.DataError as e:
    assert "float64" in str(e) and "x.npy" in str(e), e
print("read ok")
"""


def test_a_third_party_domain_package_works_end_to_end(site, tmp_path):
    corpus, shards = str(tmp_path / "arrays"), str(tmp_path / "shards")
    synth = _run(site, "-c", SAYS_IF_TF_LOADED, "synth", "--domain", "npy", "--output", corpus, "--per_class", "8",
                 "--array_shape", SHAPE)
    assert synth.stdout.startswith("32 npy files (4 classes x 8: blob, diagonal, horizontal, vertical)")
    assert synth.stderr.strip().endswith("tensorflow not loaded")  # the plug-in's corpus writer: numpy only
    usage = _run(site, "-m", "tfpipe.cli", "--help").stdout
    assert re.search(r"synth .*\bnpy\b", usage) and re.search(r"prepare .*\.npy", usage)

    prepared = _run(site, "-m", "tfpipe.cli", "prepare", "--input", corpus, "--output", shards, "--array_shape", SHAPE,
                    "--num_shards", "2")
    assert "wrote 32 examples in 2 shards" in prepared.stdout and "array float16 [8, 8]" in prepared.stdout

    import numpy as np

    bad = tmp_path / "bad"
    for name in ("a", "b"):
        (bad / name).mkdir(parents=True)
        np.save(bad / name / "ok.npy", np.zeros((8, 8), np.float32))
    np.save(bad / "a" / "x.npy", np.zeros((8, 8)))  # float64: named up front, before the chain runs
    assert _run(site, "-c", _READ, corpus, shards, str(bad)).stdout.strip().endswith("read ok")

    bench = _run(site, "-m", "tfpipe.cli", "bench", "--data", corpus, "--array_shape", SHAPE, "--batch_size", "8",
                 "--batches", "2", "--warmup", "0", "--repeats", "1", "--nostages", "--noprogress")
    assert re.search(r"^optimized +[\d,]+", bench.stdout, re.M) and re.search(r"^naive +[\d,]+", bench.stdout, re.M)

    demo = _run(site, "-m", "estimator_demo", "--domain", "npy", "--model_dir", str(tmp_path / "run"), "--per_class", "6",
                "--array_shape", SHAPE, "--train_steps", "4", "--evals", "1", "--batch_size", "8", "--predict_files",
                "2", "--eval_fraction", "0.25")
    assert re.search(r"synthetic npy corpus .*: \d+ train / \d+ eval examples, 4 classes", demo.stdout)
    assert re.search(r"held-out accuracy  \d\.\d{3}  \(loss \d+\.\d+, step 4\)", demo.stdout)
    assert "float32 arrays in:" in demo.stdout and len(re.findall(r"^  \S+\.npy +true", demo.stdout, re.M)) == 2
