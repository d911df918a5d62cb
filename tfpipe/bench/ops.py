"""Per-op rates of any tf.data chain (`tfpipe bench --ops`), Plumber-style.

The chain is walked from source to output by `tfpipe.core.graph.walk` (the first input where
an op has several, e.g. zip): every op comes with its Python Dataset, the prefix "source .. this op". Each prefix is timed on one thread
(private threadpool of 1, no autotune, no static rewrites), so the difference between
consecutive prefixes is what the op adds per example. The op that limits the chain is
the one with the lowest capacity: 1000 / its added ms per example, times the cores when
it runs in parallel (a parallel map or interleave scales; a sequential one does not).

Measuring needs TensorFlow (imported inside the functions); OpRate and OpsReport are pure.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable

# Ops that turn examples into batches, and back.
BATCH_OPS = ("BatchDataset", "BatchDatasetV2", "PaddedBatchDataset", "PaddedBatchDatasetV2",
              "ParallelBatchDataset", "MapAndBatchDataset", "ExperimentalMapAndBatchDataset",
              "DenseToSparseBatchDataset", "ExperimentalDenseToSparseBatchDataset", "RaggedBatchDataset")
UNBATCH_OPS = ("UnbatchDataset", "ExperimentalUnbatchDataset")
_SKIPPED_OPS = ("OptionsDataset",)  # carries options only; replaced for timing anyway
_PASSES = 3  # counts per prefix, in passes over the whole chain
_MAX_EPOCH_FACTOR = 8  # a count grows to a whole epoch if that takes at most this many budgets


@dataclasses.dataclass(frozen=True)
class OpRate:
    """One op of the chain and the single-thread rate of the chain up to it.

    Attributes:
      op: the dataset op type, e.g. "ParallelMapDatasetV2".
      name: the name the user gave it (`ds.map(fn, name="decode")`), "" if none.
      rate: examples/s of source .. this op on one thread.
      parallel: the op runs its work on several threads (parallel map, interleave, batch).
      parallelism: threads it may use here (its num_parallel_calls, or the cores for AUTOTUNE).
      elements: elements per example out of this op (1 before a batch, 1 / batch size after it):
        how often the timing loop's own step is paid per example.
    """

    op: str
    name: str
    rate: float
    parallel: bool = False
    parallelism: int = 1
    elements: float = 1.0


@dataclasses.dataclass(frozen=True)
class OpsReport:
    """Per-op costs of one variant's final chain.

    Attributes:
      variant: the variant's name.
      ops: source first, each with the rate of the chain up to it.
      cores: cores a parallel op may use (AUTOTUNE ops are credited with all of them).
      rewrites: tf.data's static rewrites the chain's options leave on (REWRITES): when the chain
        runs, they may parallelize what the one-thread timing ran sequentially.
      loop_ms: what the timing loop itself costs per element taken (measured on a dataset that does
        nothing), taken out of every prefix's cost: else the source op would carry it (a
        Dataset.range "limiting" a chain) and a batch op, after which the loop runs once per batch,
        would look free.
    """

    variant: str
    ops: tuple[OpRate, ...]
    cores: int
    rewrites: tuple[str, ...] = ()
    loop_ms: float = 0.0

    @property
    def added_ms(self) -> tuple[float, ...]:
        """Milliseconds per example each op adds, over the costliest shorter prefix: a prefix timed
        faster than one before it (noise, or a prefetch thread overlapping the ops above it) adds
        nothing, and the op after it is not charged the difference."""
        costs = [max(0.0, 1000.0 / op.rate - self.loop_ms * op.elements) for op in self.ops]
        highest = [max(costs[:i], default=0.0) for i in range(len(costs))]
        return tuple(max(0.0, c - h) for c, h in zip(costs, highest))

    @property
    def capacities(self) -> tuple[float, ...]:
        """Examples/s each op alone could deliver: 1 / its cost, times its parallelism."""
        return tuple(1000.0 * op.parallelism / cost if cost > 0 else float("inf")
                     for op, cost in zip(self.ops, self.added_ms))

    @property
    def limiting(self) -> int:
        """Index of the op with the lowest capacity: the one that limits the chain."""
        caps = self.capacities
        return caps.index(min(caps))

    def label(self, i: int) -> str:
        """'ParallelMapDatasetV2 "decode"', or the op type alone when unnamed."""
        op = self.ops[i]
        return f'{op.op} "{op.name}"' if op.name else op.op

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON."""
        limiting = self.limiting
        return {"variant": self.variant, "cores": self.cores, "limiting": self.label(limiting),
                "rewrites": list(self.rewrites), "loop_ms_per_element": self.loop_ms,
                "ops": [{"op": op.op, "name": op.name, "examples_per_s": op.rate, "added_ms_per_example": cost,
                         "parallel": op.parallel, "parallelism": op.parallelism,
                         "capacity_examples_per_s": None if cap == float("inf") else cap,
                         "limits": i == limiting}
                        for i, (op, cost, cap) in enumerate(zip(self.ops, self.added_ms, self.capacities))]}

    def table_lines(self) -> list[str]:
        """The --ops section of the bench table."""
        from tfpipe.bench.text import align_table

        rows = [["op", "name", "examples/s", "ms/example added", "parallel", "alone: examples/s", ""]]
        limiting = self.limiting
        for i, (op, cost, cap) in enumerate(zip(self.ops, self.added_ms, self.capacities)):
            rows.append([op.op, op.name or "-", f"{op.rate:,.0f}", f"{cost:.3f}",
                         f"x{op.parallelism}" if op.parallel else "-", "-" if cap == float("inf") else f"{cap:,.0f}",
                         "<- limits the pipeline" if i == limiting else ""])
        return ([f"ops of {self.variant} (one thread; each row adds one op to the chain; parallel ops "
                 f"credited with up to {self.cores} cores):"]
                + ["  " + line for line in align_table(rows, right=range(2, 6))])


