"""storage/prepare.py: what write_shards writes, found and checked up front; every bad input named at once."""

import os
import re

import numpy as np
import pytest
import soundfile as sf

import tfpipe
from tfpipe.storage.prepare import prepare_examples, user_examples

from tests.storage.test_writer import stored_paths
from tests.support import make_corpus

FEAT = tfpipe.AudioConfig(clip_seconds=0.25)


def _write(data, out, **kwargs):
    kwargs = {"num_shards": 3, "num_workers": 0, "features": FEAT, "progress": False, **kwargs}
    return tfpipe.write_shards(data, out, **kwargs)


def test_user_examples_are_told_from_a_domains_files():
    assert user_examples(iter([{"x": 1}])) == [{"x": 1}]
    for files in ("data/", (["a.wav"], [0]), ["a.wav", "b.wav"]):
        assert user_examples(files) is None
    with pytest.raises(ValueError, match=r"write_shards got no examples"):
        user_examples([])


def test_prepared_examples_are_typed_and_labelled():
    prepared = prepare_examples([{"x": np.float32(i), "label": ["dog", "cat"][i % 2]} for i in range(3)],
                                "label", None, "float16")
    assert prepared.class_names == ("cat", "dog") and prepared.labels == (1, 0, 1) and prepared.found == 3
    assert prepared.codec.to_json() == {"x": {"dtype": "float16", "shape": []}} and prepared.files is None
    assert prepared.checked() is prepared and prepared.rejected == []
    whole = prepare_examples([{"x": 1, "label": 7}], "label", None, None)
    assert whole.class_names == tuple(str(i) for i in range(8))  # whole numbers are their own ids


def _sine(path, seconds=0.3):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    t = np.arange(int(seconds * 16000)) / 16000
    sf.write(path, (0.4 * np.sin(2 * np.pi * 440 * t)).astype(np.float32), 16000, subtype="PCM_16")
    return path


def _bad_file(path, kind):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if kind == "truncated":
        data = open(_sine(path), "rb").read()
        open(path, "wb").write(data[:len(data) // 2])
    elif kind == "header_only":
        data = open(_sine(path), "rb").read()
        open(path, "wb").write(data[:30])
    elif kind == "empty":
        open(path, "wb").close()
    elif kind == "no_samples":
        sf.write(path, np.zeros(0, np.float32), 16000, subtype="PCM_16")
    elif kind == "not_audio":
        open(path, "w").write("this is a text file, not audio\n" * 20)
    return path


_REJECTED = {"truncated": "truncated", "header_only": "not readable audio", "empty": "empty file",
             "no_samples": "empty: no samples", "not_audio": "not readable audio"}


@pytest.mark.parametrize("kind", sorted(_REJECTED))
def test_bad_file_fails_naming_it_by_default(tmp_path, kind):
    root = tmp_path / "data"
    _sine(str(root / "a" / "good.wav"))
    bad = _bad_file(str(root / "b" / f"{kind}.wav"), kind)
    with pytest.raises(tfpipe.DataError,
                       match=rf"(?s)nothing was written.*{re.escape(bad)}: {_REJECTED[kind]}.*--on_error=skip"):
        _write(root, tmp_path / "shards", num_shards=1)
    assert not os.path.exists(tmp_path / "shards")  # nothing is left, not even the folder


def test_every_bad_file_is_listed_with_its_reason_before_anything_is_written(tmp_path):
    root = tmp_path / "data"
    for i in range(4):
        _sine(str(root / "a" / f"good{i}.wav"))
    bad = {kind: _bad_file(str(root / "b" / f"{kind}.wav"), kind) for kind in _REJECTED}
    os.symlink(str(root / "nowhere.wav"), str(root / "b" / "broken_link.wav"))
    os.symlink("loop.wav", str(root / "b" / "loop.wav"))
    with pytest.raises(tfpipe.DataError) as raised:
        _write(root, tmp_path / "shards", num_shards=2, num_workers=2)
    message = str(raised.value)
    assert message.startswith("7 of 11 input files cannot be used; nothing was written")
    for kind, path in bad.items():
        assert f"{path}: {_REJECTED[kind]}" in message
    assert "broken_link.wav: " in message and "loop.wav: " in message
    assert not os.path.exists(tmp_path / "shards")
    # --on_error=skip: the same files are listed in the index with the same reasons; links included.
    index = _write(root, tmp_path / "shards", num_shards=2, on_error="skip")
    assert index["num_examples"] == 4 and len(index["rejected"]) == 7
    found = len(os.listdir(root / "a")) + len(os.listdir(root / "b"))
    assert found == index["num_examples"] + len(index["rejected"])  # found = written + rejected
    reasons = {r["path"]: r["reason"] for r in index["rejected"]}
    for kind, why in _REJECTED.items():
        assert reasons[f"b/{kind}.wav"].startswith(why.split(": ")[0])


def test_an_input_listed_twice_is_rejected_by_name(tmp_path):
    make_corpus(tmp_path / "corpus", per_class=2)
    rows = ["path,label", "a/a000.wav,a", "a/a001.wav,a", "b/b000.wav,b", "b/b001.wav,b", "a/a000.wav,a"]
    (tmp_path / "corpus" / "list.csv").write_text("\n".join(rows) + "\n")
    with pytest.raises(tfpipe.DataError, match=r"a000.wav: listed twice"):
        _write(str(tmp_path / "corpus" / "list.csv"), tmp_path / "s", num_shards=1)
    index = _write(str(tmp_path / "corpus" / "list.csv"), tmp_path / "s", num_shards=2, on_error="skip")
    assert index["num_examples"] == 4 and [r["reason"][:12] for r in index["rejected"]] == ["listed twice"]


def test_a_file_name_that_is_not_utf8_is_written_and_stored_exactly(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", per_class=2)
    odd = os.path.join(os.fsencode(corpus), b"a", b"caf\xe9.wav")  # latin-1: not UTF-8
    os.rename(os.path.join(os.fsencode(corpus), b"a", b"a000.wav"), odd)
    (tmp_path / "corpus" / "b" / "b001.wav").write_bytes(b"")  # and a bad one, to be listed beside it
    index = _write(corpus, tmp_path / "s", num_shards=2, on_error="skip")
    assert index["num_examples"] == 5 and index["rejected"][0]["path"] == "b/b001.wav"
    assert b"a/caf\xe9.wav" in stored_paths(tmp_path / "s")  # the OS's bytes, exactly
    os.remove(os.path.join(corpus, "b", "b001.wav"))
    os.rename(odd, os.path.join(os.fsencode(corpus), b"a", b"\xff.wav"))
    _sine(os.path.join(corpus, "a", "x.wav"))
    open(os.path.join(os.fsencode(corpus), b"b", b"\xfe.wav"), "wb").close()  # a bad file with an odd name
    with pytest.raises(tfpipe.DataError, match=r"b/\\xfe.wav: empty file"):
        _write(corpus, tmp_path / "t", num_shards=2)
    index = _write(corpus, tmp_path / "t", num_shards=2, on_error="skip")
    assert index["rejected"] == [{"path": "b/\\xfe.wav", "reason": "empty file (0 bytes); remove it or copy it again"}]
