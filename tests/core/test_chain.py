"""build_dataset: the ordered chain, each toggle's effect, modes, exactly-once eval."""

import collections
import dataclasses

import numpy as np
import pytest
import soundfile as sf
import tensorflow as tf

from tests.support import make_corpus, write_tone
from tfpipe.core import source as sources
from tfpipe.domains.audio import ops
from tfpipe.config import TOGGLES, PipelineConfig
from tfpipe.domains.audio.config import AudioConfig
from tfpipe.errors import DataError
from tfpipe.core.chain import build_dataset
from tfpipe.core.graph import dataset_ops

FEAT = AudioConfig(clip_seconds=0.25)  # the corpus clips are 0.25 s: 26 frames x 64 mels
OPT = PipelineConfig.optimized(batch_size=5, seed=7)
NAIVE = PipelineConfig.naive(batch_size=5, seed=7)


def _eval(data, pipeline=OPT, features=FEAT, **kwargs):
    batches = list(build_dataset(data, "eval", pipeline, features, **kwargs).as_numpy_iterator())
    return batches


def _reference(src, features=FEAT):
    """Per-file log-mel computed independently: soundfile decode + librosa features."""
    out = []
    for path in src.paths:
        wave, _ = sf.read(path, dtype="float32")
        wave = np.pad(wave[:features.num_samples], (0, max(0, features.num_samples - wave.size)))
        out.append(ops.log_mel_librosa(wave, features))
    return np.stack(out)


def _key(example):
    """Identifies an example by its features (each test file has its own frequency)."""
    return round(float(np.mean(example)), 3)


def test_eval_yields_every_file_once_in_order_with_partial_last_batch(corpus):
    src = sources.find(corpus)
    batches = _eval(corpus)
    assert [len(labels) for _, labels in batches] == [5, 5, 2]  # 12 files, last partial batch kept
    got = np.concatenate([f["log_mel"] for f, _ in batches])
    np.testing.assert_array_equal(np.concatenate([l for _, l in batches]), src.labels)
    np.testing.assert_allclose(got, _reference(src), atol=1e-3)


@pytest.mark.parametrize("toggle", [t for t in TOGGLES])
def test_each_toggle_changes_speed_not_results(corpus, toggle):
    flipped = dataclasses.replace(OPT, **{toggle: getattr(NAIVE, toggle)})
    base = _eval(corpus)
    other = _eval(corpus, flipped)
    for (f1, l1), (f2, l2) in zip(base, other, strict=True):
        np.testing.assert_array_equal(l1, l2)
        np.testing.assert_allclose(f1["log_mel"], f2["log_mel"], atol=1e-5)


def _ops(corpus, pipeline, mode="train"):
    return dataset_ops(build_dataset(corpus, mode, pipeline, FEAT))


def _maps(ops):
    """Positions of the chain's maps (not the order's flat_map, nor the map TF's rebatch adds before itself)."""
    return [i for i, op in enumerate(ops) if "MapDataset" in op and op != "FlatMapDataset"
            and not (op == "MapDataset" and i + 1 < len(ops) and ops[i + 1] == "RebatchDatasetV2")]


def _batch(ops):
    """Position of the step that makes the batches: rebatch (of groups or windows), else batch."""
    return ops.index("RebatchDatasetV2") if "RebatchDatasetV2" in ops else len(ops) - 1 - ops[::-1].index("BatchDatasetV2")


def test_optimized_chain_is_order_batch_map_prefetch(corpus):
    # The order (epochs of seeded file permutations: repeat + shuffle files in one) is a range of
    # epochs, each flat-mapped to its permuted file table: no per-example map or shuffle buffer.
    # The file names are batched and one parallel map reads, decodes and computes each batch: no
    # one-thread op copies a file's bytes (on 2 cores a per-file read map and its batch capped the
    # wav chain at ~44k files/s).
    assert _ops(corpus, OPT) == ["RangeDataset", "FlatMapDataset", "BatchDatasetV2", "ParallelMapDatasetV2",
                                 "PrefetchDataset", "OptionsDataset"]
    assert _ops(corpus, dataclasses.replace(OPT, group_maps=False)) == _ops(corpus, OPT)  # nothing per example
    # The same batches as reading, decoding and computing each file on its own (vectorize off).
    fixed = dataclasses.replace(OPT, deterministic=True)
    per_file = dataclasses.replace(fixed, vectorize=False)
    assert "ParallelMapDatasetV2" in _ops(corpus, per_file)[:3]
    for a, b in zip(build_dataset(corpus, "train", fixed, FEAT).take(5),
                    build_dataset(corpus, "train", per_file, FEAT).take(5)):
        np.testing.assert_array_equal(a[1], b[1])
        np.testing.assert_allclose(a[0]["log_mel"], b[0]["log_mel"], rtol=1e-5, atol=1e-5)


