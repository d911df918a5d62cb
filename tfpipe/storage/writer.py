"""write_shards: any domain's files, or your own examples, into a clean, verified shard folder.

  1. find the inputs; a rerun of the same command on a complete folder returns at once;
  2. check every input up front (domain files: header check, or a trial decode) and name
     every bad one with its reason before anything is written;
  3. plan (pure, seeded), invalidate the old index, remove shards of an earlier plan;
  4. write each shard atomically (tfpipe.storage.shard_job) in this process, in worker
     processes (tfpipe.storage.workers), or with Apache Beam (tfpipe.storage.beam);
  5. write tfpipe.json last and remove the work subfolder.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from tfpipe.errors import DataError
from tfpipe.storage import index as index_lib
from tfpipe.storage.codec import RecordCodec, check_all
from tfpipe.storage.folder import OutputFolder
from tfpipe.storage.formats import default_format, get_format
from tfpipe.storage.plan import default_num_shards, default_workers, plan_shards
from tfpipe.storage.shard_job import PATH_KEY, DomainInputs, ShardJob, file_identity, input_key, reject_reason

RUNNERS = ("local", "beam")
_MAX_LISTED = 10  # bad inputs named in one error message


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
        of example dicts (numpy arrays of fixed shape and dtype, bytes, str, int, float, bool).
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
        beam_options (Beam pipeline options, e.g. "--runner=FlinkRunner ..."), progress (bool).

    Returns:
      The index written to out_dir/tfpipe.json.

    Raises:
      ValueError: bad arguments. DataError: unreadable inputs (each named), a folder holding
        another split, another writer on the same folder, a full disk.
    """
    return write_shards_with_stats(data, out_dir, num_shards, num_workers, features, store, split, seed,
                                   on_error, dtype, worker_index, num_hosts, **kwargs)[0]


def write_shards_with_stats(data: Any, out_dir: Any, num_shards: Optional[int] = None,
                            num_workers: Optional[int] = None, features: Any = None, store: Optional[str] = None,
                            split: str = "train", seed: int = 0, on_error: str = "fail",
                            dtype: Optional[str] = None, worker_index: int = 0, num_hosts: int = 1, *,
                            format: Optional[str] = None, label_key: Optional[str] = "label",
                            schema: Optional[Mapping[str, Any]] = None, runner: str = "local",
                            beam_options: Any = None, progress: bool = True) -> tuple[dict, WriteStats]:
    """`write_shards`, also returning WriteStats (for the CLI's summary)."""
    start = time.perf_counter()
    _check_args(num_shards, num_workers, on_error, dtype, worker_index, num_hosts, runner, format)
    out_dir = os.path.abspath(os.fspath(out_dir))
    examples = _user_examples(data)
    if examples is not None:
        prepared = _prepare_examples(examples, label_key, schema, dtype)
    else:
        prepared = _prepare_domain(data, out_dir, features, store, on_error, dtype or "float16")
    codec, fmt = prepared["codec"], get_format(format or default_format(prepared["codec"]))
    header = {"format": fmt.name, "split": split, "class_names": list(prepared["class_names"]),
              "label_key": codec.label_key, "label_names": codec.label_names, "features": codec.to_json(),
              "domain": prepared["domain"]}
    settings = {**header, "on_error": on_error, "num_shards": num_shards, "seed": seed}
    chosen = {}

    with OutputFolder(out_dir, split) as folder:
        existing = _existing_index(out_dir)
        folder.check_split(existing)
        run_key = input_key(settings, prepared["identity"])
        if existing is not None and existing.get("key") == run_key and _shards_intact(out_dir, existing):
            elapsed = time.perf_counter() - start  # the same command on a complete folder: nothing to do
            return existing, WriteStats(elapsed, elapsed, 0.0, 0, len(existing["shards"]), len(existing["shards"]),
                                        complete=True)
        if prepared["inputs"] is not None:
            prepared.update(_check_inputs(prepared["source"], prepared["names"], prepared["offline"]))
        _fail_on_rejected(prepared, on_error)
        labels = prepared["labels"]
        n = len(labels) + len(prepared["rejected"])
        if num_shards is None:
            num_shards = default_num_shards(len(labels), codec.example_bytes)
            chosen["num_shards"] = f"{num_shards} (default: min(16, examples), more above 256 MiB a shard)"
        plan = plan_shards(labels, num_shards, seed=seed, split=split)
        if num_workers is None:
            num_workers = default_workers(len(labels), num_shards) if prepared["inputs"] else 0
            chosen["num_workers"] = f"{num_workers} (default: by corpus size, {len(labels):,} examples)"
        folder.invalidate_index()  # before the first shard is replaced: never an old index over new shards
        folder.remove_strays(spec.file for spec in plan)
        jobs = [_job(spec, prepared, folder, fmt, codec, settings) for spec in plan]
        if runner == "beam":
            from tfpipe.storage.beam import run_beam

            ready = time.perf_counter()
            manifests = run_beam(jobs, beam_options)
        else:
            from tfpipe.storage.workers import run_jobs

            manifests, ready = run_jobs(jobs, num_workers if prepared["inputs"] else 0, progress)
        done = time.perf_counter()
        rejected = prepared["rejected"] + [r for m in manifests for r in m["rejected"]]
        index = index_lib.make_index({**header, "plan": {"num_shards": num_shards, "seed": seed},
                                      "key": run_key}, manifests, rejected)
        index_lib.check_counts(index, n)
        folder.finish(index)
    resumed = sum(m["resumed"] for m in manifests)
    processed = sum(len(j.spec.examples) for j, m in zip(jobs, manifests) if not m["resumed"])
    return index, WriteStats(time.perf_counter() - start, ready - start, done - ready, processed, resumed,
                             len(jobs), num_workers if runner == "local" else 0, chosen=chosen)


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