# tf.data's static rewrites that change how a chain runs (all on unless its options turn them off):
# a sequential map made parallel, a map fused with its batch into a parallel op, a prefetch added.
REWRITES = ("map_parallelization", "map_and_batch_fusion", "inject_prefetch")


def default_rewrites(ds: Any) -> tuple[str, ...]:
    """The REWRITES the dataset's options leave on (None: the default, on unless defaults are off)."""
    optimization = ds.options().experimental_optimization
    defaults = optimization.apply_default_optimizations is not False
    return tuple(r for r in REWRITES if getattr(optimization, r) or (getattr(optimization, r) is None and defaults))


def _parallelism(ds: Any, op: str, cores: int) -> tuple[bool, int]:
    """Whether the op works on several threads, and on how many here."""
    parallel = "Parallel" in op or "MapAndBatch" in op
    if not parallel:
        return False, 1
    calls = getattr(ds, "_num_parallel_calls", None)
    try:
        calls = int(calls) if calls is not None else -1
    except (TypeError, ValueError):
        calls = -1
    return True, cores if calls <= 0 else max(1, min(calls, cores))


def _examples_counter(batched: bool) -> Callable:
    """Step adding the examples in one element: 1, or a batch's leading dimension."""
    import tensorflow as tf

    def leading(x: Any) -> Any:
        if isinstance(x, tf.SparseTensor):
            return x.dense_shape[0]
        if isinstance(x, tf.RaggedTensor):
            return tf.cast(x.nrows(), tf.int64)
        return tf.shape(x, out_type=tf.int64)[0]

    def add(total, element):
        first = tf.nest.flatten(element)[0]
        if not batched or first.shape.rank == 0:  # a scalar: one example (a map after a batch may reduce it)
            return total + 1
        return total + leading(first)

    return add


def timing_options() -> Any:
    """One thread, no autotune, none of tf.data's static rewrites: each op runs as written."""
    import tensorflow as tf

    options = tf.data.Options()
    options.threading.private_threadpool_size = 1
    options.threading.max_intra_op_parallelism = 1
    options.autotune.enabled = False
    options.experimental_optimization.apply_default_optimizations = False
    options.experimental_optimization.map_parallelization = False
    return options


class _Counter:
    """Counts the examples of the next n elements of one long-lived iterator on one thread, timed.

    The iterator persists across counts, so start-up (a shuffle buffer's first fill, files
    opened) is paid once, untimed, and a count sees the chain in steady state. A finite
    chain (repeated here) is counted over at least one whole epoch where that fits in
    `_MAX_EPOCH_FACTOR` budgets, so once-per-epoch work (refilling a whole-set shuffle) is in it.
    """

    def __init__(self, ds: Any, batched: bool, per_element: int):
        import tensorflow as tf

        cardinality = int(ds.cardinality())
        self.epoch = cardinality if cardinality > 0 else 0  # elements; 0: endless or unknown
        self._iterator = iter(ds.repeat().with_options(timing_options()))
        add = _examples_counter(batched)

        @tf.function
        def count(iterator, n):
            total = tf.constant(0, tf.int64)
            for _ in tf.range(n):
                total = add(total, iterator.get_next())
            return total

        self._count = count
        self._scale = 1 if batched else per_element
        self.n = 16
        self.best = float("inf")  # seconds of the fastest count of n
        self.examples = 0
        self.elements_per_example = 1.0

    def count(self, n: int) -> float:
        """Seconds to take the next n elements; records the examples they held."""
        import tensorflow as tf

        start = time.perf_counter()
        self.examples = int(self._count(self._iterator, tf.constant(n, tf.int64))) * self._scale
        self.elements_per_example = n / self.examples if self.examples else 1.0
        return time.perf_counter() - start

    def calibrate(self, seconds: float) -> None:
        """Grows n until one count takes `seconds` (after one count that traces and fills buffers)."""
        self.count(2)
        while True:
            elapsed = self.count(self.n)
            if elapsed >= seconds or self.n >= 1 << 22:
                break
            self.n = max(2 * self.n, int(self.n * seconds / max(elapsed, 1e-4)))
        if not self.examples:
            raise ValueError("the dataset yields no elements")
        if self.n < self.epoch <= self.n * _MAX_EPOCH_FACTOR:
            self.n = self.epoch
            elapsed = self.count(self.n)
        self.best = elapsed

    def time(self) -> None:
        """One more count of n; keeps the fastest (other processes only ever make a count slower)."""
        self.best = min(self.best, self.count(self.n))

    @property
    def rate(self) -> float:
        """Examples/s of the fastest count."""
        return self.examples / self.best


