"""ram:// (TensorFlow's in-memory filesystem, no server): every kind of input read from it, shards written to it."""

import os

import pytest
import tensorflow as tf

import tfpipe
from tests.objstore.scenarios import AUDIO, EXPECTED, expected, make_data, read, sources
from tfpipe.errors import DataError
from tfpipe.storage.verify import verify_folder


def copy_tree(local, remote):
    """Copies a local folder's files to a gfile folder (as a user's upload would)."""
    for folder, _, names in os.walk(local):
        for name in names:
            target = remote + "/" + os.path.relpath(os.path.join(folder, name), local)
            tf.io.gfile.makedirs(os.path.dirname(target))
            tf.io.gfile.copy(os.path.join(folder, name), target, overwrite=True)


@pytest.fixture(scope="module")
def ram(tmp_path_factory):
    local = make_data(str(tmp_path_factory.mktemp("data")))
    root = f"ram://tfpipe-test-{os.getpid()}"
    copy_tree(local, root)
    return root


@pytest.fixture(autouse=True)
def _count_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TFPIPE_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.parametrize("case", list(EXPECTED))
def test_each_kind_of_input_is_read_from_ram_with_exact_counts_in_eval_and_train(ram, case):
    assert read(sources(ram)[case], case) == expected(case)


def test_shards_written_to_ram_are_whole_verified_and_read_back(ram):
    out = f"{ram}/shards"
    index = tfpipe.write_shards(f"{ram}/wavs", out, num_shards=3, num_workers=0, progress=False,
                                features=tfpipe.AudioConfig(**AUDIO))
    assert index["num_examples"] == 12
    assert sorted(tf.io.gfile.listdir(out)) == ["tfpipe.json"] + [f"train-0000{i}-of-00003.tfrecord" for i in range(3)]
    assert verify_folder(out).ok
    assert read(out, "wavs") == expected("wavs")
    again = tfpipe.write_shards(f"{ram}/wavs", out, num_shards=3, num_workers=0, progress=False,
                                features=tfpipe.AudioConfig(**AUDIO))
    assert again == index  # the same command on a complete folder: recognized, nothing rewritten


def test_a_remote_path_keeps_its_scheme_in_errors(ram):
    with pytest.raises(ValueError, match=r"^ram://nowhere/data: no such file or folder$"):
        tfpipe.build_dataset("ram://nowhere/data", "eval")
    with pytest.raises(DataError, match=rf"^{ram}/records/nothing-\*: no files match"):
        tfpipe.records(f"{ram}/records/nothing-*")


def test_a_remote_tfds_folder_leaves_no_copy_of_its_metadata_behind(ram, tmp_path, monkeypatch):
    # TFDS reads its metadata through a local copy (its path library knows no ram://): the copy is
    # removed once the decoder is built, so every build does not leave a folder in the temp dir.
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    source = tfpipe.records(f"{ram}/tfds", split="test")
    assert source.class_names == ("cat", "dog", "eel")  # read from the copy before it went
    assert [p for p in os.listdir(tmp_path) if p.startswith("tfpipe-tfds-")] == []
