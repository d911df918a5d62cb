"""s3:// against a real S3-compatible server (moto on 127.0.0.1): every kind of input, prepare and verify
there, an interrupted prepare, and the errors of a bad setup.

TensorFlow's S3 filesystem (tensorflow-io) reads S3_ENDPOINT once per process, so each step runs
in a subprocess of its own, with the environment of this module's server, and is judged by what
it prints. One server and one small data set for the module.
"""

import json
import os
import subprocess
import sys
import time

import pytest

from tests.objstore.scenarios import EXPECTED, expected, make_data
from tests.support import ROOT

pytest.importorskip("tensorflow_io", reason="s3:// needs tensorflow-io (pip install tfpipe[s3])")
pytest.importorskip("moto", reason="the S3 tests need moto[server] (pip install tfpipe[test])")

from tests.objstore.s3server import client, client_env, keys, moto_server, upload  # noqa: E402

PREPARE = ["prepare", "--input", "s3://data/in/wavs", "--output", "s3://data/shards", "--num_shards", "3",
           "--workers", "0", "--clip_seconds", "0.25"]

# `tfpipe prepare` that stops for good when it reaches shard 2 (shards 0 and 1 are uploaded), having
# created the local file argv[1] to say so: the test then kills it, as a crash or a lost machine would.
PAUSED_PREPARE = """
import sys, time
from tfpipe.storage import shard_job
marker, chunk = sys.argv[1], shard_job._chunk_examples
def paused(job, inputs, *rest):
    if job.spec.index == 2:
        open(marker, "w").close()
        while True:
            time.sleep(60)
    return chunk(job, inputs, *rest)
shard_job._chunk_examples = paused
from tfpipe.cli import main
main(["tfpipe"] + sys.argv[2:])
"""

# Errors of a bad setup first (they must come before this process's first good S3 request), then
# an unfinished shard folder, a missing bucket, and every kind of input read in eval and train.
READER = """
import json, os, sys, time
import tfpipe
from tests.objstore.scenarios import EXPECTED, read, sources
out = {}
def error(name, fn):
    start = time.monotonic()
    try:
        fn()
        out[name] = ["no error", 0]
    except Exception as e:
        out[name] = [f"{type(e).__name__}: {e}", time.monotonic() - start]
endpoint = os.environ["S3_ENDPOINT"]
os.environ["S3_ENDPOINT"] = sys.argv[1]
error("endpoint_down", lambda: tfpipe.build_dataset("s3://data/in/wavs", "eval"))
os.environ["S3_ENDPOINT"] = endpoint
keys = {k: os.environ.pop(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
error("no_credentials", lambda: tfpipe.build_dataset("s3://data/in/wavs", "eval"))
os.environ.update(keys)
error("unfinished", lambda: tfpipe.build_dataset("s3://data/shards", "eval"))
error("missing_bucket", lambda: tfpipe.build_dataset("s3://no-such-bucket/wavs", "eval"))
error("missing_bucket_records", lambda: tfpipe.records("s3://no-such-bucket/recs/train-*"))
error("missing_bucket_output", lambda: tfpipe.write_shards("s3://data/in/wavs", "s3://no-such-bucket/shards"))
for case, data in sources("s3://data/in").items():
    out[case] = read(data, case)
print("RESULT " + json.dumps(out))
"""

VERIFY_AND_READ = """
import contextlib, io, json
from tests.objstore.scenarios import read
from tfpipe.cli import main
text = io.StringIO()
with contextlib.redirect_stdout(text):
    try:
        main(["tfpipe", "inspect", "--verify", "s3://data/shards"])
        status = 0
    except SystemExit as e:
        status = e.code
print("RESULT " + json.dumps({"inspect": [status, text.getvalue()], "read": read("s3://data/shards", "wavs")}))
"""


