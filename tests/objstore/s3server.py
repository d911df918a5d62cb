"""A real S3-compatible server for tests: moto's, on 127.0.0.1 at a free port, in a process of its own."""

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time

READY_SECONDS = 60


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def moto_server():
    """Yields the endpoint ("http://127.0.0.1:PORT") once the server answers; stops it afterwards."""
    port = free_port()
    # The server logs every request to stderr: a file, never a pipe nobody reads (a full pipe stops
    # the server after ~700 requests, and every client with it).
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=log)
    deadline = time.monotonic() + READY_SECONDS
    try:
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise RuntimeError(f"the moto server did not start: {log.read().decode()[-2000:]}")
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.kill()  # werkzeug's server may take its time over SIGTERM; it holds nothing worth keeping
        proc.wait()
        log.close()


def client_env(endpoint, **extra):
    """The environment of a process that reads and writes s3:// at `endpoint` (tensorflow-io's variables)."""
    env = {**os.environ, "S3_ENDPOINT": endpoint, "S3_USE_HTTPS": "0", "S3_VERIFY_SSL": "0",
           "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
           "AWS_EC2_METADATA_DISABLED": "true", "TF_CPP_MIN_LOG_LEVEL": "3"}
    env.update(extra)
    return env


def client(endpoint):
    import boto3

    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
                        aws_secret_access_key="testing")


def upload(endpoint, local, bucket, prefix):
    """Copies a local folder's files to s3://bucket/prefix/ with boto3 (as a user's upload would)."""
    s3 = client(endpoint)
    for folder, _, names in os.walk(local):
        for name in names:
            path = os.path.join(folder, name)
            s3.upload_file(path, bucket, f"{prefix}/{os.path.relpath(path, local)}")


def keys(endpoint, bucket, prefix):
    """The object names under s3://bucket/prefix/, relative to it."""
    found = client(endpoint).list_objects_v2(Bucket=bucket, Prefix=prefix + "/").get("Contents", [])
    return sorted(o["Key"][len(prefix) + 1:] for o in found)
