"""write_shards: decode any wav offline, compute features, write a shard plan with worker processes.

Each worker process writes whole shards: every clip is decoded with soundfile (any
PCM width, float, stereo mixed to mono), resampled with soxr when its rate differs,
cropped/padded, and featurized in batches by the same `tfpipe.audio` code the online
pipeline runs. A shard goes to a temp name, is fsynced and renamed when whole; then a
sidecar `<shard>.json` records its size, sha256 and a key of its inputs, so a rerun of
the same command skips shards that are complete. The index is written last.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import dataclasses
import glob
import hashlib
import json
import multiprocessing
import os
import queue as queue_lib
import time
from typing import Callable, Optional, Sequence, Union

import numpy as np

from tfpipe import shards, sources
from tfpipe.domains.audio.config import FeatureConfig
from tfpipe.domains.audio.offline import load_clip, log_mel_fn, pad_clips  # noqa: F401  (pad_clips: demo)
from tfpipe.errors import DataError

_CHUNK_EXAMPLES = 16  # clips featurized per call: amortizes TF dispatch; the STFT's ~3 MB stays in cache
_READY = "ready"  # a worker's first message: TensorFlow loaded, feature function traced


@dataclasses.dataclass(frozen=True)
class WriteStats:
    """What one `write_shards` call did.

    Attributes:
      seconds: wall time of the call.
      startup_seconds: until the first worker process was ready (TensorFlow loaded, feature
        function traced), including finding the inputs and planning.
      writing_seconds: from then until the last shard was written: examples/s over this
        span is what more workers speed up.
      processed: examples decoded and featurized by this call.
      resumed_shards: shards already complete from an earlier run (checked, not rewritten).
      shards: shards this host is responsible for.
    """

    seconds: float
    startup_seconds: float
    writing_seconds: float
    processed: int
    resumed_shards: int
    shards: int


@dataclasses.dataclass(frozen=True)
class _Job:
    """Everything a worker process needs to write one shard (picklable)."""

    spec: shards.ShardSpec
    out_dir: str
    paths: tuple[str, ...]
    names: tuple[str, ...]
    labels: tuple[int, ...]
    num_classes: int
    features: FeatureConfig
    store: str
    dtype: str
    on_error: str


def write_shards(data: Union[str, os.PathLike, sources.Source], out_dir: Union[str, os.PathLike],
                 num_shards: int = 16, num_workers: int = 1, features: Optional[FeatureConfig] = None,
                 store: str = "log_mel", split: str = "train", seed: int = 0, on_error: str = "fail",
                 dtype: str = "float16", worker_index: int = 0, num_hosts: int = 1, *,
                 progress: bool = True) -> dict:
    """Converts a wav folder or CSV manifest into verified TFRecord shards plus tfpipe.json.

    Args:
      data: wav folder (one subfolder per class), CSV manifest (path,label) or a wav Source.
      out_dir: shard folder to create or finish (a rerun skips shards already complete).
      num_shards: shards in the whole dataset (over all hosts).
      num_workers: worker processes, each writing whole shards; 0 runs in this process.
      features: sample rate, clip length and log-mel settings; default FeatureConfig().
      store: "log_mel" (features ready to train on) or "waveform" (fixed-length clips).
      split: shard file name prefix.
      seed: planner seed (which example goes to which shard, record order).
      on_error: "fail" stops at the first unreadable file, naming it; "skip" lists it
        in the index's `rejected` with the reason.
      dtype: "float16" (half the disk and read bandwidth) or "float32" storage.
      worker_index: this host's number when several hosts write one dataset.
      num_hosts: hosts writing the dataset; host i writes shards i, i + num_hosts, ...
        and a partial index; the last host to finish (or `tfpipe prepare --merge`) merges.
      progress: show a tqdm progress bar.

    Returns:
      The index dict written to out_dir/tfpipe.json (with num_hosts > 1: this host's
      partial index until every host has finished, then the merged index).

    Raises:
      ValueError: bad arguments.
      DataError: an unreadable input with on_error="fail", naming the file.
    """
    return write_shards_with_stats(data, out_dir, num_shards, num_workers, features, store, split, seed,
                                   on_error, dtype, worker_index, num_hosts, progress=progress)[0]


def write_shards_with_stats(data: Union[str, os.PathLike, sources.Source], out_dir: Union[str, os.PathLike],
                            num_shards: int = 16, num_workers: int = 1,
                            features: Optional[FeatureConfig] = None, store: str = "log_mel",
                            split: str = "train", seed: int = 0, on_error: str = "fail",
                            dtype: str = "float16", worker_index: int = 0, num_hosts: int = 1, *,
                            progress: bool = True) -> tuple[dict, WriteStats]:
    """`write_shards`, also returning WriteStats (for the CLI's summary)."""
    start = time.perf_counter()
    features = features or FeatureConfig()
    _check_args(num_workers, store, on_error, dtype, worker_index, num_hosts)
    source = sources.find_examples(data)
    if source.kind != "wav":
        raise ValueError(f"{source.root}: already a shard folder; write_shards needs a wav folder or CSV")
    out_dir = os.path.abspath(os.fspath(out_dir))
    base = sources.folder(source.root)
    if out_dir == os.path.abspath(base):
        raise ValueError(f"{out_dir}: the output folder is the input folder; its tfpipe.json would turn the "
                         f"wav folder into a shard folder. Pick another --output")
    if num_hosts > num_shards:
        raise ValueError(f"num_hosts={num_hosts} but num_shards={num_shards}: "
                         f"every host needs a shard to write")
    os.makedirs(out_dir, exist_ok=True)
    prefix = os.path.join(os.path.abspath(base), "")  # relpath per file costs ~10 µs: 0.16 s for 16k clips
    names = [p[len(prefix):] if p.startswith(prefix) else os.path.relpath(p, base) for p in source.paths]
    plan = shards.plan_shards(source.labels, num_shards, seed=seed, split=split)
    jobs = [_Job(spec, out_dir, tuple(source.paths[i] for i in spec.examples),
                 tuple(names[i] for i in spec.examples), tuple(source.labels[i] for i in spec.examples),
                 len(source.class_names), features, store, dtype, on_error)
            for spec in plan[worker_index::num_hosts]]
    manifests, ready, done = _run_jobs(jobs, num_workers, progress)

    stored = dataclasses.replace(features, output=store)  # store names a FeatureConfig.output value
    header = {"format": shards.FORMAT, "version": shards.VERSION, "split": split,
              "class_names": list(source.class_names), "features": dataclasses.asdict(features),
              "store": store, "dtype": dtype, "shape": list(stored.feature_shape)}
    index = shards.make_index(header, manifests, [r for m in manifests for r in m["rejected"]])
    found = sum(len(job.spec.examples) for job in jobs)
    shards.check_counts(index, found)
    if num_hosts == 1:
        shards.write_json_atomic(os.path.join(out_dir, shards.INDEX_NAME), index)
    else:
        part = {**index, "host": [worker_index, num_hosts], "found": found,
                "plan": {"num_shards": num_shards, "seed": seed}}
        shards.write_json_atomic(os.path.join(out_dir, shards.part_name(worker_index, num_hosts)), part)
        done_hosts = len(shards.part_paths(out_dir, num_hosts))
        index = shards.merge_index(out_dir, num_hosts) if done_hosts == num_hosts else part
    resumed = sum(m["resumed"] for m in manifests)
    processed = sum(len(j.spec.examples) for j, m in zip(jobs, manifests) if not m["resumed"])
    return index, WriteStats(time.perf_counter() - start, ready - start, done - ready, processed, resumed,
                             len(jobs))


def _check_args(num_workers, store, on_error, dtype, worker_index, num_hosts) -> None:
    """ValueError naming the argument, its value and what is allowed."""
    for name, value, allowed in (("store", store, shards.STORES), ("on_error", on_error, ("fail", "skip")),
                                 ("dtype", dtype, shards.DTYPES)):
        if value not in allowed:
            raise ValueError(f"{name}={value!r}: allowed values are {', '.join(map(repr, allowed))}")
    if num_workers < 0:
        raise ValueError(f"num_workers={num_workers}: must be >= 0 (0 = write in this process)")
    if num_hosts < 1 or not 0 <= worker_index < num_hosts:
        raise ValueError(f"worker_index={worker_index}, num_hosts={num_hosts}: "
                         f"need 0 <= worker_index < num_hosts")


# --- running the jobs ----------------------------------------------------------------------

_report: Callable[[int], None] = lambda n: None  # noqa: E731  (set per worker process by _init_worker)


def _run_jobs(jobs: Sequence[_Job], num_workers: int, progress: bool) -> tuple[list[dict], float, float]:
    """Runs every job (in worker processes unless num_workers == 0).

    Returns:
      The manifests in job order, the time.perf_counter() when the first worker was ready,
      and when the last shard was done.
    """
    from tqdm import tqdm

    total = sum(len(job.spec.examples) for job in jobs)
    with tqdm(total=total, unit="clip", desc="tfpipe prepare", disable=not progress, smoothing=0.1) as bar:
        if num_workers == 0:
            ready = time.perf_counter()
            return [write_shard(job, bar.update) for job in jobs], ready, time.perf_counter()
        # Workers fork from a server process that imported TensorFlow once (plain fork would copy
        # this process's TensorFlow threads; spawn would import TensorFlow once per worker).
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["tfpipe.shard_writer", "tfpipe.domains.audio", "soundfile",
                                         "librosa.filters"])
        done_queue = context.Queue()
        ready: list[float] = []
        manifests: dict[int, dict] = {}
        pool = concurrent.futures.ProcessPoolExecutor(min(num_workers, len(jobs)), mp_context=context,
                                                      initializer=_init_worker,
                                                      initargs=(done_queue, jobs[0].features, jobs[0].store))
        try:
            futures = {pool.submit(_pool_job, job): job for job in jobs}
            pending = set(futures)
            while pending:
                finished, pending = concurrent.futures.wait(pending, timeout=0.2,
                                                            return_when=concurrent.futures.FIRST_COMPLETED)
                _drain(done_queue, bar, ready)
                for future in finished:
                    job = futures[future]
                    try:
                        manifests[job.spec.index] = future.result()
                    except concurrent.futures.process.BrokenProcessPool as e:
                        raise RuntimeError(f"a worker process died while writing {job.spec.file} (out "
                                           f"of memory?); finished shards are kept: rerun the same "
                                           f"command") from e
        finally:
            # No waiting for the workers' TensorFlow teardown; after an error, running shards finish.
            pool.shutdown(wait=False, cancel_futures=True)
        done = time.perf_counter()
        bar.update(total - bar.n)  # the last reports may still be in the queue; the manifests count
        return [manifests[job.spec.index] for job in jobs], (ready or [done])[0], done


