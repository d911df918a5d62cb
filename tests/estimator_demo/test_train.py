"""estimator_demo: model_fn in every mode, data preparation, serving input,
and a real `python -m estimator_demo` run (train_and_evaluate, export, reload, predict)."""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import soundfile as sf
import tensorflow as tf

from tests.support import make_corpus, write_tone
from estimator_demo import data as demo_data
from estimator_demo import hooks, model
from tfpipe.domains.audio import ops, synthetic
from tfpipe.domains.audio.config import AudioConfig
from tfpipe.train.estimator import serving_input_receiver_fn

from tests.support import ROOT
SMALL = AudioConfig(clip_seconds=0.25, n_mels=16)  # [26 frames, 16 bands]
CLASSES = ("low", "high")
TRAIN, EVAL, PREDICT = tf.estimator.ModeKeys.TRAIN, tf.estimator.ModeKeys.EVAL, tf.estimator.ModeKeys.PREDICT


def _two_band_batch(n=16, seed=0):
    """log-mel batch whose class is where a bright band sits, at random levels (learnable, not constant)."""
    rng = np.random.default_rng(seed)
    labels = np.arange(n) % 2
    x = rng.normal(-8.0, 1.0, (n, *SMALL.feature_shape)).astype(np.float32)
    x[labels == 0, :, 3] += 6.0
    x[labels == 1, :, 12] += 6.0
    x += rng.uniform(-3, 3, (n, 1, 1)).astype(np.float32)
    return x, labels.astype(np.int64)


def _params(**extra):
    return {"class_names": CLASSES, "features": SMALL, "learning_rate": 0.01, "filters": (4, 8), **extra}


def test_standardize_is_per_clip_and_ignores_level():
    x, _ = _two_band_batch()
    out = model.standardize(tf.constant(x)).numpy()
    np.testing.assert_allclose(out.mean(axis=(1, 2)), 0.0, atol=1e-4)
    np.testing.assert_allclose(out.std(axis=(1, 2)), 1.0, atol=1e-2)
    louder = model.standardize(tf.constant(x + 4.0)).numpy()  # +4 in log-mel = a 17 dB louder recording
    np.testing.assert_allclose(louder, out, atol=1e-4)
    one = model.standardize(tf.constant(x[:1])).numpy()  # a batch of one: no batch statistics involved
    np.testing.assert_allclose(one, out[:1], atol=1e-5)


def test_model_fn_predict_mode_outputs_and_export_signature():
    with tf.Graph().as_default():
        log_mel = tf.compat.v1.placeholder(tf.float32, [None, *SMALL.feature_shape])
        spec = model.model_fn({"log_mel": log_mel}, None, PREDICT, _params())
        assert set(spec.export_outputs) == {"serving_default", "predict"}
        assert set(spec.predictions) == {"class_ids", "class_names", "probabilities"}
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            out = sess.run(spec.predictions, {log_mel: _two_band_batch(5)[0]})
    assert out["class_ids"].shape == (5,) and out["probabilities"].shape == (5, 2)
    np.testing.assert_allclose(out["probabilities"].sum(axis=1), 1.0, rtol=1e-5)
    assert [n.decode() for n in out["class_names"]] == [CLASSES[i] for i in out["class_ids"]]


def test_model_fn_eval_mode_has_accuracy_and_loss():
    x, y = _two_band_batch()
    with tf.Graph().as_default():
        spec = model.model_fn({"log_mel": tf.constant(x)}, tf.constant(y), EVAL, _params())
        assert spec.loss.shape == ()
        assert set(spec.eval_metric_ops) == {"accuracy"}
        assert tf.compat.v1.get_collection(hooks.EVAL_ACCURACY)
        value, update = spec.eval_metric_ops["accuracy"]
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            sess.run(tf.compat.v1.local_variables_initializer())
            sess.run(update)
            accuracy, loss = sess.run([value, spec.loss])
    assert 0.0 <= accuracy <= 1.0 and np.isfinite(loss)


def test_model_fn_train_mode_learns_and_computes_log_mel_from_waveforms():
    x, y = _two_band_batch(32)
    with tf.Graph().as_default():
        spec = model.model_fn({"log_mel": tf.constant(x)}, tf.constant(y), TRAIN, _params())
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            losses = [sess.run([spec.train_op, spec.loss])[1] for _ in range(40)]
            step = sess.run(tf.compat.v1.train.get_global_step())
    assert step == 40
    assert np.mean(losses[-5:]) < 0.5 * np.mean(losses[:5]), losses

    waves = np.random.default_rng(0).normal(0, 0.1, (3, SMALL.num_samples)).astype(np.float32)
    with tf.Graph().as_default():
        spec = model.model_fn({"waveform": tf.constant(waves)}, None, PREDICT, _params())
        assert spec.predictions["probabilities"].shape.as_list() == [3, 2]