def _run(endpoint, tmp, code, *args, timeout=300):
    env = client_env(endpoint, TFPIPE_CACHE_DIR=str(tmp / "cache"),
                     PYTHONPATH=os.pathsep.join([ROOT] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _result(proc):
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, f"status {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return json.loads(lines[-1][len("RESULT "):])


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """(endpoint, a temp folder): the server, with make_data's files under s3://data/in/."""
    tmp = tmp_path_factory.mktemp("s3")
    with moto_server() as endpoint:
        client(endpoint).create_bucket(Bucket="data")
        upload(endpoint, make_data(str(tmp / "local")), "data", "in")
        yield endpoint, tmp


@pytest.fixture(scope="module")
def interrupted(s3):
    """The object names a `tfpipe prepare` to s3:// left when it was killed inside its last shard."""
    endpoint, tmp = s3
    marker = tmp / "paused"
    env = client_env(endpoint, TFPIPE_CACHE_DIR=str(tmp / "cache"))
    proc = subprocess.Popen([sys.executable, "-c", PAUSED_PREPARE, str(marker), *PREPARE], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 240
    while not marker.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read().decode()[-3000:]
        time.sleep(0.1)
    proc.kill()
    proc.wait()
    return keys(endpoint, "data", "shards")


@pytest.fixture(scope="module")
def reader(s3, interrupted):
    endpoint, tmp = s3
    from tests.objstore.s3server import free_port

    return _result(_run(endpoint, tmp, READER, f"http://127.0.0.1:{free_port()}"))


def test_an_interrupted_prepare_left_whole_shards_and_no_index(interrupted):
    assert "tfpipe.json" not in interrupted
    assert [k for k in interrupted if k.startswith("train-")] == ["train-00000-of-00003.tfrecord",
                                                                   "train-00001-of-00003.tfrecord"]
    assert ".tfpipe-work/lock" in interrupted  # names the writer; readers take it as "under way"


def test_an_interrupted_prepare_never_reads_as_complete(reader):
    message, _ = reader["unfinished"]
    assert message.startswith("DataError: s3://data/shards: an unfinished tfpipe prepare"), message


@pytest.mark.parametrize("case", list(EXPECTED))
def test_each_kind_of_input_is_read_from_s3_with_exact_counts_in_eval_and_train(reader, case):
    assert reader[case] == expected(case)


@pytest.mark.parametrize("case, says", [
    ("endpoint_down", r"s3://data/in/wavs: the S3 endpoint http://127.0.0.1:\d+ \(S3_ENDPOINT\) does not answer"),
    ("no_credentials", r"s3://data/in/wavs: no AWS credentials found for S3: set AWS_ACCESS_KEY_ID"),
    ("missing_bucket", r"s3://no-such-bucket/wavs: the S3 bucket s3://no-such-bucket does not exist"),
    ("missing_bucket_records", r"s3://no-such-bucket/recs/train-\*: the S3 bucket s3://no-such-bucket does not"),
    ("missing_bucket_output", r"s3://no-such-bucket/shards: the S3 bucket s3://no-such-bucket does not exist")])
def test_a_bad_setup_fails_at_once_in_one_line_naming_the_path(reader, case, says):
    import re

    message, seconds = reader[case]
    assert re.match(r"(DataError|ValueError): " + says, message), message
    assert "\n" not in message and seconds < 10  # no retry loop: the AWS SDK's own retries take ~25 s a request


def test_prepare_to_s3_resumes_then_verifies_and_reads_back(s3, reader):
    endpoint, tmp = s3
    finish = _run(endpoint, tmp, "from tfpipe.cli import main; main()", *PREPARE)
    assert finish.returncode == 0, finish.stderr[-3000:]  # the AWS SDK's abort at exit does not change it
    assert "2 of 3 shards were already complete" in finish.stdout, finish.stdout
    assert sorted(keys(endpoint, "data", "shards")) == ["tfpipe.json"] + [
        f"train-0000{i}-of-00003.tfrecord" for i in range(3)]  # no temp names, no work folder
    checked = _result(_run(endpoint, tmp, VERIFY_AND_READ))
    status, text = checked["inspect"]
    assert status in (0, None) and "verified 3 shards" in text, text
    assert checked["read"] == expected("wavs")
