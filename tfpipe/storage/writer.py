"""write_shards: any domain's files, or your own examples, into a clean, verified shard folder.

  1. prepare the inputs (tfpipe.storage.prepare); a rerun of the same command on a complete
     folder returns at once;
  2. check every input up front (domain files: header check, or a trial decode) and name
     every bad one with its reason before anything is written;
  3. plan (pure, seeded); a complete folder of other settings needs overwrite=True; take the
     index from its readers (refused while another process reads the folder), invalidate it,
     remove shards of an earlier plan;
  4. write each shard atomically (tfpipe.storage.shard_job) in this process, in worker
     processes (tfpipe.storage.workers), or with Apache Beam (tfpipe.storage.beam);
  5. write tfpipe.json last and remove the work subfolder.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, Mapping, Optional

import numpy as np

from tfpipe.core import filesystem as fs
from tfpipe.errors import DataError
from tfpipe.storage import index as index_lib
from tfpipe.storage.folder import OutputFolder
from tfpipe.storage.formats import default_format, get_format
from tfpipe.storage.plan import default_num_shards, default_workers, plan_shards
from tfpipe.storage.prepare import Prepared, prepare_examples, prepare_files, user_examples
from tfpipe.storage.shard_job import ShardJob, input_key

RUNNERS = ("local", "beam")


@dataclasses.dataclass(frozen=True)
class WriteStats:
    """What one `write_shards` call did.

    Attributes:
      seconds: wall time of the call.
      startup_seconds: until the first worker was ready (inputs found and checked, plan made,
        TensorFlow loaded and the featurizer traced in the workers).
      writing_seconds: from then until the last shard was written.
      processed: examples decoded and written by this call.
      resumed_shards: shards already complete from an earlier run (checked, not rewritten).
      shards: shards in the plan.
      num_workers: worker processes used (0: this process; Beam: its own).
      complete: the folder was already complete for this command: nothing was read or written.
      chosen: which defaults were chosen and why ({"num_shards": "...", "num_workers": "..."}).
    """

    seconds: float
    startup_seconds: float
    writing_seconds: float
    processed: int
    resumed_shards: int
    shards: int
    num_workers: int = 0
    complete: bool = False
    chosen: Mapping[str, str] = dataclasses.field(default_factory=dict)


def write_shards(data: Any, out_dir: Any, num_shards: Optional[int] = None, num_workers: Optional[int] = None,
                 features: Any = None, store: Optional[str] = None, split: str = "train", seed: int = 0,
                 on_error: str = "fail", dtype: Optional[str] = None, worker_index: int = 0, num_hosts: int = 1,
                 **kwargs: Any) -> dict:
    """Writes a shard folder (TFRecord shards + tfpipe.json) from a domain's files or your examples.

    Args:
      data: a folder / CSV / Source of a domain's files (audio .wav, images), or any iterable
        of example dicts (numpy arrays, bytes, str, int, float, bool; an array whose first
        dimension varies from example to example is stored with None there in the schema).
      out_dir: shard folder to create or finish (a rerun keeps shards that are complete).
      num_shards: shard files; default min(16, examples), more when shards would exceed 256 MiB.
      num_workers: worker processes, each writing whole shards; 0 writes in this process;
        default: 0 below 10,000 examples, else one per 10,000 up to the usable cores.
      features: the domain's config (AudioConfig, ImageConfig); default the domain's default.
      store: what a domain stores (audio: "log_mel" or "waveform"); default the domain's first.
      split: shard file name prefix; a folder holds one split.
      seed: planner seed (which example goes to which shard, record order).
      on_error: "fail" stops before writing anything, listing every unreadable input with its
        reason; "skip" lists them in the index's `rejected` instead.
      dtype: floating values stored as this dtype ("float16": half the bytes, read back as the
        written dtype); default float16 for domain features, as given for your examples.
      worker_index, num_hosts: retired (hand-run multi-host mode); use runner="beam".
      **kwargs: format ("tfrecord-block" default, "tfrecord-example" one example per record),
        label_key ("label"; your examples' label key, None for none), schema ({key: (dtype,
        shape)} instead of inferring it from the first example), runner ("local" or "beam"),
        beam_options (Beam pipeline options, e.g. "--runner=FlinkRunner ..."), progress (bool),
        overwrite (replace a complete folder written with other settings; default False:
        refused, naming the settings that differ).

    Returns:
      The index written to out_dir/tfpipe.json.

    Raises:
      ValueError: bad arguments. DataError: unreadable inputs (each named), a folder holding
        another split, another writer on the same folder or a process reading it, a complete
        folder of other settings without overwrite=True, an output that is not a writable
        folder, a full disk.
    """
    return write_shards_with_stats(data, out_dir, num_shards, num_workers, features, store, split, seed,
                                   on_error, dtype, worker_index, num_hosts, **kwargs)[0]


def write_shards_with_stats(data: Any, out_dir: Any, num_shards: Optional[int] = None,
                            num_workers: Optional[int] = None, features: Any = None, store: Optional[str] = None,
                            split: str = "train", seed: int = 0, on_error: str = "fail",
                            dtype: Optional[str] = None, worker_index: int = 0, num_hosts: int = 1, *,
                            format: Optional[str] = None, label_key: Optional[str] = "label",
                            schema: Optional[Mapping[str, Any]] = None, runner: str = "local",
                            beam_options: Any = None, progress: bool = True,
                            overwrite: bool = False) -> tuple[dict, WriteStats]:
    """`write_shards`, also returning WriteStats (for the CLI's summary)."""
    start = time.perf_counter()
    _check_args(num_shards, num_workers, on_error, dtype, worker_index, num_hosts, runner, format)
    out_dir = _output_folder(out_dir)
    examples = user_examples(data)
    if examples is not None:
        prepared = prepare_examples(examples, label_key, schema, dtype)
    else:
        prepared = prepare_files(data, out_dir, features, store, on_error, dtype or "float16")
    codec, fmt = prepared.codec, get_format(format or default_format(prepared.codec))
    header = {"format": fmt.name, "split": split, "class_names": list(prepared.class_names),
              "label_key": codec.label_key, "label_names": codec.label_names, "features": codec.to_json(),
              "domain": prepared.domain}
    settings = {**header, "on_error": on_error, "num_shards": num_shards, "seed": seed}
    chosen = {}

    with OutputFolder(out_dir, split) as folder:
        existing = _existing_index(out_dir)
        folder.check_split(existing)
        run_key = input_key(settings, prepared.identity)
        if existing is not None and existing.get("key") == run_key and _shards_intact(out_dir, existing):
            elapsed = time.perf_counter() - start  # the same command on a complete folder: nothing to do
            return existing, WriteStats(elapsed, elapsed, 0.0, 0, len(existing["shards"]), len(existing["shards"]),
                                        complete=True)
        if existing is not None and not overwrite:
            _refuse_other_settings(out_dir, existing, {**header, "plan": {"num_shards": num_shards, "seed": seed},
                                                       "input": prepared.input})
        prepared = prepared.checked()
        prepared.fail_on_rejected(on_error)
        labels = prepared.labels
        if num_shards is None:
            num_shards = default_num_shards(len(labels), codec.example_bytes)
            chosen["num_shards"] = f"{num_shards} (default: min(16, examples), more above 256 MiB a shard)"
        plan = plan_shards(labels, num_shards, seed=seed, split=split)
        if num_workers is None:
            num_workers = default_workers(len(labels), num_shards) if prepared.files else 0
            chosen["num_workers"] = f"{num_workers} (default: by corpus size, {len(labels):,} examples)"
        plan_header = {**header, "plan": {"num_shards": num_shards, "seed": seed}, "input": prepared.input}
        folder.claim_index()  # refused while another process reads the folder
        folder.invalidate_index()  # before the first shard is replaced: never an old index over new shards
        folder.remove_strays(spec.file for spec in plan)
        jobs = [_job(spec, prepared, folder, fmt, settings) for spec in plan]
        manifests, ready = _run(jobs, runner, beam_options, num_workers if prepared.files else 0, progress)
        done = time.perf_counter()
        rejected = prepared.rejected + [r for m in manifests for r in m["rejected"]]
        index = index_lib.make_index({**plan_header, "key": run_key}, manifests, rejected)
        index_lib.check_counts(index, prepared.found)
        folder.finish(index)
    resumed = sum(m["resumed"] for m in manifests)
    processed = sum(len(j.spec.examples) for j, m in zip(jobs, manifests) if not m["resumed"])
    return index, WriteStats(time.perf_counter() - start, ready - start, done - ready, processed, resumed,
                             len(jobs), num_workers if runner == "local" else 0, chosen=chosen)


def _run(jobs, runner: str, beam_options: Any, num_workers: int, progress: bool) -> tuple[list[dict], float]:
    """Every shard job, by Beam or on this machine: the manifests, and when the first worker was ready."""
    if runner == "beam":
        from tfpipe.storage.beam import run_beam

        ready = time.perf_counter()  # Beam starts its own workers: no ready signal to wait for
        return run_beam(jobs, beam_options), ready
    from tfpipe.storage.workers import run_jobs

    return run_jobs(jobs, num_workers, progress)


def _check_args(num_shards, num_workers, on_error, dtype, worker_index, num_hosts, runner, format) -> None:
    """ValueError naming the argument, its value and what is allowed."""
    if worker_index != 0 or num_hosts != 1:
        raise ValueError(f"worker_index={worker_index}, num_hosts={num_hosts}: the hand-run multi-host mode is "
                         f"retired; write on a cluster with Apache Beam: write_shards(..., runner='beam', "
                         f"beam_options='--runner=FlinkRunner ...') (tfpipe prepare --runner=beam "
                         f"--beam_options=...), which runs the same plan on any Beam runner")
    for name, value, allowed in (("on_error", on_error, ("fail", "skip")), ("runner", runner, RUNNERS)):
        if value not in allowed:
            raise ValueError(f"{name}={value!r}: allowed values are {', '.join(map(repr, allowed))}")
    if format is not None:
        get_format(format)
    if dtype is not None and not dtype.startswith("float"):
        raise ValueError(f"dtype={dtype!r}: the storage dtype of floating values: 'float16', 'float32' or 'float64'")
    if num_shards is not None and num_shards < 1:
        raise ValueError(f"num_shards={num_shards}: must be >= 1 (or None for the default)")
    if num_workers is not None and num_workers < 0:
        raise ValueError(f"num_workers={num_workers}: must be >= 0 (0 = write in this process)")


def _output_folder(out_dir: Any) -> str:
    """The output folder as an absolute path, or a DataError naming what is in the way and the fix."""
    out_dir = fs.abspath(out_dir)
    if fs.is_remote(out_dir):
        return _remote_output_folder(out_dir)
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise DataError(f"{out_dir}: exists and is not a folder; pass a folder (new or a shard folder) as --output")
    parent = out_dir
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise DataError(f"{out_dir}: {parent} is a file, not a folder; pass an --output whose parents are folders")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise DataError(f"{out_dir}: cannot write in {parent} (permission denied); pick an --output in a folder "
                        f"you can write to, or fix its permissions")
    return out_dir


def _remote_output_folder(out_dir: str) -> str:
    """A remote --output: not an existing file, and (object stores) in a bucket that exists."""
    if fs.isfile(out_dir):
        raise DataError(f"{out_dir}: exists and is not a folder; pass a folder (new or a shard folder) as --output")
    fs.check_bucket(out_dir)
    return out_dir


def _refuse_other_settings(out_dir: str, existing: dict, header: dict) -> None:
    """DataError when a complete folder was written with other settings or from other data (another
    input folder or CSV, another set of classes); overwrite=True replaces it.

    Files added to or changed in the same input, with the same classes and settings, only update the folder.
    """
    settings, data = settings_differ(existing, header), data_differ(existing, header)
    if settings or data:
        what = " and ".join(w for w, d in (("with other settings", settings), ("from other data", data)) if d)
        raise DataError(f"{out_dir}: a complete shard folder written {what} ({'; '.join(settings + data)}); "
                        f"replacing it would discard it: pass --overwrite (overwrite=True) to replace it, or "
                        f"write to another --output")


def data_differ(old: dict, new: dict) -> list[str]:
    """'input: old -> new' and 'classes: ...' where a folder's index and a new write read other data
    (an index written before inputs were recorded is compared by its classes only)."""
    out = []
    if old.get("input") is not None and old.get("input") != new.get("input"):
        out.append(f"input: {old.get('input') or 'your examples'} -> {new.get('input') or 'your examples'}")
    before, after = list(old.get("class_names") or []), list(new.get("class_names") or [])
    if before != after:
        out.append(f"classes: {_classes(before)} -> {_classes(after)}")
    return out


def _classes(names: list) -> str:
    return f"{len(names)} [{', '.join(names[:6])}{', ...' if len(names) > 6 else ''}]"


def settings_differ(old: dict, new: dict) -> list[str]:
    """'name: old -> new' for each setting that differs between two index headers.

    Inputs are not settings (files added or changed only update the folder), nor is a default
    num_shards (None: whatever the inputs give), nor what the old index does not record.
    """
    def flat(index: dict) -> dict:
        domain = index.get("domain") or {}
        out = {"format": index.get("format"), "label_key": index.get("label_key"),
               "num_shards": (index.get("plan") or {}).get("num_shards"), "seed": (index.get("plan") or {}).get("seed")}
        out.update({f"features.{k}": " ".join(map(str, (v.get("dtype"), v.get("shape"))))
                    for k, v in (index.get("features") or {}).items()})
        out.update({"domain": domain.get("name"), "store": domain.get("store")})
        out.update({k: v for k, v in (domain.get("config") or {}).items()})
        return out

    before, after = flat(old), flat(new)
    known = [k for k in sorted(set(before) | set(after))
             if (before.get(k) is not None and after.get(k) is not None) or k.startswith("features.")]
    return [f"{k}: {before.get(k)} -> {after.get(k)}" for k in known if before.get(k) != after.get(k)]


def _job(spec, prepared: Prepared, folder: OutputFolder, fmt, settings: dict) -> ShardJob:
    codec = prepared.codec
    examples = tuple(prepared.examples[i] for i in spec.examples) if prepared.files is None else ()
    # Where values vary in length, blocks are sized by the shard's mean example (your examples), or
    # by the first chunk the job featurizes (a domain's files: block_size 0).
    mean = int(np.mean([codec.bytes_of(e) for e in examples])) if examples and codec.variable else 0
    block = 0 if codec.variable and prepared.files else fmt.block_size(codec, len(spec.examples), mean)
    common = dict(spec=spec, out_dir=folder.root, work_dir=folder.work, format=fmt.name, block_size=block,
                  schema=codec.to_json(), label_key=codec.label_key, class_names=tuple(prepared.class_names))
    if prepared.files is None:  # your examples: positions are theirs
        return ShardJob(**common, key=input_key(settings, spec.file, prepared.identity), examples=examples,
                        labels=tuple(prepared.labels[i] for i in spec.examples))
    files = prepared.files
    positions = [files.good[i] for i in spec.examples]  # the plan counts checked inputs only
    return ShardJob(**common, key=input_key(settings, spec.file, [prepared.identity[p] for p in positions]),
                    paths=tuple(files.source.paths[p] for p in positions),
                    names=tuple(files.names[p] for p in positions),
                    labels=tuple(files.source.labels[p] for p in positions), inputs=files.inputs)


def _existing_index(out_dir: str) -> Optional[dict]:
    """The folder's index, or None (also when it is unreadable: it is about to be replaced)."""
    try:
        return index_lib.read_index(out_dir)
    except DataError:
        return None


def _shards_intact(out_dir: str, index: dict) -> bool:
    """Every listed shard has its indexed size (one stat each: the cheap check readers make too)."""
    paths = [fs.join(out_dir, s["file"]) for s in index["shards"]]
    problems = fs.parallel(lambda i: index_lib.size_problem(paths[i], index["shards"][i]["bytes"]), range(len(paths)),
                           remote=fs.is_remote(out_dir))
    return not any(problems)

