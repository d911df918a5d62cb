"""Finding examples (folder, CSV, shard folder) and the up-front wav header check."""

import json
import os

import pytest

from tests.support import make_corpus, write_tone
from tfpipe.core import files
from tfpipe.core import source as sources
from tfpipe.errors import DataError


def test_folder_classes_are_sorted_subfolders(tmp_path):
    root = make_corpus(tmp_path / "d", classes=("zebra", "ant", "mole"), per_class=2)
    os.makedirs(tmp_path / "d" / "empty")  # still a class: dropping it would shift zebra's id
    src = sources.find(root)
    assert src.kind == "wav" and src.class_names == ("ant", "empty", "mole", "zebra")
    assert len(src.paths) == 6 and src.num_examples == 6
    for path, label in zip(src.paths, src.labels):
        assert os.path.basename(os.path.dirname(path)) == src.class_names[label]


def test_csv_manifest_resolves_relative_paths_against_its_folder(tmp_path):
    make_corpus(tmp_path / "audio", classes=("a", "b"), per_class=2)
    manifest = tmp_path / "audio" / "list.csv"
    manifest.write_text("path,label\na/a000.wav,yes\nb/b001.wav,no\na/a001.wav,yes\n")
    src = sources.find(str(manifest))
    assert src.class_names == ("no", "yes")
    assert [os.path.relpath(p, tmp_path / "audio") for p in src.paths] == ["b/b001.wav", "a/a000.wav", "a/a001.wav"]
    assert src.labels == (0, 1, 1)


@pytest.mark.parametrize("text, error, message", [
    ("path,label,speaker\na/a000.wav,x,1\n", ValueError, r"unknown columns \['speaker'\]"),
    ("file,class\na/a000.wav,x\n", ValueError, r"exactly 'path,label'"),
    ("path,label\na/a000.wav,x\nmissing.wav,y\n", DataError, r"1 listed files do not exist, e\.g\. .*missing\.wav"),
    ("path,label\na/a000.wav,x\na/a001.wav,x\n", ValueError, r"only one class \('x'\)"),
])
def test_bad_csv_manifests_are_clear_errors(tmp_path, text, error, message):
    make_corpus(tmp_path, classes=("a",), per_class=2)
    manifest = tmp_path / "m.csv"
    manifest.write_text(text)
    with pytest.raises(error, match=message):
        sources.find(str(manifest))


def test_bad_folders_are_clear_errors(tmp_path):
    os.makedirs(tmp_path / "empty")
    with pytest.raises(ValueError, match=r"no [.a-z, ]*\.wav[.a-z, ]* files found"):  # order: plug-in import order
        sources.find(str(tmp_path / "empty"))
    one = make_corpus(tmp_path / "one", classes=("only",), per_class=2)
    with pytest.raises(ValueError, match=r"only one class \('only'\); a classifier needs at least two"):
        sources.find(one)
    stray = make_corpus(tmp_path / "stray", classes=("a", "b"), per_class=1)
    write_tone(os.path.join(stray, "loose.wav"), 100)
    with pytest.raises(ValueError, match=r"loose\.wav is not inside a class folder"):
        sources.find(stray)
    with pytest.raises(ValueError, match=r"no such file or folder"):
        sources.find(str(tmp_path / "nope"))


def test_shard_folder_is_recognized_by_its_index(tmp_path):
    (tmp_path / "train-00000-of-00001.tfrecord").write_bytes(b"")
    (tmp_path / "tfpipe.json").write_text(json.dumps({
        "format": "tfpipe-shards", "version": 1, "num_examples": 3, "class_names": ["a", "b"],
        "shards": [{"file": "train-00000-of-00001.tfrecord", "num_examples": 3}]}))
    src = sources.find(str(tmp_path))
    assert src.kind == "shards" and src.num_examples == 3 and src.class_names == ("a", "b")
    os.remove(tmp_path / "train-00000-of-00001.tfrecord")
    with pytest.raises(DataError, match=r"1 shard files .* missing.*rerun the same tfpipe prepare"):
        sources.find(str(tmp_path))


def test_holdout_split_is_stable_disjoint_and_complete(tmp_path):
    src = sources.find(make_corpus(tmp_path / "d", classes=("a", "b"), per_class=30))
    train, held = src.split(0.2)
    assert set(train.paths).isdisjoint(held.paths)
    assert sorted(train.paths + held.paths) == sorted(src.paths)
    assert 3 <= len(held.paths) <= 21 and train.class_names == src.class_names
    again_train, again_held = sources.find(str(tmp_path / "d")).split(0.2)
    assert again_held.paths == held.paths  # by path hash: never moves between runs
    for path, label in zip(held.paths, held.labels):
        assert src.labels[src.paths.index(path)] == label



