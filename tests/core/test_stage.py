"""The one chain with a user's own files and functions: the seed question's input_fn on tfpipe."""

import collections
import dataclasses
import os

import numpy as np
import pytest
import soundfile as sf
import tensorflow as tf

import tfpipe
from tests.support import write_tone
from tfpipe.config import TOGGLES, PipelineConfig
from tfpipe.core.graph import dataset_ops

OPT = PipelineConfig.optimized(batch_size=4, seed=3)
NAIVE = PipelineConfig.naive(batch_size=4, seed=3)
SAMPLES = 2000  # the seed's _post_process crops/pads to a fixed length


def _read_wav(filename, label):
    """The seed question's _read_wav: TF ops only."""
    wav = tf.audio.decode_wav(tf.io.read_file(filename), desired_channels=1).audio[:, 0]
    return wav, label


def _post_process(wav, label):
    """The seed question's _post_process: crop/pad, then a spectrogram."""
    wav = tf.pad(wav[:SAMPLES], [[0, tf.maximum(0, SAMPLES - tf.shape(wav)[0])]])
    wav = tf.ensure_shape(wav, [SAMPLES])
    return {"wav": tf.abs(tf.signal.stft(wav, 256, 128))}, label


def _read_wav_numpy(filename, label):
    """The same read in plain numpy (soundfile), as a user with librosa/PIL code has it."""
    wav, _ = sf.read(filename.decode(), dtype="float32")
    return wav, label


READ_NUMPY = tfpipe.python_fn(_read_wav_numpy, (tf.TensorSpec([None], tf.float32), tf.TensorSpec([], tf.int64)))


@pytest.fixture
def files(tmp_path):
    """10 wavs of different lengths and pitches with labels 0..2, as the seed's (filenames, labels)."""
    paths, labels = [], []
    for i in range(10):
        paths.append(write_tone(str(tmp_path / f"clip{i}.wav"), 300 + 97 * i, seconds=0.05 + 0.02 * i))
        labels.append(i % 3)
    return paths, labels


def _eval(files, pipeline=OPT, read=_read_wav, **kwargs):
    ds = tfpipe.build_dataset(files, "eval", pipeline, read=read, process=_post_process, **kwargs)
    return list(ds.as_numpy_iterator())


def _keys(batches):
    """One number per example that identifies its file (each clip has its own pitch)."""
    return [round(float(x), 3) for f, _ in batches for x in f["wav"].mean(axis=(1, 2))]


def test_eval_yields_every_file_once_in_order(files):
    batches = _eval(files)
    assert [len(l) for _, l in batches] == [4, 4, 2]
    assert np.concatenate([l for _, l in batches]).tolist() == files[1]
    keys = _keys(batches)
    assert len(set(keys)) == 10
    reference = [_post_process(_read_wav(p, l)[0], l)[0]["wav"].numpy().mean() for p, l in zip(*files)]
    np.testing.assert_allclose(keys, reference, atol=2e-3)


@pytest.mark.parametrize("read", [_read_wav, READ_NUMPY], ids=["tf_ops", "python_fn"])
@pytest.mark.parametrize("toggle", TOGGLES)
def test_every_toggle_applies_to_user_functions_without_changing_results(files, read, toggle):
    flipped = dataclasses.replace(OPT, **{toggle: getattr(NAIVE, toggle)})
    assert _keys(_eval(files, flipped, read)) == _keys(_eval(files, OPT, _read_wav))


def test_train_mode_shuffles_user_files_endlessly(files):
    ds = tfpipe.build_dataset(files, "train", dataclasses.replace(OPT, batch_size=5), read=_read_wav,
                              process=_post_process)
    keys = _keys(ds.take(20).as_numpy_iterator())  # 100 examples = 10 epochs
    counts = collections.Counter(keys)
    # repeat-then-shuffle blurs epoch edges (a file may come up to a buffer's length early or late)
    assert len(counts) == 10 and all(7 <= c <= 13 for c in counts.values()), counts
    assert keys[:10] != sorted(keys[:10]) and keys[:10] != keys[10:20]


