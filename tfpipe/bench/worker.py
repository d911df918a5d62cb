"""Both ends of a `tfpipe bench` worker process: what runs inside it, and the parent's handle.

A worker pins itself to its cores (if told to), imports TensorFlow, then serves
commands from its pipe: "build" (build the variant's dataset, time the first batch,
take the warm-up batches), "time" (one turn), "stages" (single-thread rate of each
stage of the data's domain chain), "ops" (single-thread rate of each op of the final
chain) and "stop". The parent's `Worker` freezes the process with SIGSTOP whenever it is not
serving a command, so an idle variant's tf.data threads never run while another is timed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from typing import Any, Optional, Sequence

from tfpipe.bench import batches as bench_batches
from tfpipe.bench import ops as bench_ops
from tfpipe.bench.ops import one_thread_rate
from tfpipe.bench.user_fns import FunctionSpecError, UserFunctionError
from tfpipe.errors import DataError

SETTLE_BATCHES = 1  # untimed at the start of every turn: the one whose making spans the pause
FREEZE = hasattr(signal, "SIGSTOP")
# Imported once by the fork server; each worker forks from it instead of importing TensorFlow anew.
PRELOAD = ["tensorflow", "tfpipe.core.chain", "tfpipe.bench.worker"]


def context() -> Any:
    """The multiprocessing context workers start from: a TensorFlow-preloaded fork server if possible."""
    import multiprocessing

    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")  # fresh interpreter: no inherited TF threads or state
    ctx = multiprocessing.get_context("forkserver")  # forks before TF starts any thread: safe and fast
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity), or all cores where affinity is unknown."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def pin_cpus(count: int) -> list[int]:
    """The first `count` cores of this process's affinity set: what a variant pinned to `count` gets.

    Raises:
      ValueError: more cores asked for than usable, or pinning unsupported here.
    """
    if not hasattr(os, "sched_setaffinity"):
        raise ValueError("cores: pinning needs os.sched_setaffinity (Linux); run without --cores here")
    allowed = sorted(os.sched_getaffinity(0))
    if not 1 <= count <= len(allowed):
        raise ValueError(f"cores={count}: this process may use {len(allowed)} cores ({allowed}); "
                         f"pass counts from 1 to {len(allowed)}, e.g. --cores 1,{len(allowed)}")
    return allowed[:count]


def _rss_mb(key: str) -> float:
    """VmRSS (now) or VmHWM (peak) of this process in MB; getrusage's peak where /proc is missing."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1 << 20 if sys.platform == "darwin" else 1 << 10)


def _dataset(job: dict) -> tuple[Any, bool]:
    """The variant's train dataset, and whether it was finite (then it is repeated here)."""
    import tensorflow as tf

    ds = job["variant"].dataset(job["data"], job["shards"])
    cardinality = int(ds.cardinality())
    endless = cardinality == int(tf.data.INFINITE_CARDINALITY)
    # A finite (or unknown: flat_map, filter) dataset would end mid-turn; only a known one is noted.
    return (ds if endless else ds.repeat()), cardinality >= 0


def _epoch_batches(ds: Any, batch_size: int) -> Optional[int]:
    """Batches in one epoch of a chain: the last finite op's size, in batches (None: unknown)."""
    from tfpipe.core.graph import walk

    epoch, batched = None, False
    for node in walk(ds):
        batched = (batched or node.op in bench_ops.BATCH_OPS) and node.op not in bench_ops.UNBATCH_OPS
        cardinality = int(node.dataset.cardinality()) if node.dataset is not None else -1
        if cardinality > 0:
            epoch = cardinality if batched else cardinality // max(1, batch_size)
    return epoch or None


def _build(state: dict, job: dict, warmup: int) -> dict:
    """Builds the variant's dataset; times build + first batch; takes `warmup` batches untimed.

    For a user's dataset, also reports its epoch in batches (None: unknown), which tfpipe
    knows for its own chains from the data; for any, the padding share of these first batches.
    """
    start = time.perf_counter()
    state["dataset"], finite = _dataset(job)
    state["batches"] = iter(state["dataset"])
    first_batches = [next(state["batches"])]
    first = time.perf_counter() - start
    first_batches += [next(state["batches"]) for _ in range(warmup)]
    batch_size = bench_batches.num_examples(first_batches[0])
    return {"first_batch_s": first, "repeated": finite, "batch_spec": bench_batches.describe(first_batches[0]),
            "padding_share": bench_batches.padding_share(first_batches, state["dataset"].element_spec),
            "epoch_batches": _epoch_batches(state["dataset"], batch_size) if job["variant"].own_epoch else None}


