"""Reading from an object store at local speed? v2 shards and user TFRecords, local vs S3 behind added latency.

    pip install -e '.[s3,test]'      # tensorflow-io (s3://), moto[server] (a local S3 server), boto3
    python docs/examples/objstore_bench.py /tmp/objbench [ROUNDS] [DELAY_MS] [ARMS]

Writes a v2 shard folder (tfpipe.write_shards: 8 shards of 4,096 examples, a float16 [128, 64]
feature each, 64 MiB) and 8 user TFRecord files (tf.io.TFRecordWriter: 4,096 tf.train.Examples of
16 KiB bytes and a label, 64 MiB), uploads both to a moto S3 server on 127.0.0.1 and reads them
through docs/examples/latency_proxy.py, which delays every response by DELAY_MS (default 20).
Each arm runs in its own process (TensorFlow's S3 client reads S3_ENDPOINT once per process),
arms interleaved round by round; each reads the optimized train chain (batch 64) for 6 s after
a 2 s warm-up and reports examples/s; the table gives medians and each S3 arm's ratio to the
same files read locally and to the same server without the delay (the "-s3direct" arms go
through a second proxy that adds 0 ms: what the latency itself costs, apart from the server's
speed). ARMS (comma-separated) picks arms, e.g. shards-s3:read_ahead=262144 to time another
read-ahead (bytes) or shards-s3:cycle_length=8 another interleave width.

(`rclone serve s3`, a server in Go, was tried in moto's place: tensorflow-io's ranged reads got
wrong bytes from it past the first 512 KiB, which tfpipe's record scan refused as CRC failures,
while boto3's ranged reads of the same objects were right.)
"""

import contextlib
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EXAMPLES, SHARDS, BATCH = 4096, 8, 64
WARM_UP_SECONDS, TIMED_SECONDS = 2.0, 6.0
DEFAULT_ARMS = "shards-local,shards-s3,shards-s3direct,records-local,records-s3,records-s3direct"