def test_csv_with_bom_is_read_and_broken_csvs_name_the_problem(tmp_path):
    make_corpus(tmp_path, classes=("a", "b"), per_class=1)
    (tmp_path / "bom.csv").write_bytes(b"\xef\xbb\xbfpath,label\na/a000.wav,x\nb/b000.wav,y\n")
    assert sources.find(str(tmp_path / "bom.csv")).class_names == ("x", "y")
    (tmp_path / "latin.csv").write_bytes("path,label\na/a000.wav,caf\xe9\nb/b000.wav,y\n".encode("latin-1"))
    with pytest.raises(DataError, match=r"latin.csv: not UTF-8 text \(byte 0xe9 at offset \d+\); save the manifest as UTF-8"):
        sources.find(str(tmp_path / "latin.csv"))
    (tmp_path / "short.csv").write_text("path,label\na/a000.wav,x\nb/b000.wav\n")
    with pytest.raises(DataError, match=r"short.csv: 1 rows lack a path or a label \(lines 3\)"):
        sources.find(str(tmp_path / "short.csv"))


def test_an_empty_class_folder_keeps_its_label_id(tmp_path):
    make_corpus(tmp_path / "train", classes=("a", "b", "c"), per_class=1)
    make_corpus(tmp_path / "eval", classes=("a", "c"), per_class=1)
    os.makedirs(tmp_path / "eval" / "b")  # no eval files for b: c must still be label 2
    os.makedirs(tmp_path / "eval" / ".ipynb_checkpoints")  # hidden folders are not classes
    train, held = (sources.find(str(tmp_path / d)) for d in ("train", "eval"))
    assert train.class_names == held.class_names == ("a", "b", "c")
    assert held.labels == (0, 2)


# --- labels and folders that used to give silently wrong data ---------------------------------

def test_numeric_csv_labels_are_their_own_ids_in_train_and_eval(tmp_path):
    for i in range(12):
        write_tone(str(tmp_path / "clips" / f"c{i}.wav"), 200 + 40 * i)
    rows = [f"clips/c{i}.wav,{i}" for i in range(12)]
    (tmp_path / "train.csv").write_text("path,label\n" + "\n".join(rows) + "\n")
    (tmp_path / "eval.csv").write_text("path,label\n" + "\n".join(r for i, r in enumerate(rows) if i != 7) + "\n")
    train, held = sources.find(str(tmp_path / "train.csv")), sources.find(str(tmp_path / "eval.csv"))
    assert list(train.labels) == list(range(12))  # "10" is 10, not 2 (text order)
    assert dict(zip(held.paths, held.labels)) == {p: l for p, l in zip(train.paths, train.labels) if l != 7}
    assert train.class_names == held.class_names == tuple(str(i) for i in range(12))
    assert files.from_lists(["a.wav", "b.wav", "c.wav"], ["2", "10", "1"]).labels == (2, 10, 1)
    assert files.from_lists(["a.wav", "b.wav"], ["dog", "cat"]).labels == (1, 0)


def test_a_file_listed_with_two_labels_and_a_missing_label_are_refused(tmp_path):
    write_tone(str(tmp_path / "x.wav"), 300)
    (tmp_path / "m.csv").write_text("path,label\nx.wav,1\nx.wav,2\n")
    with pytest.raises(DataError, match=r"1 files are listed with different labels:\n  .*x.wav: 1, 2"):
        sources.find(str(tmp_path / "m.csv"))
    with pytest.raises(ValueError, match=r"label 0 is None: every example needs a label"):
        files.from_lists(["a.wav", "b.wav"], [None, 1])