def _drain(done_queue, bar, ready: list) -> None:
    """Moves the workers' progress reports to the bar and notes when each worker got ready."""
    try:
        while True:
            message = done_queue.get_nowait()
            if message == _READY:
                ready.append(time.perf_counter())
            else:
                bar.update(message)
    except queue_lib.Empty:
        pass


def _init_worker(done_queue, features: FeatureConfig, store: str) -> None:
    """Worker start-up: one TF thread per process (N workers use N cores without fighting), warm-up."""
    global _report
    _report = done_queue.put
    import soundfile  # noqa: F401  (loaded now, so start-up is not counted as writing time)
    import tensorflow as tf

    # Registered after TensorFlow's own handlers, so it runs first at exit: skips their ~1 s
    # teardown. Safe here: every shard is closed and fsynced, and multiprocessing has already
    # flushed this worker's queues when the interpreter starts to exit.
    atexit.register(os._exit, 0)

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    if store == "log_mel":
        log_mel_fn(features)(np.zeros((1, features.num_samples), np.float32))
    done_queue.put(_READY)


def _pool_job(job: _Job) -> dict:
    """write_shard in a worker process, reporting progress through the queue."""
    return write_shard(job, _report)


# --- one shard -----------------------------------------------------------------------------

def write_shard(job: _Job, report: Callable[[int], None]) -> dict:
    """Writes one shard atomically (or finds it complete); returns its manifest.

    Raises:
      DataError: an unreadable input with on_error="fail", naming the file and the shard.
    """
    import tensorflow as tf

    final = os.path.join(job.out_dir, job.spec.file)
    key = _job_key(job)
    manifest = _complete_manifest(final, key)
    if manifest:
        report(len(job.spec.examples))
        return {**manifest, "resumed": True}
    for stale in glob.glob(os.path.join(job.out_dir, f".{job.spec.file}*.tmp-*")):  # shard or sidecar
        os.remove(stale)  # left by a killed run; never visible under the final name
    tmp = os.path.join(job.out_dir, f".{job.spec.file}.tmp-{os.getpid()}")
    rejected, counts = [], np.zeros(job.num_classes, np.int64)
    try:
        with tf.io.TFRecordWriter(tmp) as writer:
            for start in range(0, len(job.paths), _CHUNK_EXAMPLES):
                chunk = range(start, min(start + _CHUNK_EXAMPLES, len(job.paths)))
                kept, clips = _load_chunk(job, chunk, rejected)
                for i, values in zip(kept, _featurize(clips, job)):
                    writer.write(_example(job.store, values.tobytes(), job.labels[i], job.names[i]))
                    counts[job.labels[i]] += 1
                report(len(chunk))
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        manifest = {"file": job.spec.file, "num_examples": len(job.paths) - len(rejected),
                    "bytes": os.path.getsize(tmp), "sha256": shards.sha256_file(tmp), "key": key,
                    "class_counts": counts.tolist(), "rejected": rejected}
        os.replace(tmp, final)
        shards.fsync_dir(job.out_dir)
        shards.write_json_atomic(shards.sidecar_path(final), manifest)  # after the shard: sidecar => whole
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return {**manifest, "resumed": False}