# --- inputs -----------------------------------------------------------------------------------

def _user_examples(data: Any) -> Optional[list]:
    """The examples as a list when `data` is an iterable of dicts; None for a domain's files."""
    if isinstance(data, (str, bytes, os.PathLike)) or hasattr(data, "chain_input"):
        return None
    if isinstance(data, tuple) and len(data) == 2 and not isinstance(data[0], Mapping):
        return None  # (paths, labels)
    items = data if isinstance(data, list) else list(data)
    if items and isinstance(items[0], Mapping):
        return items
    if not items:
        raise ValueError("write_shards got no examples (an empty iterable)")
    return None if isinstance(items[0], (str, os.PathLike)) else items


def _prepare_examples(examples: list, label_key: Optional[str], schema: Optional[Mapping[str, Any]],
                      dtype: Optional[str]) -> dict:
    """Your examples: schema inferred (or given) and checked on every example; labels and class names."""
    if schema is not None:
        fields = {k: (v if hasattr(v, "dtype") and hasattr(v, "shape") and not isinstance(v, tuple)
                      else _field(k, v)) for k, v in schema.items()}
        codec = RecordCodec(fields, label_key)
    else:
        codec = RecordCodec.infer(examples[0], label_key)
    check_all(codec, examples)
    raw = [e[label_key] for e in examples] if label_key else [0] * len(examples)
    if all(isinstance(v, (int,)) or (hasattr(v, "dtype") and getattr(v, "dtype").kind in "iu") for v in raw):
        ids = [int(v) for v in raw]
        if min(ids) < 0:
            raise DataError(f"example {ids.index(min(ids))}: label {min(ids)}: label ids must be >= 0")
        names = tuple(str(i) for i in range(max(ids) + 1))
    else:
        text = [v.decode() if isinstance(v, bytes) else str(v) for v in raw]
        names = tuple(sorted(set(text)))
        ids = [names.index(t) for t in text]
    stored = codec.with_storage_dtype(dtype)
    identity = input_key(None, [stored.encode([e], [l], [names[l]]).hex() for e, l in zip(examples, ids)])
    return {"codec": stored, "labels": ids, "class_names": names, "domain": None, "rejected": [],
            "examples": examples, "inputs": None, "identity": identity, "bad": []}


def _field(key: str, value: Any):
    from tfpipe.storage.codec import Field

    try:
        dtype, shape = value
        return Field(np.dtype(dtype).name if dtype not in ("bytes", "str") else dtype, tuple(shape))
    except (TypeError, ValueError) as e:
        raise ValueError(f"schema[{key!r}]={value!r}: expected (dtype, shape), e.g. ('float32', (64,)) ({e})") from None