def _ops(state: dict, job: dict, budget_s: float, cores: int) -> bench_ops.OpsReport:
    """Single-thread rate of each op of the chain the variant iterates (as the user built it)."""
    return bench_ops.measure_ops(state["dataset"], budget_s, cores, job["variant"].key)


def _time(state: dict, job: dict, batches: int, step_s: float, min_s: float = 0.0) -> dict:
    """One turn: a settle batch, then blocks of `batches` timed until `min_s` has passed.

    Each batch is followed by the simulated step, if any.
    """
    it = state["batches"]
    for _ in range(SETTLE_BATCHES):
        next(it)
    taken, examples, wait = 0, 0, 0.0
    start = time.perf_counter()
    while not taken or time.perf_counter() - start < min_s:
        for _ in range(batches):
            asked = time.perf_counter()
            batch = next(it)
            wait += time.perf_counter() - asked
            examples += bench_batches.num_examples(batch)
            if step_s:
                time.sleep(step_s)  # the accelerator's step: releases the GIL like a real one
        taken += batches
    return {"batches": taken, "examples": examples, "seconds": time.perf_counter() - start, "wait_s": wait}


def _stages(state: dict, job: dict, configs: Sequence[tuple], budget_s: float) -> list:
    """Single-thread rates of list -> each of the domain's stages -> batch, per (label, config, batch size).

    The stages are the source's own (`chain_input`), so they describe what the pipeline runs, and
    every chain timed is built from steps by the one chain (`tfpipe.core.chain.apply`), sequential
    steps in place of the parallel ones. Also the two single-thread ways of running them all: one
    fused map per example, and vectorized (the trailing batchable stages on whole batches).
    """
    from tfpipe.core import steps as st
    from tfpipe.core.chain import apply, split_stages
    from tfpipe.core.source import find

    source = find(job["data"])
    reports = []
    for label, config, batch_size in configs:
        inputs = source.chain_input("train", config)
        base, names = [st.Repeat()], ["list"]
        chains = [tuple(base)]
        if inputs.expand is not None:  # files of many records (shards): their records are the examples
            base += [st.ReadFiles(parallel=False, cycle_length=1, block_length=1, deterministic=True)]
            base += [st.Unblock()] if inputs.blocked else []  # blocks of examples, as the chain un-blocks them
            chains, names = chains + [tuple(base)], names + ["records"]
        maps = [st.Map((stage,), parallel=False, deterministic=True) for stage in inputs.stages]
        chains += [tuple(base + maps[:i + 1]) for i in range(len(maps))]
        chains.append(tuple(base + maps + [st.Batch(batch_size, drop_remainder=True)]))
        names += [stage.name for stage in inputs.stages] + ["batch"]
        rates = [one_thread_rate(apply(steps, inputs), batch_size if i == len(chains) - 1 else 1, budget_s)
                 for i, steps in enumerate(chains)]
        fused = apply(tuple(base) + (st.Map(tuple(inputs.stages), parallel=False, deterministic=True),), inputs)
        before, after = split_stages(inputs.stages, vectorize=True)
        vectorized = None
        if after:
            head = [st.Map(tuple(before), parallel=False, deterministic=True)] if before else []
            steps = tuple(base + head + [st.Batch(batch_size, drop_remainder=True),
                                         st.Map(tuple(after), parallel=False, deterministic=True)])
            vectorized = one_thread_rate(apply(steps, inputs), batch_size, budget_s)
        reports.append({"label": label, "names": tuple(names), "rates": tuple(rates),
                        "fused_rate": one_thread_rate(fused, 1, budget_s), "vectorized_rate": vectorized,
                        "batched": len(after) if vectorized else 0,
                        "batch_size": batch_size})
    return reports


_COMMANDS = {"build": _build, "time": _time, "stages": _stages, "ops": _ops}


class VariantError(RuntimeError):
    """A variant's worker failed (its chain raised while built or iterated), named by the variant."""


# Errors a worker reports that the parent raises as themselves; any other is a VariantError.
_ERRORS = {e.__name__: e for e in (DataError, ValueError, FunctionSpecError, UserFunctionError)}


def _message(error: Exception) -> str:
    """What the parent shows: the message, without TensorFlow's op context after its first line."""
    import tensorflow as tf

    text = str(error).strip()
    if isinstance(error, tf.errors.OpError):  # "...\n\t [[{{node ...}}]] [Op:IteratorGetNext]"
        text = error.message.strip().splitlines()[0] if error.message.strip() else text
    return text


def _gpu_name(tf: Any, gpu: Any) -> str:
    """"NVIDIA H100 80GB HBM3", or the device's name where TensorFlow has no details."""
    try:
        return tf.config.experimental.get_device_details(gpu).get("device_name") or gpu.name
    except (ValueError, RuntimeError):
        return gpu.name