def _load_chunk(job: _Job, chunk: range, rejected: list) -> tuple[list[int], list[np.ndarray]]:
    """Decodes the clips at `chunk`; an unreadable one fails (on_error="fail") or joins `rejected`."""
    kept, clips = [], []
    for i in chunk:
        try:
            clips.append(load_clip(job.paths[i], job.features))
            kept.append(i)
        except DataError as e:
            if job.on_error == "fail":
                raise DataError(f"{e} (writing {job.spec.file}; rerun with --on_error=skip "
                                f"to list such files as rejected instead)") from None
            rejected.append({"path": job.names[i], "reason": str(e).removeprefix(f"{job.paths[i]}: ")})
    return kept, clips


def _job_key(job: _Job) -> str:
    """Identifies what a shard was made from; a sidecar with another key belongs to another command."""
    stats = [os.stat(path) for path in job.paths]  # an edited input changes size or mtime
    inputs = [(name, label, st.st_size, st.st_mtime_ns)
              for name, label, st in zip(job.names, job.labels, stats)]
    settings = [shards.VERSION, dataclasses.asdict(job.features), job.store, job.dtype, job.on_error,
                job.spec.file, inputs]
    return hashlib.sha256(json.dumps(settings).encode()).hexdigest()


def _complete_manifest(final: str, key: str) -> Optional[dict]:
    """The sidecar of a complete shard made from the same inputs, re-hashed; else None."""
    try:
        with open(shards.sidecar_path(final)) as f:
            manifest = json.load(f)
        if (manifest.get("key") == key and os.path.getsize(final) == manifest["bytes"]
                and shards.sha256_file(final) == manifest["sha256"]):
            return manifest
    except (OSError, ValueError, KeyError):
        pass  # missing or partial: the shard is written again
    return None


def _example(store: str, values: bytes, label: int, name: str) -> bytes:
    """One serialized tf.train.Example (deterministic bytes, so reruns hash the same)."""
    import tensorflow as tf

    feature = {store: tf.train.Feature(bytes_list=tf.train.BytesList(value=[values])),
               shards.LABEL_KEY: tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
               shards.PATH_KEY: tf.train.Feature(bytes_list=tf.train.BytesList(value=[name.encode()]))}
    example = tf.train.Example(features=tf.train.Features(feature=feature))
    return example.SerializeToString(deterministic=True)


def _featurize(clips: Sequence[np.ndarray], job: _Job) -> np.ndarray:
    """[len(clips), *shape] stored values: clips zero-padded to one batch, then log-mel if stored."""
    batch = pad_clips(clips, job.features.num_samples)
    if job.store == "log_mel" and clips:
        batch = log_mel_fn(job.features)(batch).numpy()
    return batch.astype(np.dtype(job.dtype).newbyteorder("<"))