def test_naive_chain_is_the_seed_questions(corpus):
    # map(read) -> shuffle(whole set) -> the audio domain's decode and features maps -> batch -> repeat
    assert _ops(corpus, NAIVE) == ["TensorSliceDataset", "MapDataset", "ShuffleDatasetV3", "MapDataset",
                                   "MapDataset", "BatchDatasetV2", "RepeatDataset", "OptionsDataset"]


def test_repeat_before_shuffle_moves_repeat_and_removes_epoch_end_partial_batches(corpus):
    on, off = (dataclasses.replace(NAIVE, drop_remainder=False, repeat_before_shuffle=v) for v in (True, False))
    ops_on, ops_off = _ops(corpus, on), _ops(corpus, off)
    assert ops_on.index("RepeatDataset") < ops_on.index("ShuffleDatasetV3")
    assert ops_off.index("RepeatDataset") > ops_off.index("BatchDatasetV2")
    sizes = lambda p: [len(l) for _, l in build_dataset(corpus, "train", p, FEAT).take(6).as_numpy_iterator()]
    assert sizes(off) == [5, 5, 2, 5, 5, 2]  # each epoch ends in a partial batch
    assert sizes(on) == [5] * 6  # one endless stream


def test_shuffle_filenames_shuffles_paths_before_reading(corpus):
    on = _ops(corpus, dataclasses.replace(OPT, repeat_before_shuffle=False))  # off the order: the toggle's steps
    off = _ops(corpus, dataclasses.replace(OPT, shuffle_filenames=False))
    assert on.index("ShuffleDatasetV3") < _maps(on)[0]
    assert off.index("ShuffleDatasetV3") > _maps(off)[0]
    # The optimized order permutes the file table itself, before anything is read.
    first = [f for f, _ in build_dataset(corpus, "train", OPT, FEAT).take(3).as_numpy_iterator()]
    assert len({tuple(np.round(b["log_mel"][:, 0, 0], 3)) for b in first}) == 3


def test_fuse_maps_runs_one_map_per_side_of_batch(corpus):
    assert len(_maps(_ops(corpus, OPT))) == 1  # batch | read+decode+features
    assert len(_maps(_ops(corpus, dataclasses.replace(OPT, shuffle_filenames=False)))) == 2  # read | batch | rest
    assert len(_maps(_ops(corpus, dataclasses.replace(OPT, fuse_maps=False)))) == 3
    assert len(_maps(_ops(corpus, dataclasses.replace(NAIVE, fuse_maps=True)))) == 1  # read+decode+features
    assert len(_maps(_ops(corpus, NAIVE))) == 3  # one map per stage: read, decode, features


def test_parallel_map_switches_every_map(corpus):
    ops_on, ops_off = _ops(corpus, OPT), _ops(corpus, dataclasses.replace(OPT, parallel_map=False))
    assert {ops_on[i] for i in _maps(ops_on)} == {"ParallelMapDatasetV2"}
    assert {ops_off[i] for i in _maps(ops_off)} == {"MapDataset"}
    options = build_dataset(corpus, "train", dataclasses.replace(OPT, parallel_map=False), FEAT).options()
    # tf.data's default rewrites must not undo the toggle behind our back
    assert options.experimental_optimization.map_parallelization is False
    assert options.experimental_optimization.map_and_batch_fusion is False


def test_vectorize_computes_features_on_whole_batches(corpus):
    on, off = _ops(corpus, OPT), _ops(corpus, dataclasses.replace(OPT, vectorize=False))
    assert _maps(on)[-1] > _batch(on)
    assert _maps(off)[-1] < _batch(off)


def test_prefetch_is_the_last_step(corpus):
    assert _ops(corpus, OPT)[-2] == "PrefetchDataset"
    no_prefetch = dataclasses.replace(OPT, prefetch=False)
    assert "PrefetchDataset" not in _ops(corpus, no_prefetch)
    assert build_dataset(corpus, "train", no_prefetch, FEAT).options().experimental_optimization.inject_prefetch is False


