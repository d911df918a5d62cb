"""InputWaitHook: how much of each Estimator train step waits for its batch, for any Estimator.

How it measures, with no help from the model_fn: when the session starts, the hook
finds the ops that hand the step its batch (the iterator's `IteratorGetNext`, one per
replica under a distribution strategy; a queue's dequeue for queue-based input_fns)
and adds three kinds of `tf.timestamp` ops beside them: one with no inputs, which
the executor runs as the step begins; one after each batch-delivering op; one after
the train op. At the first step it keeps only those the step really runs (found by
walking back from what the Estimator fetches), so it never makes a step run
anything it would not have run. Every step then fetches a few scalars:

  wait = batch delivered - step began        (in the graph: nothing Python in between)
  step = train op done - previous step's end of this hook's bookkeeping

so the step time is the training loop's wall time per step (session.run overheads,
Python, other hooks' before_run included) but not what other hooks do after a step
(a checkpoint save, the evaluations of train_and_evaluate, summary writing).

What it sees: any input_fn returning a tf.data.Dataset (tfpipe's or your own), a
dataset's tensors, queues; under MirroredStrategy the latest replica's batch (the step
waits for it). What it cannot see: preprocessing your input_fn or model_fn runs in the
graph *after* the batch is delivered (it counts as compute, which it is: it runs in
the step), input that comes through a feed_dict, work in the step that needs no input
(it runs while the step waits, and counts as wait), and the end of a train op that other
ops consume (then the step ends when the hook's after_run starts, which adds the earlier
hooks' after_run to it). On a GPU the wait is host-side: the step could not launch its
model before the batch was there.
"""

from __future__ import annotations

import collections
import dataclasses
import time
from typing import Any, Callable, Optional

import tensorflow as tf

from tfpipe.train import wait
from tfpipe.train.wait import WaitStats

# Ops that hand a train step its batch: tf.data iterators (MultiDevice: per replica) and queues.
_INPUT_OPS = frozenset({"IteratorGetNext", "IteratorGetNextSync", "MultiDeviceIteratorGetNextFromShard",
                        "QueueDequeueV2", "QueueDequeueManyV2", "QueueDequeueUpToV2"})
_SCOPE = "tfpipe_input_wait"


@dataclasses.dataclass
class _Probes:
    """The timestamp ops added to a graph, keyed by the op each one follows."""

    start: tf.Tensor
    ready: dict  # batch-delivering op -> (timestamp after it, its batch's rows or None)
    done: dict  # train-op candidate -> timestamp after it

    @classmethod
    def add_to(cls, graph: tf.Graph) -> "_Probes":
        """Adds the probes next to every batch-delivering op and every op that may be the train op."""
        inputs = [op for op in graph.get_operations() if op.type in _INPUT_OPS]
        candidates = _sinks_after(graph, inputs)
        with graph.as_default(), tf.name_scope(_SCOPE):
            start = tf.timestamp(name="step_start")
            ready, done = {}, {}
            for op in inputs:
                with tf.control_dependencies([op]):
                    ready[op] = (tf.timestamp(name="batch_ready"), _rows(op))
            for op in candidates:
                with tf.control_dependencies([op]):
                    done[op] = tf.timestamp(name="step_done")
        return cls(start, ready, done)

    def select(self, caller_fetches: Any) -> "_StepFetch":
        """The probes of what a step fetching `caller_fetches` runs anyway."""
        graph_elements = (tf.Tensor, tf.Operation)
        fetched = {getattr(f, "op", f) for f in tf.nest.flatten(caller_fetches) if isinstance(f, graph_elements)}
        runs = _ancestors(fetched)
        ready = [pair for op, pair in self.ready.items() if op in runs]
        rows = [r for _, r in ready if r is not None]
        done = [stamp for op, stamp in self.done.items() if op in fetched]
        return _StepFetch([self.start] + [stamp for stamp, _ in ready] + rows + done, len(ready), len(rows))


@dataclasses.dataclass(frozen=True)
class _StepFetch:
    """What the hook fetches each step, as one flat list (the cheapest for session.run to map):
    [step start, batch ready (per input op)..., batch rows..., train op done...]."""

    tensors: list
    num_ready: int
    num_rows: int

    def step(self, values: list, started: float, now: float) -> WaitStats:
        """The step these values measured; `now` ends it when no train op was found."""
        start, rows_at, done_at = values[0], 1 + self.num_ready, 1 + self.num_ready + self.num_rows
        ready, rows, done = values[1:rows_at], values[rows_at:done_at], values[done_at:]
        return wait.step_stats(sum(rows), started=started, ready=max(ready, default=start), requested=start,
                               done=max(done, default=now))


def _rows(op: tf.Operation) -> Optional[tf.Tensor]:
    """The batch size of a delivered batch: the leading dimension of its first output with one."""
    for out in op.outputs:
        if out.dtype not in (tf.variant, tf.resource) and out.shape.rank:
            return tf.shape(out, out_type=tf.int64)[0]
    return None


def _sinks_after(graph: tf.Graph, inputs: list) -> list:
    """Ops fed (through data or control edges) by the inputs that nothing runs after: the train op is one."""
    control_outputs = collections.defaultdict(list)
    for op in graph.get_operations():
        for dep in op.control_inputs:
            control_outputs[dep].append(op)
    seen, todo = set(), list(inputs)
    while todo:
        op = todo.pop()
        if op not in seen:
            seen.add(op)
            todo += [c for out in op.outputs for c in out.consumers()] + control_outputs[op]
    return [op for op in seen if not control_outputs[op] and not any(out.consumers() for out in op.outputs)]


