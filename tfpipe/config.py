"""Frozen, validated configs: what the pipeline does and which features it makes.

Every field carries its help text and allowed range in `metadata`, so validation
here and the absl flags in `tfpipe.flags` come from one place.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Optional


def config_field(default: Any, help: str, **limits: Any) -> Any:
    """A dataclass field whose help and limits (min, max, choices) drive checks and flags."""
    return dataclasses.field(default=default, metadata={"help": help, **limits})


def field_type(f: dataclasses.Field) -> type:
    """bool, int, float or str: a config field's value type (optional fields name it in metadata)."""
    return type(f.default) if f.default is not None else f.metadata.get("type", float)


def validate(config: Any) -> None:
    """Raise ValueError naming the field, its value and the allowed range."""
    name = type(config).__name__
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        meta = f.metadata
        if value is None and f.default is None:
            continue
        kind = field_type(f)
        if kind is float:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        elif kind is int:
            ok = isinstance(value, int) and not isinstance(value, bool)
        else:
            ok = isinstance(value, kind)
        if not ok:
            raise ValueError(f"{name}.{f.name}={value!r}: expected {kind.__name__}")
        if "choices" in meta and value not in meta["choices"]:
            raise ValueError(f"{name}.{f.name}={value!r}: allowed values are {', '.join(map(repr, meta['choices']))}")
        if "min" in meta and value < meta["min"]:
            raise ValueError(f"{name}.{f.name}={value!r}: must be >= {meta['min']}")
        if "max" in meta and value > meta["max"]:
            raise ValueError(f"{name}.{f.name}={value!r}: must be <= {meta['max']}")