def test_deterministic_orders_parallel_train_maps_and_seed_fixes_the_order(corpus):
    ordered = dataclasses.replace(OPT, deterministic=True)
    assert build_dataset(corpus, "train", ordered, FEAT).options().deterministic is True
    assert build_dataset(corpus, "train", OPT, FEAT).options().deterministic is False
    assert build_dataset(corpus, "eval", OPT, FEAT).options().deterministic is True  # eval is always ordered

    def labels(p):
        return [list(l) for _, l in build_dataset(corpus, "train", p, FEAT).take(4).as_numpy_iterator()]

    assert labels(ordered) == labels(ordered)
    assert labels(ordered) != labels(dataclasses.replace(ordered, seed=8))


def test_cache_caches_read_examples_before_repeat(corpus, tmp_path):
    cache_file = str(tmp_path / "cache" / "examples")
    tmp_path.joinpath("cache").mkdir()
    ops = _ops(corpus, dataclasses.replace(OPT, cache="memory"))
    assert ops.index("CacheDatasetV2") < ops.index("RepeatDataset") and ops.index("CacheDatasetV2") > _maps(ops)[0]
    cached = dataclasses.replace(OPT, cache=cache_file)
    assert [len(l) for _, l in _eval(corpus, cached)] == [5, 5, 2]
    assert any(p.name.startswith("examples") for p in (tmp_path / "cache").iterdir())
    ds = build_dataset(corpus, "train", cached, FEAT)
    seen = collections.Counter(_key(x) for f, _ in ds.take(12).as_numpy_iterator() for x in f["log_mel"])
    assert sum(seen.values()) == 60 and len(seen) == 12  # every file, from the cache, in every epoch


def test_prefetch_to_device_is_a_no_op_without_a_gpu(corpus):
    assert not tf.config.list_logical_devices("GPU")
    assert _ops(corpus, dataclasses.replace(OPT, prefetch_to_device=False)) == _ops(corpus, OPT)


def test_train_batches_have_documented_shapes_and_dtypes_and_never_end(corpus):
    ds = build_dataset(corpus, "train", OPT, FEAT)
    assert ds.element_spec[0]["log_mel"].shape == (5, 26, 64) and ds.element_spec[0]["log_mel"].dtype == tf.float32
    assert ds.element_spec[1].shape == (5,) and ds.element_spec[1].dtype == tf.int64
    counts = collections.Counter(_key(x) for f, _ in ds.take(24).as_numpy_iterator() for x in f["log_mel"])
    assert sum(counts.values()) == 120 and len(counts) == 12  # 10 epochs' worth, every file seen
    assert min(counts.values()) >= 8  # repeat-then-shuffle blurs epoch ends by at most one epoch


def test_modes_accept_estimator_mode_keys_and_predict_yields_features_only(corpus):
    predicted = list(build_dataset(corpus, "infer", OPT, FEAT).as_numpy_iterator())
    assert isinstance(predicted[0], dict) and [len(b["log_mel"]) for b in predicted] == [5, 5, 2]
    assert len(list(build_dataset(corpus, "eval", OPT, FEAT))) == 3
    with pytest.raises(ValueError, match=r"mode='fit': allowed values are 'train', 'eval', 'predict'"):
        build_dataset(corpus, "fit", OPT, FEAT)


def test_input_contexts_read_disjoint_files_that_cover_the_set(corpus):
    seen = []
    for i in range(3):
        ctx = tf.distribute.InputContext(num_input_pipelines=3, input_pipeline_id=i)
        batches = list(build_dataset(corpus, "eval", OPT, FEAT, input_context=ctx).as_numpy_iterator())
        seen.append({_key(x) for f, _ in batches for x in f["log_mel"]})
    assert [len(s) for s in seen] == [4, 4, 4]
    assert len(set.union(*seen)) == 12


def test_fewer_files_than_input_pipelines_is_a_clear_error(corpus):
    ctx = tf.distribute.InputContext(num_input_pipelines=13, input_pipeline_id=0)
    with pytest.raises(ValueError, match=r"12 files but 13 input pipelines.*tfpipe prepare --num_shards 13"):
        build_dataset(corpus, "train", OPT, FEAT, input_context=ctx)


def test_a_bad_wav_fails_when_the_dataset_is_built_not_inside_a_map(corpus):
    bad = write_tone(f"{corpus}/b/loud_44k.wav", 500, sample_rate=44100)
    with pytest.raises(DataError, match=rf"{bad}: sample rate 44100 Hz, expected 16000 Hz"):
        build_dataset(corpus, "train", OPT, FEAT)