def _ancestors(ops: set) -> set:
    """Every op that running `ops` runs."""
    seen, todo = set(), list(ops)
    while todo:
        op = todo.pop()
        if op not in seen:
            seen.add(op)
            todo += [t.op for t in op.inputs] + list(op.control_inputs)
    return seen


class InputWaitHook(tf.compat.v1.train.SessionRunHook):
    """Throughput and the share of step time spent waiting for input, for any Estimator.

    Add it to `hooks=` of `Estimator.train` or `tf.estimator.TrainSpec`; no model_fn change,
    any input_fn (see the module docstring for how it measures and what it cannot see).
    Every `every_n_steps` it logs examples/s and the wait share of those steps; the
    Estimator's summary saver writes `tfpipe/input_wait_share` and `tfpipe/examples_per_sec`
    (over the steps since its previous write) to the model_dir for TensorBoard; at the end
    it logs the verdict. `stats` holds the figures of every step measured (also across
    several `train` calls with the same hook).

    Args:
      every_n_steps: log a progress line this often (0: never).
      warmup_steps: steps at the start of each session not measured: the iterator is built
        and shuffle buffers fill then, a one-off cost.
      report: where lines go (default: INFO on the 'tfpipe' logger).
      data: the folder (CSV, shard folder) the input_fn reads, for the `tfpipe bench --data`
        command the verdict suggests; tfpipe's `make_input_fn` over a folder says so itself.
        Unknown: the verdict suggests timing your own function (`--dataset_fn`).
    """

    def __init__(self, every_n_steps: int = 100, warmup_steps: int = 10,
                 report: Optional[Callable[[str], None]] = None, *, data: Optional[str] = None):
        if every_n_steps < 0 or warmup_steps < 0:
            raise ValueError(f"InputWaitHook(every_n_steps={every_n_steps}, warmup_steps={warmup_steps}): "
                             f"both must be >= 0")
        self._every = every_n_steps
        self._warmup = warmup_steps
        self._report = wait.reporter(report)
        self.stats = WaitStats()
        self._window = WaitStats()  # since the last progress line
        self._unwritten = WaitStats()  # since the last TensorBoard summary
        self._data = data
        self.context = wait.WaitContext()  # set when a session begins: CPU only?, the data read
        self._began, self._run = False, 0  # a session began; steps run in all (warm-up included)

    def summary(self) -> str:
        """The closing line: throughput and the verdict, or why no step was measured."""
        return wait.summary_line(self.stats, self.context,
                                 unmeasured=wait.why_unmeasured(self._began, self._run, self._warmup))

    def begin(self):
        graph = tf.compat.v1.get_default_graph()
        read = [d for d in graph.get_collection(wait.DATA_COLLECTION) if d]
        self.context = wait.WaitContext(cpu_only=wait.cpu_only(),
                                        data=self._data or (read[0] if len(set(read)) == 1 else ""))
        self._began = True
        self._probes = _Probes.add_to(graph)
        self._global_step = tf.compat.v1.train.get_global_step()
        with tf.name_scope(_SCOPE):
            summary = tf.compat.v1.py_func(self._summary, [], tf.string, stateful=True, name="summary")
        tf.compat.v1.add_to_collection(tf.compat.v1.GraphKeys.SUMMARIES, summary)  # the Estimator's saver writes it
        self._fetch: Optional[_StepFetch] = None
        self._seen = 0
        self._previous_end: Optional[float] = None

    def before_run(self, run_context):
        if self._fetch is None:
            self._fetch = self._probes.select(run_context.original_args.fetches)
            if not self._fetch.num_ready:
                self._report("InputWaitHook: this train step reads its batch from no tf.data iterator or queue "
                             "(a feed_dict? a py_func?); it cannot see input wait and reports 0")
        return tf.compat.v1.train.SessionRunArgs(self._fetch.tensors)

    def after_run(self, run_context, run_values):
        now = time.time()
        previous, self._previous_end = self._previous_end, now
        self._seen += 1
        self._run += 1
        if self._seen <= self._warmup or previous is None:
            return
        step = self._fetch.step(run_values.results, previous, now)
        self.stats += step
        self._unwritten += step
        self._window += step
        if self._every and self._window.steps >= self._every:
            # Read after the step (a read inside it may precede the increment); once per line.
            global_step = run_context.session.run(self._global_step) if self._global_step is not None else self._seen
            self._report(wait.progress_line(f"step {int(global_step)}", self._window))
            self._window = WaitStats()

    def end(self, session):
        self._report(self.summary())

    def _summary(self) -> bytes:
        """The TensorBoard scalars of the steps since the previous call (none before the first step)."""
        stats, self._unwritten = self._unwritten, WaitStats()
        summary = tf.compat.v1.Summary()
        if stats.steps:
            summary.value.add(tag="tfpipe/input_wait_share", simple_value=stats.input_wait_share)
            summary.value.add(tag="tfpipe/examples_per_sec", simple_value=stats.examples_per_second)
        return summary.SerializeToString()
