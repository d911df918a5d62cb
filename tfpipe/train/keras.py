"""Keras conveniences: a train/validation split over the same files, and "is fit() waiting on input?".

`split_datasets` holds out a stable share of the files (a hash of each path, the split the
estimator_demo uses) and builds both datasets with tfpipe's chain. `InputWaitCallback`
measures, per epoch, how much of `fit`'s step time waits for the next batch.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Optional

import tensorflow as tf

from tfpipe.config import PipelineConfig
from tfpipe.core.chain import build_dataset
from tfpipe.core.source import find
from tfpipe.train import wait
from tfpipe.train.wait import WaitStats


def split_datasets(data: Any, validation_split: float = 0.2, pipeline: Optional[PipelineConfig] = None,
                   features: Any = None, *, epochs: Optional[int] = 1,
                   **kwargs: Any) -> tuple[tf.data.Dataset, tf.data.Dataset]:
    """`(train_ds, val_ds)` for `model.fit(train_ds, validation_data=val_ds)`, split by file.

    A file goes to validation when a hash of its path (relative to the data's folder) falls
    below `validation_split`, so it stays on the same side on every run and machine, and
    adding files never moves the others (unlike `image_dataset_from_directory`'s split of
    a shuffled list, which needs the same seed every time).

    Args:
      data: files build_dataset reads one example per file from: a class folder, a CSV
        manifest, a glob, `(paths, labels)` or a FileSource. A shard folder is split
        when written: prepare train and eval shards and pass each to build_dataset.
      validation_split: the share of files held out, between 0 and 1.
      pipeline: PipelineConfig for both (validation is one ordered pass whatever it says).
      features: the domain's config (AudioConfig, ImageConfig).
      epochs: passes over the training files per dataset iteration: 1 (default) makes
        each fit epoch one shuffled pass; None is endless (then pass steps_per_epoch).
      **kwargs: build_dataset's keyword arguments (feature_key=, read=, process=, ...).

    Returns:
      (train, validation) datasets: train shuffled, validation every held-out example once.

    Raises:
      ValueError: a source with no files to split, too few files to hold any out, or a
        validation_split outside (0, 1).
    """
    if not 0.0 < validation_split < 1.0:
        raise ValueError(f"split_datasets(validation_split={validation_split!r}): must be between 0 and 1, the share "
                         f"of files held out for validation (e.g. 0.2)")
    source = find(data)
    if not hasattr(source, "split"):
        raise ValueError(f"split_datasets: {getattr(source, 'root', data)!r} is a {source.kind} source, which "
                         f"cannot be split by file; write separate train and validation data (e.g. tfpipe prepare "
                         f"on each half) and pass each to tfpipe.build_dataset")
    train, held_out = source.split(validation_split)
    return (build_dataset(train, "train", pipeline, features, epochs=epochs, **kwargs),
            build_dataset(held_out, "eval", pipeline, features, **kwargs))


class InputWaitCallback(tf.keras.callbacks.Callback):
    """`model.fit(ds, callbacks=[InputWaitCallback()])`: examples/s and input wait, per epoch.

    How it measures: the time between `on_train_batch_end` and the next
    `on_train_batch_begin` is not the wait (the batch is fetched inside the compiled train
    function, and with `steps_per_execution` several batches per call). So for the
    duration of `fit` the callback runs the model's own train function with each batch
    fetch timed inside the graph: a `tf.timestamp` right before the iterator's get_next,
    one right after it delivered the batch, their difference summed per call in a
    variable. Every step of a `steps_per_execution` call is timed, each replica's batch
    under a distribution strategy. Step time is the training loop's wall time per call
    of the train function, callbacks included, within an epoch (validation and
    epoch-end callbacks are not steps); calls that traced the function are not counted.
    After `fit` the model's train function is the original again.

    It cannot see input preprocessing inside the model (Keras preprocessing layers run
    in the step: compute), and it measures nothing under a ParameterServerStrategy
    coordinator or a custom `make_train_function` (it says so).

    Args:
      log_dir: write `tfpipe/input_wait_share` and `tfpipe/examples_per_sec` per epoch as
        TensorBoard scalars there (None: no summaries).
      report: where the per-epoch line and the verdict go (default: INFO on the 'tfpipe' logger).
      data: the folder (CSV, shard folder) tfpipe's chain reads, for the `tfpipe bench --data`
        command the verdict suggests (unset: it suggests timing your own function, `--dataset_fn`).

    Attributes:
      stats: WaitStats of every epoch of every `fit` with this callback.
      epochs: WaitStats per epoch, in order.
    """

    def __init__(self, log_dir: Optional[str] = None, report: Optional[Callable[[str], None]] = None, *,
                 data: Optional[str] = None):
        super().__init__()
        self.log_dir = log_dir
        self._report = wait.reporter(report)
        self.context = wait.WaitContext(data=data or "")  # CPU only? is known when fit starts
        self._began = False
        self.stats = WaitStats()
        self.epochs: list[WaitStats] = []
        self._writer = None
        self._timed: Optional[_TimedTrainFunction] = None

    def summary(self) -> str:
        """The closing line: throughput and the verdict, or why no step was measured."""
        steps_run = sum(e.steps for e in self.epochs)
        return wait.summary_line(self.stats, self.context, unmeasured=wait.why_unmeasured(self._began, steps_run, 0))

    def on_train_begin(self, logs=None):
        self.context = dataclasses.replace(self.context, cpu_only=wait.cpu_only())
        self._began = True
        model = self.model
        if isinstance(model.train_function, _TimedTrainFunction):  # left by a fit that raised
            model.train_function = model.train_function.original
        body = _train_function_body(model)
        if body is None:
            self._timed = None
            self._report("InputWaitCallback: this model's train function cannot be timed (a ParameterServerStrategy "
                         "coordinator or a custom make_train_function); input wait is not measured")
            return
        self._timed = _TimedTrainFunction(body, model.distribute_strategy, model.train_function,
                                          compiled=not model.run_eagerly)
        model.train_function = self._timed
        if self.log_dir and self._writer is None:
            self._writer = tf.summary.create_file_writer(self.log_dir)

    def on_epoch_begin(self, epoch, logs=None):
        if self._timed:
            self._timed.new_epoch()

    def on_epoch_end(self, epoch, logs=None):
        if not self._timed:
            return
        stats = self._timed.new_epoch()
        self.epochs.append(stats)
        self.stats += stats
        self._report(wait.progress_line(f"epoch {epoch + 1}", stats))
        if self._writer is not None and stats.steps:
            with self._writer.as_default():
                tf.summary.scalar("tfpipe/input_wait_share", stats.input_wait_share, step=epoch)
                tf.summary.scalar("tfpipe/examples_per_sec", stats.examples_per_second, step=epoch)
            self._writer.flush()

    def on_train_end(self, logs=None):
        if self._timed:
            self.model.train_function = self._timed.original
            self._timed = None
            self._report(self.summary())


def _train_function_body(model: tf.keras.Model) -> Optional[Callable]:
    """The Python function behind `model.train_function` (Keras's own), or None when it is not Keras's."""
    if getattr(model, "_cluster_coordinator", None) is not None:
        return None
    if model.run_eagerly:
        return model.train_function
    compiled = getattr(model, "train_tf_function", None)
    if compiled is None or model.train_function is not compiled:
        return None
    return compiled.python_function


class _TimedTrainFunction:
    """Keras's train function over an iterator whose get_next is timed in the graph."""

    def __init__(self, body: Callable, strategy: tf.distribute.Strategy, original: Callable, compiled: bool):
        self.original = original  # what model.train_function was
        # Keras's loop over steps_per_execution needs AutoGraph, which a tf.function applies only
        # to the function it wraps, not to Keras code that one calls.
        self._body = tf.autograph.to_graph(body) if compiled else body
        self._strategy = strategy
        # [wait seconds, steps, examples] of the current call; a variable, so steps inside
        # the steps_per_execution loop add to it.
        self._totals = tf.Variable(tf.zeros([3], tf.float64), trainable=False, name="tfpipe_input_wait")
        self._run = tf.function(self._call, reduce_retracing=True) if compiled else self._call
        self._epoch = WaitStats()
        self._last: Optional[float] = None  # when the previous call in this epoch returned

    def __call__(self, iterator):
        traces = self._tracing_count()
        called = time.perf_counter()
        logs, totals = self._run(iterator)
        now = time.perf_counter()
        started, self._last = (self._last if self._last is not None else called), now
        if self._tracing_count() == traces:  # tracing is a one-off cost, not a step's
            wait_seconds, steps, examples = totals.numpy()
            self._epoch += WaitStats(int(steps), int(examples), now - started, float(wait_seconds))
        return logs

    def new_epoch(self) -> WaitStats:
        """The epoch's figures so far; starts the next epoch (the time between epochs is no step's)."""
        stats, self._epoch, self._last = self._epoch, WaitStats(), None
        return stats

    def _call(self, iterator):
        self._totals.assign(tf.zeros([3], tf.float64))
        logs = self._body(_TimedIterator(iterator, self._totals, self._strategy))
        return logs, self._totals.read_value()

    def _tracing_count(self) -> int:
        return self._run.experimental_get_tracing_count() if hasattr(self._run, "experimental_get_tracing_count") else 0


class _TimedIterator:
    """An iterator whose every `next` adds (seconds waited, 1 step, examples) to `totals`."""

    def __init__(self, iterator: Any, totals: tf.Variable, strategy: tf.distribute.Strategy):
        self._iterator = iterator
        self._totals = totals
        self._strategy = strategy

    def __iter__(self):
        return self

    def __next__(self):
        requested = tf.timestamp()
        with tf.control_dependencies([requested]):  # get_next starts after the stamp
            data = next(self._iterator)
        with tf.control_dependencies(tf.nest.flatten(data, expand_composites=True)):
            ready = tf.timestamp()
        self._totals.assign_add(tf.stack([ready - requested, tf.constant(1.0, tf.float64), self._rows(data)]))
        return data

    def _rows(self, data: Any) -> tf.Tensor:
        """Examples in the batch: the leading dimension of its first tensor, summed over replicas."""
        first = tf.nest.flatten(data)[0]
        rows = [tf.shape(t, out_type=tf.int64)[0] for t in self._strategy.experimental_local_results(first)]
        return tf.cast(tf.add_n(rows), tf.float64)