def _deep_folder(parent, min_length=4200):
    """A folder whose path is longer than PATH_MAX, made step by step (relative to an open folder),
    holding one wav: os.walk cannot list it, whoever runs the test (root too)."""
    import os

    fd = os.open(parent, os.O_RDONLY)
    length = len(str(parent))
    try:
        while length < min_length:
            os.mkdir("d" * 200, dir_fd=fd)
            next_fd = os.open("d" * 200, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd, length = next_fd, length + 201
        wav = write_tone(str(parent / "tmp.wav"), 500)
        with open(wav, "rb") as f:
            data = f.read()
        os.remove(wav)
        out = os.open("hidden.wav", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(out, data)
        os.close(out)
    finally:
        os.close(fd)


def test_a_class_subfolder_that_cannot_be_listed_is_an_error_not_missing_data(tmp_path):
    data = make_corpus(tmp_path / "data", classes=("a", "b", "c"), per_class=2)
    _deep_folder(tmp_path / "data" / "c")
    with pytest.raises(DataError, match=r"1 folders cannot be listed, so their files would be left out:\n  .*"
                                        r"File name too long"):
        sources.find(data)


# --- class_names: one class name, one id, in train and eval (issues 32, 33 #6) ----------------------

def test_class_names_number_an_eval_folder_lacking_a_class_as_train_does(tmp_path):
    make_corpus(tmp_path / "train", classes=("ant", "bee", "cat"), per_class=1)
    make_corpus(tmp_path / "eval", classes=("ant", "cat"), per_class=1)
    train = sources.find(str(tmp_path / "train"))
    assert sources.find(str(tmp_path / "eval")).labels == (0, 1)  # cat is 1 here, 2 in train: the finding
    held = sources.find(str(tmp_path / "eval"), class_names=train.class_names)
    assert held.class_names == train.class_names and held.labels == (0, 2)
    make_corpus(tmp_path / "other", classes=("ant", "dog"), per_class=1)
    with pytest.raises(ValueError, match=r"other: classes 'dog' are not in class_names \('ant', 'bee', 'cat'\)"):
        sources.find(str(tmp_path / "other"), class_names=train.class_names)


def test_csv_named_labels_lacking_a_train_class_take_the_train_class_names(tmp_path):
    make_corpus(tmp_path, classes=("a",), per_class=4)
    clips = [f"a/a{i:03d}.wav" for i in range(4)]
    (tmp_path / "train.csv").write_text("path,label\n" + "".join(f"{c},{n}\n" for c, n in
                                                                  zip(clips, ("cat", "dog", "eel", "fox"))))
    (tmp_path / "eval.csv").write_text(f"path,label\n{clips[0]},cat\n{clips[2]},eel\n{clips[3]},fox\n")
    train = sources.find(str(tmp_path / "train.csv"))
    held = sources.find(str(tmp_path / "eval.csv"), class_names=train.class_names)
    assert [held.class_names[l] for l in held.labels] == ["cat", "eel", "fox"] and held.labels == (0, 2, 3)


def test_csv_float_labels_read_as_ints_and_numbers_mixed_with_names_are_refused(tmp_path):
    make_corpus(tmp_path, classes=("a",), per_class=3)
    (tmp_path / "floats.csv").write_text("path,label\na/a000.wav,1.0\na/a001.wav,2.0\na/a002.wav,10.0\n")
    assert sources.find(str(tmp_path / "floats.csv")).labels == (1, 2, 10)
    (tmp_path / "mixed.csv").write_text("path,label\na/a000.wav,1\na/a001.wav,10\na/a002.wav,x\n")
    with pytest.raises(DataError, match=r"mixed\.csv: labels mix numbers and names: line 2 \('1'\), line 3 "
                                        r"\('10'\) are numbers but line 4 \('x'\) are not"):
        sources.find(str(tmp_path / "mixed.csv"))


def test_split_holds_out_a_stable_share_as_sources_with_every_class(tmp_path):
    import tfpipe

    make_corpus(tmp_path / "d", classes=("a", "b", "c"), per_class=10)
    train, held = tfpipe.split(str(tmp_path / "d"), eval_fraction=0.3)
    assert (train, held) == tfpipe.split(str(tmp_path / "d"), eval_fraction=0.3)  # the same every run
    assert sorted(train.paths + held.paths) == sorted(sources.find(str(tmp_path / "d")).paths)
    assert train.class_names == held.class_names == ("a", "b", "c") and 0 < len(held.paths) < 30
    other, _ = tfpipe.split(str(tmp_path / "d"), eval_fraction=0.3, seed=1)
    assert set(other.paths) != set(train.paths)  # another seed, another split
    assert tfpipe.make_input_fn(held, "eval", tfpipe.PipelineConfig.naive(batch_size=64))() is not None
    with pytest.raises(ValueError, match=r"eval_fraction=1.5: must be between 0 and 1"):
        tfpipe.split(str(tmp_path / "d"), eval_fraction=1.5)


def test_a_glob_or_folder_of_tfrecord_files_is_read_as_records(tmp_path, monkeypatch):
    # What a user tries first: build_dataset("records/train-*", process=parse); parse used to get (path, label).
    import tensorflow as tf

    import tfpipe

    monkeypatch.setenv("TFPIPE_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "records"
    folder.mkdir()
    for s in range(2):  # named as tensorflow/models names ImageNet's: no suffix, found by their header
        with tf.io.TFRecordWriter(str(folder / f"train-{s:05d}-of-00002"), "GZIP" if s else "") as w:
            for i in range(3):
                w.write(tf.train.Example(features=tf.train.Features(feature={"id": tf.train.Feature(
                    int64_list=tf.train.Int64List(value=[3 * s + i]))})).SerializeToString())

    def parse(record):
        return {"id": tf.io.parse_single_example(record, {"id": tf.io.FixedLenFeature([], tf.int64)})["id"]}, 0

    for data in (str(folder / "train-*"), str(folder), str(folder / "train-00000-of-00002")):
        assert sources.find(data).kind == "records"
        ds = tfpipe.build_dataset(data, "eval", tfpipe.PipelineConfig.naive(batch_size=8), process=parse)
        assert sorted(int(i) for f, _ in ds.as_numpy_iterator() for i in f["id"]) == (
            [0, 1, 2] if data.endswith("00002") else list(range(6)))
    (tmp_path / "texts").mkdir()
    (tmp_path / "texts" / "a.txt").write_text("not records")
    assert sources.find(str(tmp_path / "texts" / "*.txt")).kind == "files"  # your own files stay files