@dataclasses.dataclass(frozen=True)
class PipelineConfig:
    """How the tf.data chain is built: one field per optimization.

    Attributes:
      repeat_before_shuffle: repeat the file list first, so shuffling never stalls
        to refill at epoch ends (off: shuffle, then repeat after batching).
      shuffle_filenames: shuffle the cheap path/shard list before reading (off:
        shuffle decoded examples in a buffer of `shuffle_buffer`).
      fuse_maps: one map does read+decode+features (off: separate maps).
      parallel_map: maps run with num_parallel_calls=AUTOTUNE (off: sequential).
      parallel_reads: shard files are read by a parallel interleave (off: one by one).
      vectorize: batch first, then decode/parse and compute features on whole batches.
      prefetch: prefetch(AUTOTUNE) at the end so input overlaps the train step.
      deterministic: keep element order in parallel maps (train only; eval is always ordered).
      cache: "" (off), "memory", a file path, or "snapshot:DIR": cache one epoch of read
        examples before repeat. Memory and file caches live as long as the dataset (an
        Estimator rebuilds it at every input_fn call); a snapshot survives input_fn calls
        and restarts, and is used only when it was finished by the same pipeline.
      prefetch_to_device: batches land on the accelerator ahead of the step where a GPU is
        visible: for Keras the chain ends in prefetch_to_device("/gpu:0"); an Estimator gets
        it from a MirroredStrategy (tfpipe.estimator.train_distribute), whose
        MultiDeviceIterator prefetches each replica's batch onto its device.
      batch_size: examples per batch (per input pipeline / replica).
      shuffle_buffer: examples held by the example-level shuffle; 0 = the whole set.
      seed: shuffle seed (None: a fresh order every run).
      drop_remainder: drop the last partial batch in train (eval always keeps it).
      cycle_length: shard files read at once by the interleave; 0 = tf.data.AUTOTUNE, which
        follows the usable cores (a fixed 4 stopped shard reads scaling on 16 cores).
      data_service: "grpc://host:port" of a tf.data service dispatcher ("" = local).
      data_service_mode: "distributed_epoch" (each example once per epoch across
        consumers) or "parallel_epochs" (each worker produces the whole dataset).
      data_service_job: shared job name so several consumers split one job ("" = own job).
      shuffle_blocks: train on v2 shard blocks: shuffle whole blocks, then permute the examples
        of a window of blocks in one op and cut batches from it, so no example crosses tf.data
        on its own (off: un-block, then an example-level shuffle buffer).
      bucket_boundaries: lengths at which variable-length examples are batched separately
        (tf.data's bucket_by_sequence_length): each batch is padded only to the longest of its
        bucket; () = off: one padded_batch pads every batch to its longest example.
      bucket_key: the feature whose leading dimension is an example's length ("": the one
        feature whose length varies).
      group_maps: the per-example map runs on groups of `group_size` examples, one function call
        per group with the stages unrolled inside: tf.data's fixed cost per element (its call, its
        hand-offs between threads, ~10 µs) is paid once per group, while groups still spread over
        every core (train streams whose per-example stages give fixed shapes; off: one call per
        example).
      group_size: examples per call of a grouped map.
      reuse_memory: glibc's malloc keeps freed large buffers (up to 1 GiB) for the next batch
        instead of returning them to the kernel and faulting their pages in again for every
        batch (tfpipe.core.memory). Process-wide once a pipeline with it is built; the
        process's resident size then stays near its peak.
    """

    repeat_before_shuffle: bool = config_field(True, "Repeat before shuffling (no refill stall at epoch ends).")
    shuffle_filenames: bool = config_field(True, "Shuffle the file list instead of decoded examples.")
    fuse_maps: bool = config_field(True, "Fuse read, decode and features into one map.")
    parallel_map: bool = config_field(True, "Run maps with num_parallel_calls=AUTOTUNE.")
    parallel_reads: bool = config_field(True, "Read shard files with a parallel interleave.")
    vectorize: bool = config_field(True, "Batch first, then decode/parse and compute on whole batches.")
    prefetch: bool = config_field(True, "prefetch(AUTOTUNE) at the end of the chain.")
    deterministic: bool = config_field(False, "Keep element order in parallel train maps.")
    cache: str = config_field("", "Cache read examples: '' (off), 'memory', a file path, or 'snapshot:DIR' "
                               "(survives input_fn calls and restarts).")
    prefetch_to_device: bool = config_field(True, "Batches land on the accelerator ahead of the step: Keras via "
                                            "prefetch_to_device, Estimator via tfpipe.estimator.train_distribute "
                                            "(no-op without a GPU).")
    batch_size: int = config_field(64, "Examples per batch.", min=1, max=1 << 20)
    shuffle_buffer: int = config_field(1024, "Example shuffle buffer (0 = whole dataset).", min=0)
    seed: Optional[int] = config_field(None, "Shuffle seed (unset: new order each run).", min=0, type=int)
    drop_remainder: bool = config_field(True, "Drop the last partial batch in train mode.")
    cycle_length: int = config_field(0, "Shard files read concurrently (0: as many as usable cores, AUTOTUNE).",
                               min=0, max=1024)
    data_service: str = config_field("", "tf.data service dispatcher address, e.g. grpc://localhost:5050.")
    data_service_mode: str = config_field("distributed_epoch", "tf.data service processing mode.",
                                    choices=("distributed_epoch", "parallel_epochs"))
    data_service_job: str = config_field("", "tf.data service job name shared by consumers.")
    shuffle_blocks: bool = config_field(True, "Shard blocks: shuffle whole blocks and permute a window of examples "
                                              "at once (off: un-block, then an example shuffle buffer).")
    bucket_boundaries: tuple = config_field((), "Lengths at which variable-length examples are batched separately, "
                                                "e.g. 50,100,200 (empty: one padded_batch).")
    bucket_key: str = config_field("", "Feature whose leading dimension is an example's length (empty: the one "
                                       "that varies).")
    group_maps: bool = config_field(True, "Run the per-example map on groups of group_size examples (one call "
                                          "per group, stages unrolled): tf.data's fixed cost paid once per group.")
    group_size: int = config_field(8, "Examples per call of a grouped per-example map.", min=2, max=256)
    reuse_memory: bool = config_field(True, "Keep freed large buffers for the next batch (glibc malloc) instead of "
                                            "faulting their pages in again every batch. Process-wide: resident "
                                            "memory then stays near its peak (measured: a 408 MiB live peak held "
                                            "591 MiB after everything was freed, 50 MiB without).")

    def __post_init__(self):
        object.__setattr__(self, "bucket_boundaries", _lengths(self.bucket_boundaries))
        validate(self)
        if self.data_service and "://" not in self.data_service:
            raise ValueError(f"PipelineConfig.data_service={self.data_service!r}: expected 'grpc://HOST:PORT'")
        if self.cache.startswith("snapshot:") and not self.cache.removeprefix("snapshot:").strip():
            raise ValueError(f"PipelineConfig.cache={self.cache!r}: name the snapshot folder, e.g. "
                             f"'snapshot:/tmp/tfpipe-cache' (an empty name would write into the current folder)")

    @classmethod
    def optimized(cls, **overrides: Any) -> "PipelineConfig":
        """repeat -> shuffle filenames -> fused parallel map -> batch -> prefetch, vectorized."""
        return cls(**overrides)

    @classmethod
    def naive(cls, **overrides: Any) -> "PipelineConfig":
        """The seed question's chain: map(read) -> shuffle(all) -> map(post) -> batch -> repeat."""
        off = dict(repeat_before_shuffle=False, shuffle_filenames=False, fuse_maps=False,
                   parallel_map=False, parallel_reads=False, vectorize=False, prefetch=False,
                   deterministic=True, cache="", prefetch_to_device=False, shuffle_buffer=0,
                   shuffle_blocks=False, group_maps=False, reuse_memory=False)
        return cls(**{**off, **overrides})

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> "PipelineConfig":
        """`optimized` or `naive` by name."""
        if name not in PRESETS:
            raise ValueError(f"pipeline preset {name!r}: allowed values are {', '.join(PRESETS)}")
        return getattr(cls, name)(**overrides)


def _lengths(value: Any) -> Any:
    """bucket_boundaries as a tuple of increasing positive ints, from a sequence or 'a,b,c' text."""
    if isinstance(value, str):
        value = [v for v in value.replace(" ", "").split(",") if v]
    if not isinstance(value, (list, tuple)):
        return value  # validate() names the type
    try:
        lengths = tuple(int(v) for v in value)
    except (TypeError, ValueError):
        raise ValueError(f"PipelineConfig.bucket_boundaries={value!r}: expected whole numbers, e.g. (50, 100, 200)")
    if any(b <= 0 for b in lengths) or list(lengths) != sorted(set(lengths)):
        raise ValueError(f"PipelineConfig.bucket_boundaries={value!r}: must be positive and strictly increasing")
    return lengths


PRESETS = ("optimized", "naive")

# Boolean PipelineConfig fields that switch one optimization on or off.
TOGGLES = tuple(f.name for f in dataclasses.fields(PipelineConfig)
                if isinstance(f.default, bool) and f.name != "drop_remainder")