def test_librosa_backend_and_waveform_output(corpus):
    tf_feats = np.concatenate([f["log_mel"] for f, _ in _eval(corpus)])
    lib = _eval(corpus, NAIVE, dataclasses.replace(FEAT, backend="librosa"))
    np.testing.assert_allclose(np.concatenate([f["log_mel"] for f, _ in lib]), tf_feats, atol=1e-3)
    waves = _eval(corpus, OPT, dataclasses.replace(FEAT, output="waveform"))
    assert set(waves[0][0]) == {"waveform"} and waves[0][0]["waveform"].shape == (5, 4000)


def test_keras_fit_trains_on_the_same_dataset(corpus):
    ds = build_dataset(corpus, "train", OPT, FEAT)
    inputs = tf.keras.Input(shape=(26, 64), name="log_mel")
    outputs = tf.keras.layers.Dense(3)(tf.keras.layers.GlobalAveragePooling1D()(inputs))
    model = tf.keras.Model(inputs, outputs)
    model.compile("adam", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(ds, steps_per_epoch=3, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])


def test_csv_manifest_feeds_the_pipeline(tmp_path):
    make_corpus(tmp_path, classes=("a", "b"), per_class=2)
    (tmp_path / "m.csv").write_text("path,label\na/a000.wav,x\nb/b000.wav,y\nb/b001.wav,y\n")
    labels = np.concatenate([l for _, l in _eval(str(tmp_path / "m.csv"))])
    assert list(labels) == [0, 1, 1]


# --- blocks of examples (v2 shards) cross the chain whole ---------------------------------------

def _block_shards(tmp_path, n=150, num_shards=3):
    """Your own examples in v2 block shards: example i has value i in every field."""
    import tfpipe

    examples = ({"x": np.full([3], i, np.float32), "label": i % 3} for i in range(n))
    out = str(tmp_path / "blocks")
    tfpipe.write_shards(examples, out, num_shards=num_shards, label_key="label", progress=False)
    return out


@pytest.mark.parametrize("shuffle_blocks", [True, False])
def test_block_shuffle_gives_every_example_once_per_pass_and_mixes_blocks(tmp_path, shuffle_blocks):
    data = _block_shards(tmp_path)
    # Off the order (shuffle_filenames=False), where shuffle_blocks decides; the order itself is
    # checked by tests/conformance.
    p = PipelineConfig.optimized(batch_size=16, seed=3, drop_remainder=False, shuffle_blocks=shuffle_blocks,
                                 shuffle_filenames=False)
    batches = list(build_dataset(data, "train", p, epochs=2).as_numpy_iterator())
    seen = np.concatenate([f["x"][:, 0] for f, _ in batches]).astype(int)
    assert collections.Counter(seen) == {i: 2 for i in range(150)}  # each example once per pass
    first = seen[:150]
    assert not np.array_equal(np.sort(first[:16]), np.arange(first[0], first[0] + 16))  # not one block in order
    ops = dataset_ops(build_dataset(data, "train", p))
    assert ("UnbatchDataset" in ops) != shuffle_blocks and ("RebatchDatasetV2" in ops) == shuffle_blocks


def test_block_shards_in_eval_are_re_cut_in_order_without_unbatching(tmp_path):
    data = _block_shards(tmp_path, n=50, num_shards=2)
    ds = build_dataset(data, "eval", PipelineConfig.optimized(batch_size=16))
    batches = list(ds.as_numpy_iterator())
    assert [len(l) for _, l in batches] == [16, 16, 16, 2]
    assert "UnbatchDataset" not in dataset_ops(ds)
    order = [int(v) for v in np.concatenate([f["x"][:, 0] for f, _ in batches])]
    written = [int(v) for f, _ in build_dataset(data, "eval", PipelineConfig.naive(batch_size=50)).as_numpy_iterator()
               for v in f["x"][:, 0]]
    assert order == written and sorted(order) == list(range(50))  # the file order, every example once


# --- arguments that used to fail deep inside, or silently ----------------------------------------

def test_a_naive_train_stream_that_batch_size_would_leave_empty_is_an_error(corpus):
    with pytest.raises(ValueError, match=r"12 examples \(12 per input pipeline, 1 pass\(es\) before batching\) "
                                         r"but batch_size=1000 with drop_remainder: every example would be dropped"):
        build_dataset(corpus, "train", PipelineConfig.naive(batch_size=1000), FEAT)
    # Repeating before batching, batches span epochs: the same batch size works.
    assert len(next(iter(build_dataset(corpus, "train", PipelineConfig.optimized(batch_size=1000), FEAT)))[1]) == 1000
    assert len(next(iter(build_dataset(corpus, "train", PipelineConfig.naive(batch_size=1000, drop_remainder=False),
                                       FEAT)))[1]) == 12


