"""`tfpipe serve dispatcher | worker | bench`: the tf.data service from the command line."""

from __future__ import annotations

import sys
from typing import Sequence

from absl import flags

from tfpipe.cli import data_domain, fail, output_file

FLAGS = flags.FLAGS


# --- serve -----------------------------------------------------------------------

_SERVE_USAGE = ("usage: tfpipe serve dispatcher --port P [--work_dir DIR]\n"
                "       tfpipe serve worker --dispatcher HOST:P --port Q [--worker_host NAME]\n"
                "       tfpipe serve bench --data DIR [--workers 0,1,2] [--pipeline=naive ...]")
USAGE = {"serve": _SERVE_USAGE}  # shown by `tfpipe serve --help`


def define_serve() -> None:
    from tfpipe import flags as tfpipe_flags

    flags.DEFINE_integer("port", None, "Port this server listens on, on all interfaces (0: any free port).",
                         lower_bound=0, upper_bound=65535)
    flags.DEFINE_string("work_dir", None, "dispatcher: journal its state here; recover it after a restart.")
    flags.DEFINE_float("worker_timeout", None, "dispatcher: seconds without a heartbeat before a worker "
                       "counts as gone (unset: TensorFlow's default).", lower_bound=0.1)
    flags.DEFINE_string("dispatcher", None, "worker: the dispatcher's HOST:PORT.")
    flags.DEFINE_string("worker_host", None, "worker: the name consumers reach this worker by (default: "
                        "localhost for a dispatcher on this host, else this machine's hostname).")
    flags.DEFINE_string("data", None, "bench: a folder with one subfolder per class of a domain's files, CSV "
                        "manifest or shard folder to read.")
    flags.DEFINE_list("workers", ["0", "1", "2"], "bench: service worker counts to compare (0: no service, "
                      "the chain runs in the bench process).")
    flags.DEFINE_integer("batches", 50, "bench: timed batches per run.", lower_bound=1)
    flags.DEFINE_integer("warmup", 5, "bench: untimed batches before each timed run.", lower_bound=0)
    flags.DEFINE_integer("repeats", 3, "bench: runs per worker count (interleaved; the median is reported).",
                         lower_bound=1)
    flags.DEFINE_boolean("pin_workers", True, "bench: pin worker i to CPU i, so each worker stands for one "
                         "single-core machine (Linux).")
    flags.DEFINE_string("json", None, "bench: also write the results to this JSON file.")
    tfpipe_flags.define_flags()


def run_serve(argv: Sequence[str]) -> None:
    role = argv[0] if len(argv) == 1 else None
    if role not in ("dispatcher", "worker", "bench"):
        got = " ".join(argv) or "nothing"
        fail(f"expected one of dispatcher | worker | bench, got {got}\n{_SERVE_USAGE}")
    if role != "bench" and FLAGS.port is None:
        fail(f"--port is required (0: any free port)\n{_SERVE_USAGE}")
    if role == "worker" and not FLAGS.dispatcher:
        fail(f"--dispatcher HOST:PORT is required\n{_SERVE_USAGE}")
    if role == "bench" and not FLAGS.data:
        fail("--data is required: a folder with one subfolder per class, CSV manifest or shard folder")
    from tfpipe.service.ports import check_port_free

    try:
        if role != "bench":
            check_port_free(FLAGS.port)  # a taken port: said at once, before TensorFlow loads
        from tfpipe.service import servers  # loads TensorFlow: after the cheap checks

        if role == "dispatcher":
            timeout_ms = None if FLAGS.worker_timeout is None else int(FLAGS.worker_timeout * 1000)
            servers.run_dispatcher(FLAGS.port, FLAGS.work_dir, worker_timeout_ms=timeout_ms)
        elif role == "worker":
            if FLAGS.reuse_memory:  # the worker runs the chains: their batches reuse freed buffers
                from tfpipe.core import memory

                memory.reuse_large_buffers()
            servers.run_worker(FLAGS.dispatcher, FLAGS.port, worker_host=FLAGS.worker_host)
        else:
            _run_serve_bench()
    except ValueError as e:
        fail(str(e))


def _run_serve_bench() -> None:
    """tfpipe serve bench: examples/s through 0 (local), 1, 2, ... service workers."""
    from tfpipe import flags as tfpipe_flags
    from tfpipe.service import bench as service_bench

    try:
        counts = [int(n) for n in FLAGS.workers]
    except ValueError:
        fail(f"--workers={','.join(FLAGS.workers)}: expected worker counts, e.g. 0,1,2")
    features = tfpipe_flags.feature_config(config_class=data_domain(FLAGS.data).config_class)
    result = service_bench.bench_workers(FLAGS.data, counts, tfpipe_flags.pipeline_config(),
                                         features, batches=FLAGS.batches,
                                         warmup=FLAGS.warmup, repeats=FLAGS.repeats,
                                         pin_workers=FLAGS.pin_workers, out=sys.stdout)
    print(service_bench.format_bench(result))
    if FLAGS.json:
        import json

        with open(output_file(FLAGS.json), "w") as f:
            json.dump(result, f, indent=2)
        print(f"wrote {FLAGS.json}")