def test_serving_receiver_applies_the_pipeline_feature_code():
    waves = np.random.default_rng(1).normal(0, 0.1, (2, 3000)).astype(np.float32)  # shorter than a clip
    expected = ops.log_mel(ops.fix_length(tf.constant(waves), SMALL.num_samples), SMALL).numpy()
    for features in (SMALL, AudioConfig(clip_seconds=0.25, n_mels=16, backend="librosa")):
        with tf.Graph().as_default():
            receiver = serving_input_receiver_fn(features)()
            assert set(receiver.receiver_tensors) == {"waveform"}
            with tf.compat.v1.Session() as sess:
                got = sess.run(receiver.features["log_mel"], {receiver.receiver_tensors["waveform"]: waves})
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    with tf.Graph().as_default():
        receiver = serving_input_receiver_fn(SMALL, fixed_length=True)()
        assert receiver.receiver_tensors["waveform"].shape.as_list() == [None, SMALL.num_samples]


def test_prepare_data_says_how_many_clips_were_converted(tmp_path, capsys):
    data = make_corpus(tmp_path / "wavs", classes=("a", "b"), per_class=3, seconds=0.3)
    write_tone(str(tmp_path / "wavs" / "a" / "odd_rate.wav"), 440, seconds=0.3, sample_rate=22050)
    write_tone(str(tmp_path / "wavs" / "b" / "stereo.wav"), 880, seconds=0.3, channels=2)
    demo_data.prepare_data(data, None, 0.3, str(tmp_path / "run"), SMALL, num_shards=1)
    lines = [l for l in capsys.readouterr().out.splitlines() if l.startswith("[data] train:")
             or l.startswith("[data] eval:")]
    said = " ".join(lines)
    counts = {k: sum(int(m) for m in re.findall(rf"(\d+) {k}", said)) for k in ("resampled", "mixed to mono")}
    assert counts == {"resampled": 1, "mixed to mono": 1}, lines


def test_prepare_data_shards_any_readable_wav_and_holds_out_by_path(tmp_path):
    data = make_corpus(tmp_path / "wavs", classes=("a", "b"), per_class=6, seconds=0.3)
    # Files the online path cannot read but the sharding converts: other rate, 24-bit, stereo.
    write_tone(str(tmp_path / "wavs" / "a" / "odd_rate.wav"), 440, seconds=0.3, sample_rate=22050)
    write_tone(str(tmp_path / "wavs" / "b" / "stereo24.wav"), 880, seconds=0.3, subtype="PCM_24", channels=2)
    first = demo_data.prepare_data(data, None, 0.3, str(tmp_path / "run"), SMALL, num_shards=2)
    again = demo_data.prepare_data(data, None, 0.3, str(tmp_path / "run"), SMALL, num_shards=2)
    assert again == first  # same split, shards reused
    assert first.class_names == ("a", "b")
    train_index = json.load(open(os.path.join(first.train, "tfpipe.json")))
    eval_index = json.load(open(os.path.join(first.eval, "tfpipe.json")))
    assert train_index["num_examples"] + eval_index["num_examples"] == 14  # nothing lost
    assert len(first.eval_files) == eval_index["num_examples"] > 0
    assert train_index["domain"]["store"] == "waveform" and train_index["domain"]["config"]["n_mels"] == 16
    held = {os.path.basename(p) for p, _ in first.eval_files}
    other = demo_data.prepare_data(data, None, 0.5, str(tmp_path / "run2"), SMALL, num_shards=2)
    assert held <= {os.path.basename(p) for p, _ in other.eval_files}  # a bigger fraction only adds files

    with pytest.raises(ValueError, match=r"shard folder cannot be split.*--eval_data"):
        demo_data.prepare_data(first.train, None, 0.2, str(tmp_path / "run3"), SMALL)
    other_classes = make_corpus(tmp_path / "other", classes=("a", "b", "c"), per_class=1, seconds=0.3)
    with pytest.raises(ValueError, match=r"other: classes 'c' are not in class_names \('a', 'b'\).*eval data is "
                                         r"numbered by the training data's classes; --class_names"):
        demo_data.prepare_data(data, other_classes, 0.2, str(tmp_path / "run4"), SMALL)
    # An eval folder lacking a class takes the training ids (c is 2 in both), sharded with them.
    three = make_corpus(tmp_path / "three", classes=("a", "b", "c"), per_class=2, seconds=0.3)
    lacking = make_corpus(tmp_path / "lacking", classes=("a", "c"), per_class=1, seconds=0.3)
    run = demo_data.prepare_data(three, lacking, 0.2, str(tmp_path / "run5"), SMALL, num_shards=2)
    assert run.class_names == ("a", "b", "c") and sorted(label for _, label in run.eval_files) == [0, 2]
    assert json.load(open(os.path.join(run.eval, "tfpipe.json")))["class_names"] == ["a", "b", "c"]
    pinned = demo_data.prepare_data(three, lacking, 0.2, str(tmp_path / "run6"), SMALL, num_shards=2,
                                    class_names=["c", "b", "a"])
    assert pinned.class_names == ("c", "b", "a") and sorted(label for _, label in pinned.eval_files) == [0, 2]