@pytest.mark.parametrize("kwargs,message", [
    (dict(pipeline="naive"), r"pipeline='naive': pass a PipelineConfig, e.g. tfpipe.PipelineConfig.preset\('naive'\)"),
    (dict(pipeline={"batch_size": 8}), r"pipeline=dict: pass a PipelineConfig"),
    (dict(epochs=2.5), r"epochs=2.5: expected a whole number \(int\), got float"),
    (dict(start_step="5"), r"start_step='5': expected a whole number \(int\), got str"),
    (dict(mode="training"), r"mode='training': allowed values are 'train', 'eval', 'predict'"),
    (dict(start_step=3, pipeline=PipelineConfig.optimized(cache="memory")),
     r"start_step=3 with cache='memory': a cache replays one epoch in a fixed order"),
])
def test_wrong_arguments_are_named_with_what_is_allowed(corpus, kwargs, message):
    kwargs = {"mode": "train", **kwargs}
    with pytest.raises(ValueError, match=message):
        build_dataset(corpus, features=FEAT, **kwargs)


# --- variable-length examples batched by length ---------------------------------------------------

def _lengths_source(tmp_path, lengths):
    """One file per example; the example is a run of `length` ones (its file holds the length)."""
    paths = []
    for i, n in enumerate(lengths):
        path = tmp_path / f"e{i:03d}.txt"
        path.write_text(str(n))
        paths.append(str(path))

    def read(path, label):
        n = tf.strings.to_number(tf.io.read_file(path), tf.int32)
        return {"tokens": tf.ones([n], tf.float32)}, label

    return (paths, [0] * len(paths)), read


def _padding_share(batches):
    values = np.concatenate([f["tokens"].ravel() for f, _ in batches])
    return float(np.mean(values == 0))


def test_bucket_boundaries_pad_each_batch_only_within_its_bucket(tmp_path):
    rng = np.random.default_rng(0)
    lengths = rng.choice([5, 8, 40, 45, 200, 230], size=120).tolist()
    data, read = _lengths_source(tmp_path, lengths)
    plain = PipelineConfig.optimized(batch_size=8, seed=1, drop_remainder=False)
    bucketed = dataclasses.replace(plain, bucket_boundaries=(20, 100))
    padded = list(build_dataset(data, "train", plain, read=read, epochs=1).as_numpy_iterator())
    by_length = list(build_dataset(data, "train", bucketed, read=read, epochs=1).as_numpy_iterator())
    assert sum(len(l) for _, l in by_length) == 120  # every example once
    for features, _ in by_length:  # a batch holds one bucket's lengths: [1, 20), [20, 100), [100, inf)
        lengths_in = (features["tokens"] > 0).sum(axis=1)
        assert np.digitize(lengths_in, [20, 100]).min() == np.digitize(lengths_in, [20, 100]).max()
    assert _padding_share(by_length) < 0.2 < _padding_share(padded)
    with pytest.raises(ValueError, match=r"bucket_key='length': the features are \['tokens'\]"):
        build_dataset(data, "train", dataclasses.replace(bucketed, bucket_key="length"), read=read)


def test_a_chain_is_built_from_steps_alone(corpus):
    # The chain applies what the steps carry and reads nothing else: no PipelineConfig reaches it.
    from tfpipe.core import steps as st
    from tfpipe.core.chain import apply

    inputs = sources.find(corpus).chain_input("eval", FEAT)
    steps = (st.Map(tuple(inputs.stages[:1]), parallel=True, deterministic=True), st.Batch(5, drop_remainder=True),
             st.Map(tuple(inputs.stages[1:]), parallel=False, deterministic=True),
             st.Options(True, False, False, False))
    batches = list(apply(steps, inputs).as_numpy_iterator())
    assert [len(labels) for _, labels in batches] == [5, 5]  # 12 files, the remainder dropped as the step says
    np.testing.assert_array_equal(np.concatenate([l for _, l in batches]), [0, 0, 0, 0, 1, 1, 1, 1, 2, 2])
    assert dataset_ops(apply(steps, inputs)) == ["TensorSliceDataset", "ParallelMapDatasetV2", "BatchDatasetV2",
                                                 "MapDataset", "OptionsDataset"]