def worker_main(conn: Any, job: dict) -> None:
    """A worker process: pins itself, imports TensorFlow, then serves the parent's commands until "stop"."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    try:
        if job.get("cpus"):  # before TensorFlow sizes its thread pools from the usable cores
            os.sched_setaffinity(0, job["cpus"])
        # The fork server's path is the parent's when it started; a user's module may have come later.
        sys.path.extend(p for p in job.get("sys_path", ()) if p not in sys.path)
        import tensorflow as tf

        tf.get_logger().setLevel("ERROR")
        gpus = tf.config.list_physical_devices("GPU")
        for gpu in gpus:
            # The variants share the card, each paused while another runs: without this the first
            # worker maps all of its memory and the next fails "cudaSetDevice() ... out of memory".
            tf.config.experimental.set_memory_growth(gpu, True)
        conn.send(("ok", {"import_rss_mb": _rss_mb("VmRSS"), "tf_version": tf.__version__,
                          "gpu": bool(gpus), "gpu_names": [_gpu_name(tf, gpu) for gpu in gpus],
                          "usable_cores": usable_cores()}))
        state: dict = {}
        while True:
            command, kwargs = conn.recv()
            if command == "stop":
                conn.send(("ok", {"peak_rss_mb": _rss_mb("VmHWM")}))
                break
            conn.send(("ok", _COMMANDS[command](state, job, **kwargs)))
    except (EOFError, KeyboardInterrupt):
        pass  # the parent is gone or interrupted: nobody to report to
    except Exception as e:  # reported to the parent, which raises it with the variant's name
        conn.send(("error", (type(e).__name__, _message(e))))
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        # No interpreter teardown: destroying live tf.data iterators and TensorFlow's thread
        # pools takes seconds per process, and nothing is left to save.
        os._exit(0)


class Worker:
    """A worker process and its pipe, frozen (SIGSTOP) whenever it is not serving a command."""

    def __init__(self, ctx: Any, name: str, job: dict):
        self.name = name
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=worker_main, args=(child, job), daemon=True)
        self.process.start()
        child.close()

    def _signal(self, sig: str) -> None:
        if FREEZE:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, getattr(signal, sig))

    def receive(self, freeze: bool = True) -> dict:
        """The reply to the last command; the worker is frozen once it has replied (if `freeze`)."""
        try:
            status, payload = self.conn.recv()
        except EOFError:
            self.process.join(5)
            raise RuntimeError(f"bench worker for {self.name!r} exited (code {self.process.exitcode}) "
                               f"without replying; out of memory? try fewer variants") from None
        if freeze:
            self._signal("SIGSTOP")
        if status == "error":
            kind, message = payload
            error = _ERRORS.get(kind, VariantError)
            raise error(f"variant {self.name!r}: " + (message if error is UserFunctionError else f"{kind}: {message}"))
        return payload

    def call(self, command: str, **kwargs: Any) -> dict:
        """Thaws the worker, runs `command` there, waits for the reply; "stop" leaves it running to exit."""
        self._signal("SIGCONT")
        self.conn.send((command, kwargs))
        return self.receive(freeze=command != "stop")

    def close(self) -> None:
        """Thaws and ends the process: an idle one exits when its pipe closes, a busy one is killed."""
        self._signal("SIGCONT")
        self.conn.close()
        self.process.join(2)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()


# Runs in a plain interpreter (no TensorFlow): reads worker pids until "done"; if its stdin
# closes without "done", the bench process died (e.g. SIGKILL) and nobody will thaw the workers.
_WATCHDOG = """
import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C: the bench process cleans up and says done
pids = []
for line in sys.stdin:
    if line.strip() == "done":
        sys.exit(0)
    pids.append(int(line))
for pid in pids:
    try:
        os.kill(pid, signal.SIGKILL)  # works on stopped processes too
    except ProcessLookupError:
        pass
"""


class Watchdog:
    """Kills the workers if the bench process dies without ending them (they may be frozen)."""

    def __init__(self):
        self.process = subprocess.Popen([sys.executable, "-c", _WATCHDOG], stdin=subprocess.PIPE, text=True)

    def watch(self, pid: int) -> None:
        """Adds a worker to kill should this process die."""
        self.process.stdin.write(f"{pid}\n")
        self.process.stdin.flush()

    def close(self) -> None:
        """Stands the watchdog down: the workers have been ended properly."""
        with contextlib.suppress(OSError):
            self.process.stdin.write("done\n")
            self.process.stdin.close()
        self.process.wait()
