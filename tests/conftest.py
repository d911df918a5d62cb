"""Shared fixtures: tiny generated wav corpora in temp dirs."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import pytest  # noqa: E402

from tests.support import make_corpus  # noqa: E402


@pytest.fixture
def corpus(tmp_path):
    """3 classes x 4 clips of 0.25 s at 16 kHz."""
    return make_corpus(tmp_path / "corpus")
