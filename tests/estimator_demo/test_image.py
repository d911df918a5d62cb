"""`python -m estimator_demo --data IMAGE_FOLDER`: the domain is found from the files, the model trains
on the online image chain, and the exported SavedModel takes encoded image bytes."""

import os
import re
import subprocess
import sys

import numpy as np
import tensorflow as tf

from tfpipe.domains.image import synthetic

from tests.support import ROOT


def test_image_demo_trains_online_exports_a_bytes_signature_and_predicts(tmp_path):
    corpus = synthetic.write_corpus(tmp_path / "imgs", per_class=6, size=(32, 72), progress=False)
    run_dir = tmp_path / "run"
    args = [sys.executable, "-m", "estimator_demo", "--data", corpus.root, "--model_dir", str(run_dir),
            "--train_steps", "12", "--evals", "1", "--batch_size", "8", "--height", "24", "--width", "24",
            "--dtype", "uint8", "--predict_files", "3", "--eval_fraction", "0.25"]
    run = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, timeout=240,
                         env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    out = run.stdout
    counts = re.search(r"(\d+) train / (\d+) eval examples, 8 classes", out)
    assert counts and int(counts.group(1)) + int(counts.group(2)) == 48
    assert re.search(r"held-out accuracy  \d\.\d{3}  \(loss \d+\.\d+, step 12\)", out)
    assert not (run_dir / "shards").exists()  # images are read online unless --shards
    assert "encoded image files in:" in out
    lines = re.findall(r"^  (\S+\.(?:jpg|png)) +true (\S+) +predicted (\S+) +p=(\d\.\d\d)", out, re.M)
    assert len(lines) == 3 and all(pred in synthetic.CLASS_NAMES for _, _, pred, _ in lines)

    export_dir = re.search(r"SavedModel         (\S+)", out).group(1)
    serve = tf.saved_model.load(export_dir).signatures["serving_default"]
    files = [open(p, "rb").read() for p in corpus.paths[:2] + corpus.paths[-1:]]
    result = serve(image_bytes=tf.constant(files))  # any size, JPEG or PNG
    assert result["probabilities"].shape == (3, len(synthetic.CLASS_NAMES))
    np.testing.assert_allclose(result["probabilities"].numpy().sum(axis=1), 1.0, rtol=1e-5)
    assert {n.decode() for n in result["class_names"].numpy()} <= set(synthetic.CLASS_NAMES)