def test_optimized_chain_fuses_user_read_and_process_into_one_parallel_map(files):
    ops = dataset_ops(tfpipe.build_dataset(files, "train", OPT, read=_read_wav, process=_post_process))
    assert ops == ["RangeDataset", "FlatMapDataset", "ParallelMapDatasetV2", "BatchDatasetV2", "PrefetchDataset",
                   "OptionsDataset"]


def test_naive_chain_is_the_seed_questions_own_input_fn(files):
    # map(_read_wav) -> shuffle(whole set) -> map(_post_process) -> batch -> repeat, sequential, no prefetch
    ops = dataset_ops(tfpipe.build_dataset(files, "train", NAIVE, read=_read_wav, process=_post_process))
    assert ops == ["TensorSliceDataset", "MapDataset", "ShuffleDatasetV3", "MapDataset", "BatchDatasetV2",
                   "RepeatDataset", "OptionsDataset"]


def _with_rank(features, labels):
    """A batch_process that records the rank it ran on."""
    return {**features, "rank": tf.fill(tf.shape(labels), tf.rank(features["wav"]))}, labels


def test_batch_process_runs_on_whole_batches_only_when_vectorized(files):
    def ranks(pipeline):
        ds = tfpipe.build_dataset(files, "eval", pipeline, read=_read_wav, process=_post_process,
                                  batch_process=_with_rank)
        return {int(r) for f, _ in ds.as_numpy_iterator() for r in f["rank"]}, dataset_ops(ds)

    (on, ops_on), (off, ops_off) = ranks(OPT), ranks(dataclasses.replace(OPT, vectorize=False))
    assert on == {3} and off == {2}  # [batch, frames, bins] vs [frames, bins]
    assert ops_on.index("BatchDatasetV2") < len(ops_on) - 3  # a map after the batch
    assert ops_off[-3] == "BatchDatasetV2"


def test_examples_of_different_shapes_are_padded_per_batch(files):
    def raw(wav, label):
        return {"wav": wav}, label

    batches = list(tfpipe.build_dataset(files, "eval", OPT, read=_read_wav, process=raw).as_numpy_iterator())
    lengths = [int((0.05 + 0.02 * i) * 16000) for i in range(10)]  # as write_tone computes them
    assert [b["wav"].shape for b, _ in batches] == [(4, lengths[3]), (4, lengths[7]), (2, lengths[9])]
    first = batches[0][0]["wav"]
    assert np.all(first[0, lengths[0]:] == 0) and np.any(first[0, :lengths[0]] != 0)  # zero-padded tail


def test_python_fn_checks_its_signature_and_marks_its_stage():
    with pytest.raises(ValueError, match=r"output_signature must be a tf.TensorSpec"):
        tfpipe.python_fn(_read_wav_numpy, [tf.float32])
    assert tfpipe.Stage("read", READ_NUMPY).python is False  # an explicit Stage says what it is
    from tfpipe.core.stage import as_stage

    assert as_stage(READ_NUMPY, "read").python and not as_stage(_read_wav, "read").python


def test_keras_gets_a_plain_tensor_and_a_finite_epoch(files):
    ds = tfpipe.build_dataset(files, "train", OPT, read=_read_wav, process=_post_process,
                              feature_key="wav", epochs=2)
    batches = list(ds.as_numpy_iterator())
    assert isinstance(batches[0][0], np.ndarray) and len(batches) == 5  # 20 examples in batches of 4
    model = tf.keras.Sequential([tf.keras.layers.Flatten(), tf.keras.layers.Dense(3)])
    model.compile("adam", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(ds, epochs=2, verbose=0)
    assert len(history.history["loss"]) == 2 and np.isfinite(history.history["loss"]).all()
    with pytest.raises(ValueError, match=r"epochs=2: only for mode='train'"):
        tfpipe.build_dataset(files, "eval", OPT, read=_read_wav, process=_post_process, epochs=2)


def test_make_input_fn_takes_the_same_functions(files):
    input_fn = tfpipe.make_input_fn(files, "eval", OPT, read=_read_wav, process=_post_process)
    ctx = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=1)
    labels = np.concatenate([l for _, l in input_fn({"batch_size": 3}, ctx).as_numpy_iterator()])
    assert labels.tolist() == files[1][1::2]  # pipeline 1 of 2 reads files 1, 3, 5, ...


