"""The cache step (core/cache.py): a snapshot outlives the process but never serves stale, partial or
other data; images are fingerprinted the same way every build, so their snapshot is reused."""

import os

import numpy as np

import tfpipe
from tests.support import make_corpus, write_tone


_SNAPSHOT_SCRIPT = """
import os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tfpipe
data, snap, n_mels, stop_after = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
pipe = tfpipe.PipelineConfig.optimized(batch_size=2, cache="snapshot:" + snap, vectorize=False)
ds = tfpipe.build_dataset(data, "eval", pipe, tfpipe.AudioConfig(clip_seconds=0.25, n_mels=n_mels))
for i, (features, labels) in enumerate(ds):
    log_mel = features["log_mel"].numpy()
    print(log_mel.shape[-1], round(float(log_mel.mean()), 1), *labels.numpy().tolist(), flush=True)
    if i + 1 == stop_after:
        os._exit(0)  # killed mid-pass: no chance to finish the snapshot
"""


def _snapshot_run(tmp_path, data, snap, n_mels=64, stop_after=0):
    """(mel bands seen, mean log-mel of the pass, sorted labels) from a fresh process."""
    import subprocess
    import sys

    script = tmp_path / "snap.py"
    script.write_text(_SNAPSHOT_SCRIPT)
    out = subprocess.run([sys.executable, str(script), data, snap, str(n_mels), str(stop_after)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [line.split() for line in out.stdout.splitlines()]
    return ({int(r[0]) for r in rows}, round(float(np.mean([float(r[1]) for r in rows])), 1),
            sorted(int(x) for r in rows for x in r[2:]))


def _tree(folder):
    """{path: (size, mtime)} of every file under folder."""
    return {os.path.join(d, f): (os.stat(os.path.join(d, f)).st_size, os.stat(os.path.join(d, f)).st_mtime_ns)
            for d, _, fs in os.walk(folder) for f in fs}


def test_snapshot_cache_survives_a_restart_never_serves_a_partial_pass_and_serves_other_features(tmp_path):
    data = make_corpus(tmp_path / "corpus", per_class=2)  # 6 clips, labels 0,0,1,1,2,2
    snap = str(tmp_path / "snap")
    assert _snapshot_run(tmp_path, data, snap, stop_after=1)[2] == [0, 0]  # killed after one batch
    bands, _, labels = _snapshot_run(tmp_path, data, snap)
    assert bands == {64} and labels == [0, 0, 1, 1, 2, 2]  # the partial pass was not used: a whole epoch
    written = _tree(snap)
    # The snapshot keeps what read returns (the files' bytes): a restart asking for 40 bands reads it
    # back (nothing new written: one key of the files' contents, one of the graph above the cache)
    # and computes its own features after it.
    bands, _, labels_back = _snapshot_run(tmp_path, data, snap, n_mels=40)
    assert bands == {40} and labels_back == labels
    assert _tree(snap) == written
    (files_key,) = os.listdir(snap)
    assert len(os.listdir(os.path.join(snap, files_key))) == 1


def _one_pass(data, snap):
    """(mean log-mel, sorted labels) of one eval pass through a snapshot cache, in this process."""
    pipe = tfpipe.PipelineConfig.optimized(batch_size=2, cache="snapshot:" + snap, vectorize=False)
    batches = list(tfpipe.build_dataset(data, "eval", pipe, tfpipe.AudioConfig(clip_seconds=0.25)).as_numpy_iterator())
    return (round(float(np.mean([f["log_mel"].mean() for f, _ in batches])), 1),
            sorted(int(x) for _, labels in batches for x in labels))


def test_snapshot_is_not_served_after_a_file_changes_in_place(tmp_path):
    data = make_corpus(tmp_path / "corpus", per_class=2)
    snap = str(tmp_path / "snap")
    loud, labels = _one_pass(data, snap)
    path = tfpipe.find(data).paths[0]
    size = os.path.getsize(path)
    write_tone(path, 1, amplitude=0.0)  # same name, same header and size, now silent
    assert os.path.getsize(path) == size
    loud_after, labels_after = _one_pass(data, snap)
    assert labels_after == labels
    assert loud_after == _one_pass(data, str(tmp_path / "fresh"))[0] != loud  # the new samples


def test_the_snapshot_key_is_the_same_in_every_process_and_changes_with_the_graph():
    """tf.data's own fingerprint of one graph varies between processes (tensorflow#61317)."""
    import subprocess
    import sys

    script = ("import os, sys; os.environ['TF_CPP_MIN_LOG_LEVEL'] = '3'\n"
              "import tensorflow as tf\nfrom tfpipe.core.cache import graph_key\n"
              "files = tf.data.Dataset.from_tensor_slices(['a.wav', 'b.wav'])\n"
              "print(graph_key(files.map(tf.io.read_file).map(lambda b: tf.strings.length(b) * int(sys.argv[1]))))\n")
    fresh = subprocess.run([sys.executable, "-c", script, "2"], capture_output=True, text=True, check=True,
                           timeout=120).stdout.split()[-1]

    import tensorflow as tf

    from tfpipe.core.cache import graph_key

    def key(factor):  # here, after this test process traced many other functions: its counters moved
        files = tf.data.Dataset.from_tensor_slices(["a.wav", "b.wav"])
        return graph_key(files.map(tf.io.read_file).map(lambda b: tf.strings.length(b) * factor))

    tf.data.Dataset.range(3).map(lambda x: x + 7)
    assert str(key(2)) == fresh != str(key(3))  # same graph in another process: same key; another function: another


def test_two_maps_with_swapped_functions_get_different_snapshot_keys():
    import tensorflow as tf

    from tfpipe.core.cache import graph_key

    def pipeline(first, second):
        return tf.data.Dataset.range(4).map(first).map(second)

    double, add_one = (lambda x: x * 2), (lambda x: x + 1)  # both traced as "..._lambda_N"
    assert graph_key(pipeline(double, add_one)) == graph_key(pipeline(double, add_one))
    assert graph_key(pipeline(double, add_one)) != graph_key(pipeline(add_one, double))


def test_the_snapshot_key_is_found_inside_an_estimator_graph_too():
    import tensorflow as tf

    from tfpipe.core.cache import graph_key

    def key_in_a_graph():
        with tf.Graph().as_default():
            return graph_key(tf.data.Dataset.range(4).map(lambda x: x * 2))

    assert key_in_a_graph() == key_in_a_graph() is not None


# --- make_input_fn records where the stream stood: changed files and batch sizes -------------------


def test_an_image_snapshot_is_reused_by_the_next_build(tmp_path):
    from tfpipe.domains.image import synthetic

    data = str(tmp_path / "images")
    synthetic.write_corpus(data, per_class=2, seed=0, progress=False)
    snap = str(tmp_path / "snap")
    pipe = tfpipe.PipelineConfig.optimized(batch_size=4, cache=f"snapshot:{snap}")
    for _ in range(2):  # each input_fn call of an Estimator builds the dataset anew
        assert sum(len(l) for _, l in tfpipe.build_dataset(data, "eval", pipe, tfpipe.ImageConfig(32, 32))) > 0
    finished = [d for d, _, files in os.walk(snap) if "snapshot.metadata" in files]
    assert len(finished) == 1, finished  # one snapshot, written once and read back


def test_a_snapshot_on_a_disk_too_small_is_refused_naming_the_folder(tmp_path):
    import subprocess

    import pytest

    data = make_corpus(tmp_path / "corpus", per_class=4)  # 12 clips of 8 KB: more than the 64 KB disk
    small = tmp_path / "small"
    small.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(small)], capture_output=True).returncode:
        pytest.skip("mounting a small tmpfs needs root")
    try:
        pipe = tfpipe.PipelineConfig.optimized(batch_size=2, cache=f"snapshot:{small / 'snap'}")
        with pytest.raises(tfpipe.DataError, match=r"small/snap: not enough free space for the snapshot: [\d.]+ KiB "
                                                   r"free, one pass of the files needs about [\d.]+ KiB"):
            tfpipe.build_dataset(data, "eval", pipe)
    finally:
        subprocess.run(["umount", str(small)], check=True)


def test_an_estimator_input_fn_reads_its_snapshot_back_in_each_new_graph(tmp_path):
    import tensorflow as tf

    from tfpipe.train.estimator import make_input_fn

    data = make_corpus(tmp_path / "corpus", per_class=2)
    snap = str(tmp_path / "snap")
    pipe = tfpipe.PipelineConfig.optimized(batch_size=2, cache="snapshot:" + snap, vectorize=False)
    input_fn = make_input_fn(data, "eval", pipe, tfpipe.AudioConfig(clip_seconds=0.25))

    def labels_in_a_new_graph():  # as Estimator.evaluate calls input_fn, once per evaluation
        with tf.Graph().as_default():
            next_batch = tf.compat.v1.data.make_one_shot_iterator(input_fn()).get_next()
            seen = []
            with tf.compat.v1.Session() as session:
                try:
                    while True:
                        seen += session.run(next_batch)[1].tolist()
                except tf.errors.OutOfRangeError:
                    return sorted(seen)

    assert labels_in_a_new_graph() == labels_in_a_new_graph() == [0, 0, 1, 1, 2, 2]
    finished = [d for d, _, files in os.walk(snap) if "snapshot.metadata" in files]
    assert len(finished) == 1, finished  # the second graph read the first one's snapshot
