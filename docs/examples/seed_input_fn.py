"""The seed question's input_fn (shared/seeds/003) on tfpipe: the user's own _read_wav/_post_process,
with tfpipe's chain and toggles. `tfpipe bench --dataset_fn docs/examples/seed_input_fn.py:dataset_fn`
times it over the README tour's corpus, runs/data (run from the repository's root); SEED_DATA names
another wav folder (one subfolder per class).
"""

import glob
import os

import tensorflow as tf

import tfpipe

DATA = os.environ.get("SEED_DATA", "runs/data")  # the README tour's corpus
SAMPLES = 16000  # one second at 16 kHz
MEL = tf.signal.linear_to_mel_weight_matrix(64, 257, 16000, 20.0, 8000.0)


def _read_wav(filename, label):
    """Once per file: read and decode."""
    wav, _ = tf.audio.decode_wav(tf.io.read_file(filename), desired_channels=1)
    return tf.squeeze(wav, -1), label


def _post_process(wav, label):
    """Per example: crop/pad to one second."""
    wav = tf.pad(wav[:SAMPLES], [[0, tf.maximum(0, SAMPLES - tf.shape(wav)[0])]])
    return {"wav": tf.ensure_shape(wav, [SAMPLES])}, label


def _log_mel(features, labels):
    """On whole batches when vectorize is on: STFT + mel + log."""
    spec = tf.abs(tf.signal.stft(features["wav"], frame_length=400, frame_step=160, fft_length=512))
    return {"log_mel": tf.math.log(tf.tensordot(spec, MEL, 1) + 1e-6)}, labels


def files_and_labels(data=DATA):
    """The seed's (filenames, labels): class = parent folder."""
    files = sorted(glob.glob(os.path.join(data, "*", "*.wav")))
    if not files:
        raise ValueError(f"no wav files in {data}/<class>/: write the demo corpus first (tfpipe synth --output "
                         f"{data}) or set SEED_DATA to your folder")
    classes = sorted({os.path.basename(os.path.dirname(f)) for f in files})
    return files, [classes.index(os.path.basename(os.path.dirname(f))) for f in files]


def dataset_fn(pipeline, mode):
    """What `tfpipe bench --dataset_fn` calls: each variant's PipelineConfig applied to these functions."""
    return tfpipe.build_dataset(files_and_labels(), mode, pipeline, read=_read_wav, process=_post_process,
                                batch_process=_log_mel)


def input_fn_pair(pipeline=None):
    """The seed's train/eval input_fns for tf.estimator.train_and_evaluate."""
    pipeline = pipeline or tfpipe.PipelineConfig.optimized(batch_size=128)
    data = files_and_labels()
    kwargs = dict(read=_read_wav, process=_post_process, batch_process=_log_mel)
    return (tfpipe.make_input_fn(data, "train", pipeline, **kwargs),
            tfpipe.make_input_fn(data, "eval", pipeline, **kwargs))
