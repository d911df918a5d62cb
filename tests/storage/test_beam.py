"""storage/beam.py: the same plan on Apache Beam (DirectRunner here) writes the local writer's shards."""

import os

import numpy as np
import pytest

import tfpipe

from tests.support import make_corpus

FEAT = tfpipe.AudioConfig(clip_seconds=0.25)


def test_beam_direct_runner_writes_the_local_writers_shards_byte_for_byte(tmp_path):
    corpus = make_corpus(tmp_path / "corpus")
    bad = tmp_path / "corpus" / "b" / "empty.wav"
    bad.write_bytes(b"")
    local = tfpipe.write_shards(corpus, tmp_path / "local", num_shards=3, num_workers=0, features=FEAT,
                                on_error="skip", seed=3, progress=False)
    beam = tfpipe.write_shards(corpus, tmp_path / "beam", num_shards=3, features=FEAT, on_error="skip", seed=3,
                               runner="beam", progress=False)  # DirectRunner, 2 worker processes
    assert beam == local and beam["rejected"] == [{"path": "b/empty.wav", "reason": "empty file (0 bytes); "
                                                                                      "remove it or copy it again"}]
    for shard in local["shards"]:
        assert (tmp_path / "beam" / shard["file"]).read_bytes() == (tmp_path / "local" / shard["file"]).read_bytes()
    assert sorted(os.listdir(tmp_path / "beam")) == sorted(os.listdir(tmp_path / "local"))
    with pytest.raises(tfpipe.DataError, match=r"empty.wav: empty file"):  # the same up-front check
        tfpipe.write_shards(corpus, tmp_path / "beam2", num_shards=3, features=FEAT, runner="beam",
                            progress=False)


def test_beam_user_examples_in_memory_and_bad_options(tmp_path):
    examples = [{"x": np.arange(i % 3 + 1, dtype=np.int32), "label": i % 2} for i in range(6)]  # variable length
    local = tfpipe.write_shards(examples, tmp_path / "local", num_shards=2, progress=False)
    beam = tfpipe.write_shards(examples, tmp_path / "beam", num_shards=2, runner="beam",
                               beam_options="--runner=DirectRunner --direct_running_mode=in_memory", progress=False)
    assert beam == local and beam["features"] == {"x": {"dtype": "int32", "shape": [None]}}
    with pytest.raises(ValueError, match=r"beam_options=.*not valid Beam pipeline options"):
        tfpipe.write_shards(examples, tmp_path / "x", num_shards=2, runner="beam", beam_options="--runner",
                            progress=False)