def make_data(work):
    """The local shard folder and TFRecord files (once)."""
    import numpy as np
    import tensorflow as tf

    import tfpipe

    shards, records = os.path.join(work, "local", "shards"), os.path.join(work, "local", "records")
    if not os.path.exists(os.path.join(shards, "tfpipe.json")):
        rng = np.random.default_rng(0)
        examples = ({"x": rng.standard_normal((128, 64)).astype(np.float32), "label": i % 10}
                    for i in range(EXAMPLES * SHARDS // 8))
        tfpipe.write_shards(examples, shards, num_shards=SHARDS, label_key="label", dtype="float16", progress=False)
    if not os.path.isdir(records):
        os.makedirs(records)
        payload = np.random.default_rng(1).bytes(16 << 10)
        per_file = EXAMPLES * SHARDS // 8 // SHARDS
        for s in range(SHARDS):
            with tf.io.TFRecordWriter(os.path.join(records, f"train-{s:05d}-of-{SHARDS:05d}")) as writer:
                for i in range(per_file):
                    feature = {"data": tf.train.Feature(bytes_list=tf.train.BytesList(value=[payload])),
                               "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 10]))}
                    writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    return shards, records


def child(arm, work):
    """One arm in this process: examples/s of the optimized train chain, printed as JSON."""
    import dataclasses

    import tensorflow as tf

    import tfpipe
    from tfpipe.storage import formats

    name, _, edits = arm.partition(":")
    settings = dict(e.split("=") for e in edits.split(",") if e)
    if "read_ahead" in settings:
        formats.READ_AHEAD_BYTES = int(settings.pop("read_ahead"))
    pipe = tfpipe.PipelineConfig.optimized(batch_size=BATCH, seed=0)
    typed = {k: (v.lower() == "true") if isinstance(getattr(pipe, k), bool) else type(getattr(pipe, k))(v)
             for k, v in settings.items()}
    pipe = dataclasses.replace(pipe, **typed)
    base = os.path.join(work, "local") if name.endswith("-local") else "s3://bench"
    if name.startswith("shards"):
        ds = tfpipe.build_dataset(f"{base}/shards", "train", pipe)
    else:
        spec = {"data": tf.io.FixedLenFeature([], tf.string), "label": tf.io.FixedLenFeature([], tf.int64)}
        ds = tfpipe.build_dataset(tfpipe.records(f"{base}/records/train-*", spec=spec, label_key="label",
                                                 progress=False), "train", pipe)
    batches = iter(ds)
    start = time.perf_counter()
    while time.perf_counter() - start < WARM_UP_SECONDS:
        next(batches)
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < TIMED_SECONDS:
        _, labels = next(batches)
        n += int(labels.shape[0])
    print("RESULT " + json.dumps({"arm": arm, "examples_per_s": n / (time.perf_counter() - start)}), flush=True)


@contextlib.contextmanager
def _server(work):
    """moto's S3 server on 127.0.0.1 holding bucket "bench" (shards/, records/): yields its endpoint."""
    from tests.objstore.s3server import client, moto_server, upload

    with moto_server() as endpoint:
        client(endpoint).create_bucket(Bucket="bench")
        for what in ("shards", "records"):
            upload(endpoint, os.path.join(work, "local", what), "bench", what)
        yield endpoint


def _proxy(endpoint, delay_ms):
    """A latency_proxy.py in front of `endpoint`: (the process, its endpoint)."""
    from tests.objstore.s3server import free_port

    port = free_port()
    proxy = subprocess.Popen([sys.executable, os.path.join(HERE, "latency_proxy.py"), str(port),
                              endpoint.removeprefix("http://"), str(delay_ms)])
    time.sleep(1.0)
    return proxy, f"http://127.0.0.1:{port}"


def main(argv):
    work = argv[1] if len(argv) > 1 else "/tmp/objbench"
    rounds = int(argv[2]) if len(argv) > 2 else 3
    delay_ms = float(argv[3]) if len(argv) > 3 else 20.0
    arms = (argv[4] if len(argv) > 4 else DEFAULT_ARMS).split(",")
    make_data(work)
    sys.path.insert(0, ROOT)
    from tests.objstore.s3server import client_env  # noqa: E402  (after sys.path)

    with _server(work) as endpoint:
        delayed, delayed_endpoint = _proxy(endpoint, delay_ms)
        direct, direct_endpoint = _proxy(endpoint, 0)
        try:
            results = {arm: [] for arm in arms}
            for r in range(rounds):
                for arm in arms:
                    via = direct_endpoint if arm.split(":")[0].endswith("-s3direct") else delayed_endpoint
                    env = client_env(via, TFPIPE_CACHE_DIR=os.path.join(work, "cache"), PYTHONPATH=ROOT)
                    out = subprocess.run([sys.executable, __file__, "--child", arm, work], env=env,
                                         capture_output=True, text=True, timeout=600)
                    line = [x for x in out.stdout.splitlines() if x.startswith("RESULT ")]
                    if not line:
                        sys.exit(f"{arm} failed:\n{out.stderr[-3000:]}")
                    results[arm].append(json.loads(line[-1][7:])["examples_per_s"])
                    print(f"round {r + 1} {arm}: {results[arm][-1]:,.0f} examples/s", flush=True)
        finally:
            delayed.kill()
            direct.kill()
    print(f"\n{os.cpu_count()} cores, moto server, {delay_ms:.0f} ms added per S3 response "
          f"(-s3direct: 0 ms), median of {rounds} rounds:")
    median = {arm: statistics.median(rates) for arm, rates in results.items()}
    for arm, rate in median.items():
        name, _, edits = arm.partition(":")
        kind = name.rsplit("-", 1)[0]
        local, direct = median.get(f"{kind}-local"), median.get(f"{kind}-s3direct" + (":" + edits if edits else ""))
        ratio = ""
        if not name.endswith("-local") and local:
            ratio = f"  {rate / local:.0%} of local"
        if name.endswith("-s3") and direct:
            ratio += f", {rate / direct:.0%} of the server without the delay"
        print(f"  {arm:<40} {rate:>9,.0f} examples/s{ratio}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        sys.path.insert(0, ROOT)
        child(sys.argv[2], sys.argv[3])
    else:
        main(sys.argv)
