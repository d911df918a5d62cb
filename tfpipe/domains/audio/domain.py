"""The audio domain: wav files -> log-mel (or waveform) features, online and offline."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

from tfpipe.core import lazy
from tfpipe.core.domain import Corpus, Domain, check_stored_fields
from tfpipe.core.registry import register_domain
from tfpipe.core.stage import Stage
from tfpipe.domains.audio import scan
from tfpipe.domains.audio.config import STORES, AudioConfig, AudioCorpusConfig
from tfpipe.errors import DataError

# Loaded on first use: this module imports without TensorFlow (tfpipe.core.lazy says why).
tf = lazy.module("tensorflow")
ops = lazy.module("tfpipe.domains.audio.ops")
files = lazy.module("tfpipe.core.files")

# Fields that fix the stored values: shards are reusable only by a pipeline asking for the same ones.
_LOG_MEL_FIELDS = ("sample_rate", "clip_seconds", "n_fft", "hop_length", "n_mels", "fmin", "fmax", "log_offset")
_WAVEFORM_FIELDS = ("sample_rate", "clip_seconds")


# Files up to this much larger than the header and the samples a clip uses are read whole (one
# read_file, ~0.2 ms); larger ones (a 2 GB recording of which one second is used) read only the
# header and the clip's samples, at ~0.3 ms more per file but not the whole file's memory.
_WHOLE_READ_SLACK = 16 << 20  # 16 MiB
_HASH_BUCKETS = 1 << 62  # header fingerprints: tf.strings.to_hash_bucket_fast, in the table and at read


def wav_stage_fns(f: AudioConfig, head_reads: bool = True):
    """read, decode, featurize over (file, label) elements, file = (path, data offset, data size,
    file size, header fingerprint) as `AudioDomain.file_table` makes it.

    read takes one file or a batch of them (read one by one inside the batch's map, so with
    vectorize no one-thread tf.data op copies each file's bytes: on 2 cores a per-file read map
    and its batch capped the chain at ~44k files/s, the batched read reached ~80k); it reads the
    bytes (the head only, for files far larger than the clip, when `head_reads`; without them no
    per-file branch). decode first fails, naming the file, when it no longer has the size and
    header the scan saw (truncated, replaced by a stereo file, rewritten): the offsets would no
    longer point at its samples. decode and featurize work on one example or on a whole batch (one
    fingerprint check, one decode_raw, one STFT per batch); tfpipe.bench times them one by one.
    """

    def read_one(file):
        path, offset, size, file_size, _ = file
        if not head_reads:
            return tf.io.read_file(path), file_size
        needed = offset + (size if f.whole_clips else tf.minimum(size, 2 * f.num_samples))
        head = file_size - needed > _WHOLE_READ_SLACK
        contents = tf.cond(head, lambda: _read_head(path, needed, file_size), lambda: tf.io.read_file(path))
        return contents, tf.where(head, needed, file_size)

    def read(file, label):
        path, offset, size, _, fingerprint = file
        if path.shape.rank == 0:
            contents, expected = read_one(file)
        else:  # a batch of files: read one by one inside this (parallel) map, so no one-thread op copies bytes
            contents, expected = tf.map_fn(read_one, file, fn_output_signature=(tf.string, tf.int64))
        return (contents, path, offset, size, expected, fingerprint), label

    def decode(file, label):
        contents, path, offset, size, expected, fingerprint = file
        same = tf.logical_and(tf.equal(tf.cast(tf.strings.length(contents), tf.int64), expected),
                              tf.equal(_fingerprint(tf.strings.substr(contents, tf.zeros_like(offset), offset)),
                                       fingerprint))
        # One example or a batch: the files whose check failed, joined, then why (built once a batch).
        changed = tf.strings.reduce_join(tf.boolean_mask(tf.reshape(path, [-1]), tf.logical_not(tf.reshape(same, [-1]))),
                                         separator=", ")
        # raw Assert: tf.debugging.Assert wraps itself in a cond, a function call each time.
        assertion = tf.raw_ops.Assert(condition=tf.reduce_all(same), data=[tf.strings.join([changed, (
            ": changed since the pipeline was built (its size or header differs from the check then: "
            "truncated, replaced or rewritten); build the dataset again (a new build_dataset or input_fn "
            "call) so the file is checked again")])])
        with tf.control_dependencies([assertion]):
            return ops.decode_pcm16(contents, offset, size, f.num_samples), label

    def featurize(waveform, label):
        return {f.feature_key: ops.compute_features(waveform, f)}, label

    return read, decode, featurize


def _read_head(path: tf.Tensor, length: tf.Tensor, file_size: tf.Tensor) -> tf.Tensor:
    """The first `length` bytes of a file of `file_size` bytes, without reading the rest.

    A file whose size changed fails here, naming it (TensorFlow: "input file ... has body length
    ..., which is not an exact multiple of the record length").
    """
    records = tf.data.FixedLengthRecordDataset(path, record_bytes=length, footer_bytes=file_size - length,
                                               buffer_size=1 << 16)
    return records.take(1).get_single_element()


def _fingerprint(headers: Any) -> tf.Tensor:
    """int64 fingerprint of header bytes (one or many), the same eagerly and inside a map."""
    return tf.strings.to_hash_bucket_fast(headers, _HASH_BUCKETS)


class AudioDomain(Domain):
    """16-bit PCM mono wavs online (headers scanned up front); any wav offline (soundfile + soxr)."""

    name = "audio"
    extensions = (".wav",)
    config_class = AudioConfig
    kind = "wav"
    default = True
    corpus = Corpus("tfpipe.domains.audio.synthetic:write_files", AudioCorpusConfig,
                    "8 learnable classes of wav clips")
    recipes = {"keras": "tfpipe.domains.audio.recipes:keras_recipe"}
    # Training runs shard first (any wav soundfile reads trains, resampled and mixed to mono) and
    # store waveforms: the pipeline then computes the log-mel on every read, so its settings matter.
    shards_for_training = True
    training_store = "waveform"
    serving_sends = "raw waveforms"

    def file_table(self, paths: Sequence[str], config: AudioConfig) -> Any:
        return self._table(paths, scan.scan_wavs(paths, config))  # every unusable file is named here

    def _table(self, paths: Sequence[str], layout: Any) -> Any:
        fingerprints = _fingerprint(list(layout.headers)) if paths else tf.zeros([0], tf.int64)
        return (files.tf_paths(paths), tf.constant(layout.offsets, tf.int64), tf.constant(layout.sizes, tf.int64),
                tf.constant(layout.file_sizes, tf.int64), fingerprints)

    def stages(self, config: AudioConfig, mode: str, head_reads: bool = True) -> list[Stage]:
        read, decode, featurize = wav_stage_fns(config, head_reads)
        python = config.backend == "librosa" and config.output == "log_mel"
        # read, decode (with its check) and features work on whole batches (one map_fn of reads,
        # one decode_raw and one STFT per batch) when every clip has one length; whole clips of
        # differing lengths are decoded one by one. A cache keeps what read gave, per file (plan).
        fixed = not config.whole_clips
        return [Stage("read", read, batchable=True, fixed_shape=True),
                Stage("decode", decode, batchable=fixed, fixed_shape=fixed),
                Stage("features", featurize, batchable=fixed, python=python, fixed_shape=fixed)]

    def reading(self, paths: Sequence[str], config: AudioConfig, mode: str) -> tuple[Any, list[Stage]]:
        """The file table and stages, with the per-file head-read branch only where a file needs it."""
        layout = scan.scan_wavs(paths, config)  # every unusable file is named here, before training
        needed = [o + (s if config.whole_clips else min(s, 2 * config.num_samples))
                  for o, s in zip(layout.offsets, layout.sizes)]
        head_reads = any(size - n > _WHOLE_READ_SLACK for size, n in zip(layout.file_sizes, needed))
        return self._table(paths, layout), self.stages(config, mode, head_reads)

    def stores(self) -> tuple[str, ...]:
        return STORES

    def offline(self, config: AudioConfig, store: str):
        if config.whole_clips:
            raise ValueError("clip_seconds=0 (whole clips) is for the online path: shards store clips of one "
                             "length; pass --clip_seconds (e.g. the longest clip's length) to prepare them")
        from tfpipe.domains.audio.offline import AudioOffline  # soundfile and librosa load here only

        return AudioOffline(config, store)

    def stored_stages(self, stored: Mapping[str, Any], config: AudioConfig, mode: str = "eval") -> list[Stage]:
        store = stored["store"]
        check_stored(stored, config)
        if store == "waveform" and config.output == "log_mel":  # log-mel from stored waveforms
            return [Stage("features", fixed_shape=True, fn=lambda values, labels: (
                {config.feature_key: ops.compute_features(values[store], config)}, labels), batchable=True)]
        return []

    def serving_receiver(self, config: AudioConfig) -> tuple[dict, dict]:
        """Raw mono waveforms in ([batch, any length], float32 in [-1, 1)), the training features out.

        A "librosa" config is served with the "tf" backend: a SavedModel cannot carry Python
        code, and the two backends compute the same log-mel.
        """
        in_graph = dataclasses.replace(config, backend="tf")
        waveform = tf.compat.v1.placeholder(tf.float32, [None, None], name="waveform")
        fixed = waveform if config.whole_clips else ops.fix_length(waveform, config.num_samples)
        return {"waveform": waveform}, {config.feature_key: ops.compute_features(fixed, in_graph)}

    def serving_inputs(self, paths: Sequence[str], config: AudioConfig) -> dict:
        """Any wav the sharding reads, resampled to the config's rate and mixed to mono, as waveforms."""
        from tfpipe.domains.audio.offline import load_clip, pad_clips  # soundfile and soxr load here only

        return {"waveform": pad_clips([load_clip(path, config) for path in paths], config.num_samples)}

    def model_input(self, features: Mapping[str, Any], config: AudioConfig) -> Any:
        """The log-mel (computed here from waveforms), standardized per clip over frames and bands."""
        if "waveform" in features:
            features = {"log_mel": ops.log_mel(features["waveform"], config)}
        return super().model_input({"log_mel": features["log_mel"]}, config)


def check_stored(stored: Mapping[str, Any], f: AudioConfig, where: str = "the shard index") -> None:
    """DataError naming each field where stored features differ from the requested ones."""
    store = stored["store"]
    if store == "log_mel" and f.output == "waveform":
        raise DataError(f"{where}: the shards store log-mel features but AudioConfig.output='waveform' "
                        f"asks for waveforms; rerun `tfpipe prepare --store waveform` or ask for output='log_mel'")
    check_stored_fields(stored["config"], f, _LOG_MEL_FIELDS if store == "log_mel" else _WAVEFORM_FIELDS, where)


def wav_file_table(source: Any, f: AudioConfig) -> tf.data.Dataset:
    """((path, data offset, data size), label) per wav file of a FileSource; bad files fail here, by name."""
    table = AudioDomain().file_table(source.paths, f)
    return tf.data.Dataset.from_tensor_slices((tuple(table), tf.constant(source.labels, tf.int64)))


DOMAIN = register_domain(AudioDomain())