def test_pick_files_takes_classes_in_turn():
    files = [("a1", 0), ("a2", 0), ("a3", 0), ("b1", 1), ("c1", 2), ("c2", 2)]
    assert demo_data.pick_files(files, 5) == [("a1", 0), ("b1", 1), ("c1", 2), ("a2", 0), ("c2", 2)]
    assert demo_data.pick_files(files, 0) == []


def test_demo_entry_point_trains_exports_reloads_and_predicts(tmp_path):
    run_dir = tmp_path / "run"
    (run_dir / "export").mkdir(parents=True)
    (run_dir / "export" / "stale").write_text("from an earlier run")
    args = [sys.executable, "-m", "estimator_demo", "--model_dir", str(run_dir), "--per_class", "6",
            "--train_steps", "30", "--evals", "2", "--batch_size", "8", "--n_mels", "32",
            "--pipeline", "naive", "--prefetch", "--num_shards", "2", "--predict_files", "4",
            "--learning_rate", "0.005"]
    run = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, timeout=240,
                         env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    out = run.stdout
    assert "--pipeline=naive (batch 8)" in out
    assert re.findall(r"eval at step +(\d+)", out) == ["15", "30"]
    assert re.search(r"held-out accuracy  \d\.\d{3}  \(loss \d+\.\d+, step 30\)", out)
    assert re.search(r"training speed     \d+ examples/s, input wait \d+\.\d% of step time", out)
    # the library's InputWaitHook: after 3 warm-up steps a line every sixth of the run, the verdict at the end
    assert re.findall(r"^step (\d+): [\d,]+ examples/s, input wait", out, re.M) == ["8", "13", "18", "23", "28"]
    assert re.search(r"^input wait over \d+ steps, [\d,]+ examples/s: (partly input-bound|input-bound|compute-bound)",
                     out, re.M)
    assert not (run_dir / "export" / "stale").exists()  # a new run starts over

    index = json.load(open(run_dir / "shards" / "train" / "tfpipe.json"))
    held = json.load(open(run_dir / "shards" / "eval" / "tfpipe.json"))
    assert index["domain"]["config"]["n_mels"] == 32 and index["domain"]["store"] == "waveform"
    assert index["num_examples"] + held["num_examples"] == 6 * len(synthetic.CLASS_NAMES)

    export_dir = re.search(r"SavedModel         (\S+)", out).group(1)
    assert os.path.isfile(os.path.join(export_dir, "saved_model.pb"))
    lines = re.findall(r"^  (\S+\.wav) +true (\S+) +predicted (\S+) +p=(\d\.\d\d)", out, re.M)
    assert len(lines) == 4 and len({true for _, true, _, _ in lines}) == 4  # four different classes
    assert all(pred in synthetic.CLASS_NAMES for _, _, pred, _ in lines)

    # The export serves raw waveforms of any length.
    serve = tf.saved_model.load(export_dir).signatures["serving_default"]
    clip, rate = sf.read(str(run_dir / "corpus" / "tone" / "tone_00000.wav"), dtype="float32")
    assert rate == 16000
    batch = np.stack([clip[:12000], np.zeros(12000, np.float32)])
    result = serve(waveform=tf.constant(batch))
    assert result["probabilities"].shape == (2, len(synthetic.CLASS_NAMES))
    assert result["class_ids"].shape == (2,)
    assert {n.decode() for n in result["class_names"].numpy()} <= set(synthetic.CLASS_NAMES)
    longer = serve(waveform=tf.constant(np.pad(batch, [(0, 0), (0, 8000)])))  # cropped to the clip
    np.testing.assert_allclose(longer["probabilities"], result["probabilities"], atol=1e-5)

    # --resume at the final step trains nothing but still evaluates, exports and predicts.
    again = subprocess.run(args + ["--resume", "--predict_files", "1"], capture_output=True, text=True,
                           cwd=ROOT, timeout=240, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "no steps trained" in again.stdout and "step 30)" in again.stdout
    assert os.path.isdir(export_dir)  # the earlier export is kept
    assert len(re.findall(r"^  \S+\.wav +true", again.stdout, re.M)) == 1
