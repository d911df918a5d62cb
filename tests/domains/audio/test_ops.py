"""Per-example ops, eagerly and inside Dataset.map, and the TF/librosa log-mel agreement."""

import numpy as np
import pytest
import soundfile as sf
import tensorflow as tf

from tfpipe.domains.audio import ops, scan
from tfpipe.domains.audio.config import AudioConfig

# TF float32 vs librosa float64 on the same centered STFT; measured max ~2e-4 in log units.
LOG_MEL_TOLERANCE = 1e-3


def _signals(sample_rate=16000, seconds=1.0):
    t = np.arange(int(sample_rate * seconds)) / sample_rate
    rng = np.random.default_rng(0)
    return {
        "tone_plus_noise": 0.3 * np.sin(2 * np.pi * 440 * t) + 0.05 * rng.standard_normal(t.size),
        "chirp": 0.5 * np.sin(2 * np.pi * (100 + 3000 * t) * t),
        "white_noise": 0.2 * rng.standard_normal(t.size),
        "clicks": (np.arange(t.size) % 800 == 0).astype(float),
    }


@pytest.mark.parametrize("features", [
    AudioConfig(),
    AudioConfig(sample_rate=22050, n_fft=1024, hop_length=256, n_mels=80, fmin=50.0, fmax=8000.0),
], ids=["default", "22k_80mels"])
def test_tf_log_mel_matches_librosa(features):
    for name, signal in _signals(features.sample_rate).items():
        signal = signal.astype(np.float32)
        ours = ops.log_mel(tf.constant(signal), features).numpy()
        reference = ops.log_mel_librosa(signal, features)
        assert ours.shape == reference.shape == (features.num_frames, features.n_mels), name
        np.testing.assert_allclose(ours, reference, atol=LOG_MEL_TOLERANCE, err_msg=name)


def test_mel_matrix_is_librosas_slaney_filterbank():
    import librosa

    f = AudioConfig(n_mels=40, fmin=20.0)
    expected = librosa.filters.mel(sr=16000, n_fft=512, n_mels=40, fmin=20.0, htk=False, norm="slaney")
    np.testing.assert_allclose(ops.mel_matrix(f), expected.T, rtol=1e-6)


def test_ops_agree_eagerly_batched_and_inside_dataset_map():
    f = AudioConfig(clip_seconds=0.5)
    batch = np.stack([s[:f.num_samples] for s in _signals().values()]).astype(np.float32)
    eager = ops.log_mel(tf.constant(batch), f).numpy()
    per_example = np.stack([ops.log_mel(tf.constant(x), f).numpy() for x in batch])
    mapped = np.stack(list(tf.data.Dataset.from_tensor_slices(batch)
                           .map(lambda w: ops.log_mel(w, f)).as_numpy_iterator()))
    np.testing.assert_allclose(eager, per_example, atol=1e-5)
    np.testing.assert_allclose(mapped, per_example, atol=1e-5)
    lib = ops.compute_features(tf.constant(batch), AudioConfig(clip_seconds=0.5, backend="librosa"))
    assert lib.shape == (4,) + f.feature_shape
    np.testing.assert_allclose(lib.numpy(), eager, atol=LOG_MEL_TOLERANCE)


def test_fix_length_crops_and_zero_pads_the_last_axis():
    np.testing.assert_array_equal(ops.fix_length(tf.range(1.0, 6.0), 3).numpy(), [1, 2, 3])
    np.testing.assert_array_equal(ops.fix_length(tf.range(1.0, 3.0), 4).numpy(), [1, 2, 0, 0])
    assert ops.fix_length(tf.ones([2, 7]), 5).shape == (2, 5)
    inside = tf.data.Dataset.from_tensors(tf.ones([3])).map(lambda w: ops.fix_length(w, 5))
    assert inside.element_spec.shape == (5,)


@pytest.mark.filterwarnings("ignore:.*clips are longer than clip_seconds")  # 0.7 s: cropped on purpose
@pytest.mark.parametrize("seconds", [0.2, 0.5, 0.7])
def test_decode_pcm16_equals_soundfile_with_crop_and_pad(tmp_path, seconds):
    from tests.support import write_tone

    path = write_tone(str(tmp_path / "a" / "x.wav"), 300, seconds=seconds)
    f = AudioConfig(clip_seconds=0.5)
    layout = scan.scan_wavs([path], f)
    contents = tf.io.read_file(path)
    decoded = ops.decode_pcm16(contents, layout.offsets[0], layout.sizes[0], f.num_samples).numpy()
    expected, _ = sf.read(path, dtype="float32")
    expected = np.pad(expected[:f.num_samples], (0, max(0, f.num_samples - expected.size)))
    np.testing.assert_array_equal(decoded, expected)
    batched = ops.decode_pcm16(tf.stack([contents, contents]), list(layout.offsets) * 2,
                                 list(layout.sizes) * 2, f.num_samples).numpy()
    np.testing.assert_array_equal(batched, [expected, expected])