def _prepare_domain(data: Any, out_dir: str, features: Any, store: Optional[str], on_error: str,
                    dtype: str) -> dict:
    """A domain's files: found, checked up front (every bad one named), identity for resume."""
    from tfpipe.core.source import find, folder, get_domain

    source = find(data)
    if getattr(source, "index", None) is not None or not getattr(source, "domain", ""):
        what = "already a shard folder" if getattr(source, "index", None) is not None else "no built-in domain"
        raise ValueError(f"{source.root}: {what}; write_shards needs a domain's files (a folder with one "
                         f"subfolder per class, or a CSV) or an iterable of example dicts")
    base = os.path.abspath(folder(source.root)) if source.root else ""
    if base and out_dir == base:
        raise ValueError(f"{out_dir}: the output folder is the input folder; its tfpipe.json would turn the "
                         f"input folder into a shard folder. Pick another --output")
    domain = get_domain(source.domain)
    config = domain.config(features)
    store = store or domain.stores()[0]
    if store not in domain.stores():
        raise ValueError(f"store={store!r}: the {domain.name} domain stores {', '.join(map(repr, domain.stores()))}")
    offline = domain.offline(config, store)
    prefix = os.path.join(base, "") if base else ""
    names = [p[len(prefix):] if prefix and p.startswith(prefix) else p for p in source.paths]
    declared = {k: {"dtype": d, "shape": list(s)} for k, (d, s) in offline.schema.fields.items()}
    codec = RecordCodec.from_json({**declared, PATH_KEY: {"dtype": "bytes", "shape": []}}).with_storage_dtype(dtype)
    identity = [(name, label, *file_identity(p)) for name, label, p in zip(names, source.labels, source.paths)]
    return {"codec": codec, "source": source, "names": names, "offline": offline,
            "class_names": source.class_names, "identity": identity,
            "inputs": DomainInputs(domain.name, config, store, on_error),
            "domain": {"name": domain.name, "store": store, "config": dataclasses.asdict(config),
                       "features": declared}}


def _check_inputs(source, names: Sequence[str], offline) -> dict:
    """Every input checked once, up front: header check (offline.check) or a trial load."""
    check = getattr(offline, "check", None) or offline.load
    seen: dict = {}
    good, bad = [], []
    for i, (path, name) in enumerate(zip(source.paths, names)):
        real = os.path.realpath(path)
        if real in seen:
            bad.append((i, f"{path}: listed twice (also as {names[seen[real]]}); remove one of the entries"))
            continue
        seen[real] = i
        try:
            check(path)
            good.append(i)
        except DataError as e:
            bad.append((i, str(e)))
        except OSError as e:  # a broken or looping link, a file that vanished
            bad.append((i, f"{path}: unreadable ({e.strerror or e})"))
    rejected = [{"path": names[i], "reason": reject_reason(why, source.paths[i])} for i, why in bad]
    return {"good": good, "bad": bad, "rejected": rejected, "labels": [source.labels[i] for i in good]}


def _fail_on_rejected(prepared: dict, on_error: str) -> None:
    """on_error='fail': DataError listing every bad input with its reason, before anything is written."""
    bad = prepared.get("bad") or []
    if bad and on_error == "fail":
        listed = "\n  ".join(why for _, why in bad[:_MAX_LISTED])
        more = f"\n  ... and {len(bad) - _MAX_LISTED} more" if len(bad) > _MAX_LISTED else ""
        total = len(prepared["labels"]) + len(bad)
        raise DataError(f"{len(bad)} of {total} input files cannot be used; nothing was written:\n  {listed}{more}\n"
                        f"Fix or remove them, or rerun with --on_error=skip (on_error='skip') to write the "
                        f"others and list these in tfpipe.json's rejected")


def _job(spec, prepared: dict, folder: OutputFolder, fmt, codec: RecordCodec, settings: dict) -> ShardJob:
    block = fmt.block_size(codec, len(spec.examples))
    common = dict(spec=spec, out_dir=folder.root, work_dir=folder.work, format=fmt.name, block_size=block,
                  schema=codec.to_json(), label_key=codec.label_key, class_names=tuple(prepared["class_names"]))
    if prepared["inputs"] is None:  # your examples: positions are theirs
        examples = prepared["examples"]
        return ShardJob(**common, key=input_key(settings, spec.file, prepared["identity"]),
                        examples=tuple(examples[i] for i in spec.examples),
                        labels=tuple(prepared["labels"][i] for i in spec.examples))
    source, good = prepared["source"], prepared["good"]
    positions = [good[i] for i in spec.examples]  # the plan counts checked inputs only
    return ShardJob(**common, key=input_key(settings, spec.file, [prepared["identity"][p] for p in positions]),
                    paths=tuple(source.paths[p] for p in positions),
                    names=tuple(prepared["names"][p] for p in positions),
                    labels=tuple(source.labels[p] for p in positions), inputs=prepared["inputs"])


def _existing_index(out_dir: str) -> Optional[dict]:
    """The folder's index, or None (also when it is unreadable: it is about to be replaced)."""
    try:
        return index_lib.read_index(out_dir)
    except DataError:
        return None


def _shards_intact(out_dir: str, index: dict) -> bool:
    """Every listed shard has its indexed size (one stat each: the cheap check readers make too)."""
    return all(not index_lib.size_problem(os.path.join(out_dir, s["file"]), s["bytes"]) for s in index["shards"])