def examples_per_s(ds: Any, budget_s: float, *, batched: bool = False, per_element: int = 1) -> float:
    """Examples/s of `ds` on one thread, counted in-graph (no Python per element): best of three.

    Args:
      ds: the dataset; repeated, so a finite one is timed over its epochs.
      budget_s: about how long the measurement may take.
      batched: elements are batches: count each batch's leading dimension.
      per_element: examples per element when not `batched`.

    Raises:
      ValueError: the dataset yields nothing.
    """
    counter = _Counter(ds, batched, per_element)
    counter.calibrate(budget_s / 3)
    counter.time()
    counter.time()
    return counter.rate


def one_thread_rate(ds: Any, per_element: int, budget_s: float) -> float:
    """Examples/s of `ds` on one thread, `per_element` examples per element (the stage breakdown)."""
    return examples_per_s(ds, budget_s, per_element=per_element)


def measure_ops(ds: Any, budget_s: float, cores: int, variant: str = "") -> OpsReport:
    """Times every prefix of `ds`'s op chain on one thread.

    Args:
      ds: any tf.data.Dataset (the final chain a variant iterates).
      budget_s: time budget per prefix.
      cores: cores a parallel op may use.
      variant: the name the report carries.

    Returns:
      OpsReport, source first.

    Raises:
      ValueError: a prefix yields nothing, naming the op.
    """
    from tfpipe.core.graph import walk  # TensorFlow only where measuring: the reports stay pure

    nodes, counters, batched, previous = [], [], False, ""
    for node in walk(ds):
        batched = (batched or node.op in BATCH_OPS or _windows(node, previous)) and node.op not in UNBATCH_OPS
        previous = node.op
        if node.op in _SKIPPED_OPS or node.dataset is None:
            continue  # options only, or an op tf.data adds itself: its cost shows in the next prefix
        counter = _Counter(node.dataset, batched, 1)
        try:
            counter.calibrate(budget_s / _PASSES)
        except ValueError as e:
            raise ValueError(f"{variant}: op {node.op} {node.name!r}: {e}") from None
        nodes.append(node)
        counters.append(counter)
    loop = _Counter(_idle_dataset(), False, 1)  # the timing loop's own cost per element
    loop.calibrate(budget_s / _PASSES)
    # Passes over all prefixes, best of each: a slow spell on a shared machine hits one
    # count of every prefix alike instead of all counts of one prefix.
    for _ in range(_PASSES - 1):
        for counter in counters + [loop]:
            counter.time()
    rates = tuple(OpRate(node.op, node.name, counter.rate, *_parallelism(node.dataset, node.op, cores),
                         elements=counter.elements_per_example)
                  for node, counter in zip(nodes, counters))
    return OpsReport(variant, rates, cores, default_rewrites(ds), loop_ms=1000.0 / loop.rate)


def _windows(node: Any, previous: str) -> bool:
    """The train order's step (a range of epochs, flat-mapped) handing on windows of records: each
    element holds as many examples as its leading dimension (file elements are scalars: one each)."""
    import tensorflow as tf

    if node.op != "FlatMapDataset" or previous != "RangeDataset" or node.dataset is None:
        return False
    first = tf.nest.flatten(node.dataset.element_spec)[0]
    return first.shape.rank is not None and first.shape.rank >= 1


def _idle_dataset() -> Any:
    """A dataset whose elements cost next to nothing: what timing it measures is the timing loop."""
    import tensorflow as tf

    return tf.data.Dataset.from_tensors(tf.constant(0, tf.int64)).repeat()