def test_paths_list_globs_and_unknown_files_are_clear(files, tmp_path):
    predict = list(tfpipe.build_dataset(files[0], "predict", OPT, read=_read_wav, process=_post_process))
    assert sum(len(f["wav"]) for f in predict) == 10
    source = tfpipe.find(str(tmp_path / "clip*.wav"))
    assert len(source.paths) == 10 and source.kind == "wav"
    (tmp_path / "notes.xyz").write_text("x")
    with pytest.raises(ValueError, match=r"no built-in domain reads these files .* pass read= and process="):
        tfpipe.build_dataset(([str(tmp_path / "notes.xyz")], [0]), "eval", OPT)
    with pytest.raises(ValueError, match=r"2 paths but 1 labels"):
        tfpipe.build_dataset((files[0][:2], [0]), "eval", OPT, read=_read_wav)


def test_non_utf8_file_names_reach_the_reader(tmp_path):
    plain = write_tone(str(tmp_path / "a.wav"), 440, seconds=0.1)
    os.rename(os.fsencode(plain), os.path.join(os.fsencode(str(tmp_path)), b"caf\xe9.wav"))  # latin-1: not UTF-8
    path = os.path.join(str(tmp_path), os.fsdecode(b"caf\xe9.wav"))
    other = write_tone(str(tmp_path / "b.wav"), 880, seconds=0.1)
    batches = _eval(([path, other], [0, 1]))
    assert np.concatenate([l for _, l in batches]).tolist() == [0, 1]


# --- a user function that fails on some files ----------------------------------------------------

def _strict_read(filename, label):
    """Like the seed's read, but a TF assert refuses clips shorter than 0.1 s (files 0..2 here)."""
    wav, label = _read_wav(filename, label)
    tf.debugging.assert_greater_equal(tf.shape(wav)[0], 1600, message="clip shorter than 0.1 s")
    return wav, label


def test_a_failing_tf_function_is_named_in_the_error(files):
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"clip shorter than 0.1 s[\s\S]*read\._strict_read/"):
        _eval(files, read=_strict_read)


def test_on_error_skip_leaves_failing_files_out_and_names_each_with_a_count(files, capfd):
    batches = _eval(files, read=_strict_read, on_error="skip")
    kept = sorted(_keys(batches))
    assert len(kept) == 7  # clips 0.05, 0.07, 0.09 s are refused: 3 of 10
    err = capfd.readouterr().err
    for i in range(3):
        assert f"tfpipe: skipped \"{files[0][i]}\" (on_error='skip'): read+process failed" in err
    assert "skipped so far: 3" in err and "skipped so far: 4" not in err
    with pytest.raises(ValueError, match="on_error='ignore': allowed values are 'raise' and 'skip'"):
        _eval(files, on_error="ignore")


def test_a_function_capturing_an_eager_tensor_is_named_with_the_fix(files):
    scale = tf.constant(2.0)  # made eagerly, outside the function

    def scaled(wav, label):
        return {"wav": wav[:10] * scale}, label

    tfpipe.build_dataset(files, "eval", OPT, read=_read_wav, process=scaled)  # eagerly it works
    with tf.Graph().as_default():  # where an Estimator calls input_fn
        with pytest.raises(ValueError, match=r"read\+process .*uses a tensor made outside it.*make the tensor "
                                             r"inside the function"):
            tfpipe.build_dataset(files, "eval", OPT, read=_read_wav, process=scaled)
