"""The audio domain: wav files -> log-mel (or waveform) features, online and offline."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

import tensorflow as tf

from tfpipe.core.domain import Domain, check_stored_fields
from tfpipe.core.source import tf_paths
from tfpipe.core.stage import Stage
from tfpipe.domains.audio import ops, scan
from tfpipe.domains.audio.config import AudioConfig
from tfpipe.errors import DataError

# Fields that fix the stored values: shards are reusable only by a pipeline asking for the same ones.
_LOG_MEL_FIELDS = ("sample_rate", "clip_seconds", "n_fft", "hop_length", "n_mels", "fmin", "fmax", "log_offset")
_WAVEFORM_FIELDS = ("sample_rate", "clip_seconds")


def wav_stage_fns(f: AudioConfig):
    """read, decode, featurize over (file, label) elements, file = (path, data offset, data size).

    Each works on one example or a batch (decode and featurize); tfpipe.bench times them one by one.
    """

    def read(file, label):
        path, offset, size = file
        return (tf.io.read_file(path), offset, size), label

    def decode(file, label):
        contents, offset, size = file
        return ops.decode_pcm16(contents, offset, size, f.num_samples), label

    def featurize(waveform, label):
        return {f.feature_key: ops.compute_features(waveform, f)}, label

    return read, decode, featurize


class AudioDomain(Domain):
    """16-bit PCM mono wavs online (headers scanned up front); any wav offline (soundfile + soxr)."""

    name = "audio"
    extensions = (".wav",)
    config_class = AudioConfig
    kind = "wav"

    def file_table(self, paths: Sequence[str], config: AudioConfig) -> Any:
        layout = scan.scan_wavs(paths, config)  # every unusable file is named here, before training
        return (tf_paths(paths), list(layout.offsets), list(layout.sizes))

    def stages(self, config: AudioConfig, mode: str) -> list[Stage]:
        read, decode, featurize = wav_stage_fns(config)
        python = config.backend == "librosa" and config.output == "log_mel"
        # decode and features work on whole batches: one decode_raw and one STFT per batch.
        return [Stage("read", read), Stage("decode", decode, batchable=True),
                Stage("features", featurize, batchable=True, python=python)]

    def stores(self) -> tuple[str, ...]:
        from tfpipe.domains.audio.offline import STORES

        return STORES

    def offline(self, config: AudioConfig, store: str):
        from tfpipe.domains.audio.offline import AudioOffline  # soundfile and librosa load here only

        return AudioOffline(config, store)

    def stored_stages(self, stored: Mapping[str, Any], config: AudioConfig, mode: str = "eval") -> list[Stage]:
        store = stored["store"]
        check_stored(stored, config)
        if store == "waveform" and config.output == "log_mel":  # log-mel from stored waveforms
            return [Stage("features", lambda values, labels: (
                {config.feature_key: ops.compute_features(values[store], config)}, labels), batchable=True)]
        return []

    def serving_receiver(self, config: AudioConfig) -> tuple[dict, dict]:
        """Raw mono waveforms in ([batch, any length], float32 in [-1, 1)), the training features out.

        A "librosa" config is served with the "tf" backend: a SavedModel cannot carry Python
        code, and the two backends compute the same log-mel.
        """
        in_graph = dataclasses.replace(config, backend="tf")
        waveform = tf.compat.v1.placeholder(tf.float32, [None, None], name="waveform")
        fixed = ops.fix_length(waveform, config.num_samples)
        return {"waveform": waveform}, {config.feature_key: ops.compute_features(fixed, in_graph)}


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
