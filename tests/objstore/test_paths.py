"""Path strings with a scheme: os.path would turn 's3://b/x' into 's3:/b/x' or '/cwd/s3:/b/x'."""

import os

import pytest

from tfpipe.core import paths


@pytest.mark.parametrize("given, wanted", [("s3://b/x/../y//z", "s3://b/y/z"), ("gs://b/", "gs://b/"),
                                           ("ram://x/./y/", "ram://x/y"), ("rel/dir", os.path.abspath("rel/dir")),
                                           ("file:///tmp/x", "/tmp/x")])
def test_abspath_keeps_a_scheme_and_resolves_a_local_path(given, wanted):
    assert paths.abspath(given) == wanted


def test_folder_names_never_lose_the_scheme_or_bucket():
    assert paths.dirname("s3://b/x/y.wav") == "s3://b/x"
    assert paths.dirname("s3://b/x") == "s3://b/"  # tensorflow-io reads "s3://b" as a path without a bucket
    assert paths.join("gs://b/x", "y", "z.jpg") == "gs://b/x/y/z.jpg"
    assert paths.relpath("s3://b/x/y/z.wav", "s3://b/x") == "y/z.wav"
    assert paths.common_folder(["s3://b/d/a/1.wav", "s3://b/d/b/2.wav"]) == "s3://b/d"
    assert paths.abspath("s3://b") == "s3://b/" and paths.abspath("ram://b") == "ram://b"
    assert paths.bucket("s3://b/d/x") == "s3://b" and paths.bucket("ram://b/x") == "" and paths.bucket("/b/x") == ""


def test_a_csv_row_resolves_against_the_csvs_folder_unless_it_is_absolute_or_remote():
    assert paths.normjoin("s3://b/data", "wavs/../a/1.wav") == "s3://b/data/a/1.wav"
    assert paths.normjoin("s3://b/data", "gs://other/1.wav") == "gs://other/1.wav"
    assert paths.normjoin("/data", "a/1.wav") == "/data/a/1.wav"


def test_scheme_and_store_name():
    assert [paths.scheme(p) for p in ("s3://b", "GS://b", "/x", "x", "file:///x", "hdfs://n/x")] == \
        ["s3", "gs", "", "", "", "hdfs"]
    assert paths.store_name("s3://b/x") == "S3" and paths.store_name("ram://x") == "ram://"
