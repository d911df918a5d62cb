"""The audio domain through the one chain: files changed after the build fail naming them (no silent zero
padding, no stereo read as mono), a long recording is read only as far as the clip needs, stage metadata."""

import os

import numpy as np
import pytest
import soundfile as sf
import tensorflow as tf

import tfpipe
from tests.support import make_corpus, write_tone
from tfpipe.config import PipelineConfig
from tfpipe.core.registry import get_domain
from tfpipe.domains.audio import domain as audio_domain
from tfpipe.domains.audio.config import AudioConfig

FEAT = AudioConfig(clip_seconds=0.25)
PIPE = PipelineConfig.optimized(batch_size=4)


def _count(ds):
    return sum(len(labels) for _, labels in ds)


def test_no_audio_stage_is_random_and_every_one_takes_a_batch():
    stages = get_domain("audio").stages(FEAT, "train")
    assert [(s.name, s.batchable, s.random) for s in stages] == [
        ("read", True, False), ("decode", True, False), ("features", True, False)]


@pytest.mark.parametrize("change", ["truncated", "stereo", "other_rate", "longer_header"])
def test_a_wav_changed_after_the_build_fails_naming_it(tmp_path, change):
    data = make_corpus(tmp_path / "corpus", per_class=2)
    ds = tfpipe.build_dataset(data, "eval", PIPE, FEAT)
    assert _count(ds) == 6
    victim = os.path.join(data, "b", "b001.wav")
    if change == "truncated":  # the zero padding this would have given is silent wrong data
        content = open(victim, "rb").read()
        open(victim, "wb").write(content[:len(content) // 2])
    elif change == "stereo":  # same duration, twice the bytes: read at the old offsets it is garbage
        write_tone(victim, 500, seconds=0.125, channels=2)
    elif change == "other_rate":  # same size, another header
        write_tone(victim, 500, seconds=0.5, sample_rate=8000)
    else:  # same samples behind a header with an extra chunk
        samples, rate = sf.read(victim, dtype="int16")
        with sf.SoundFile(victim, "w", rate, 1, "PCM_16") as f:
            f.comment = "moved the samples"
            f.write(samples)
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=rf"{victim}: changed since the pipeline was built.*build the dataset again"):
        _count(ds)


@pytest.mark.filterwarnings("ignore:.*clips are longer than clip_seconds")
def test_a_long_recording_is_read_only_as_far_as_the_clip_and_checked(tmp_path):
    rng = np.random.default_rng(0)
    clip = (rng.standard_normal(16000 * 11 * 60) * 3000).astype(np.int16)  # 11 minutes: 21 MB, over the slack
    long_path = str(tmp_path / "c" / "a" / "long.wav")
    short_path = str(tmp_path / "c" / "b" / "short.wav")
    os.makedirs(os.path.dirname(long_path))
    os.makedirs(os.path.dirname(short_path))
    sf.write(long_path, clip, 16000, subtype="PCM_16")
    sf.write(short_path, clip[:4000], 16000, subtype="PCM_16")  # the same first 0.25 s
    assert os.path.getsize(long_path) > audio_domain._WHOLE_READ_SLACK + 16000
    ds = tfpipe.build_dataset(str(tmp_path / "c"), "eval", PIPE, FEAT)
    features = next(iter(ds))[0]["log_mel"].numpy()
    np.testing.assert_array_equal(features[0], features[1])  # the head read gives the same clip
    read, _, _ = audio_domain.wav_stage_fns(FEAT)
    table = get_domain("audio").file_table([long_path], FEAT)
    element = tf.data.Dataset.from_tensor_slices((table, tf.constant([0], tf.int64))).map(read)
    (contents, _, offset, size, _, _), _ = next(iter(element))
    assert len(contents.numpy()) == int(offset) + 2 * 4000  # header and the clip's samples only
    with open(long_path, "r+b") as f:  # cut: the size no longer matches the scan
        f.truncate(os.path.getsize(long_path) - 1000)
    with pytest.raises(tf.errors.InvalidArgumentError, match=rf"{long_path}"):
        _count(ds)


def test_whole_clips_keep_every_sample_and_bucket_by_length(tmp_path):
    import tfpipe
    from tests.support import write_tone

    lengths_s = [0.1, 0.12, 0.5, 0.55, 1.0, 1.1] * 2
    for i, seconds in enumerate(lengths_s):
        write_tone(str(tmp_path / "clips" / ("a" if i % 2 else "b") / f"c{i:02d}.wav"), 300 + 50 * i, seconds=seconds)
    whole = tfpipe.AudioConfig(clip_seconds=0)
    pipe = tfpipe.PipelineConfig.optimized(batch_size=2, seed=0, drop_remainder=False, bucket_boundaries=(20, 80))
    seen = []
    for features, _ in tfpipe.build_dataset(str(tmp_path / "clips"), "train", pipe, whole, epochs=1):
        batch = features["log_mel"].numpy()
        assert batch.shape[0] <= 2 and batch.shape[2] == 64
        lengths = (np.abs(batch).sum(axis=2) > 0).sum(axis=1)  # frames before the zero padding
        assert batch.shape[1] == lengths.max()  # padded only to its own longest clip
        assert len(set(np.digitize(lengths, [20, 80]))) == 1  # one bucket per batch
        seen += lengths.tolist()
    # Each clip's frames: 1 + samples // hop (160 at 16 kHz): every clip whole, once.
    assert sorted(seen) == sorted(1 + int(round(s * 16000)) // 160 for s in lengths_s)
    waves = list(tfpipe.build_dataset(str(tmp_path / "clips"), "eval", pipe,
                                      tfpipe.AudioConfig(clip_seconds=0, output="waveform")))
    assert sum(int((w["waveform"].numpy() != 0).any(axis=1).sum()) for w, _ in waves) == 12
    with pytest.raises(ValueError, match="clip_seconds=0 \\(whole clips\\) is for the online path"):
        tfpipe.write_shards(str(tmp_path / "clips"), str(tmp_path / "s"), features=whole, progress=False)
    with pytest.raises(ValueError, match="must be 0 \\(whole clips\\) or >= 0.01"):
        tfpipe.AudioConfig(clip_seconds=0.001)
