"""Estimator glue: make_input_fn for train/evaluate, serving_input_receiver_fn for export, InputWaitHook.

Nothing here imports tf.estimator until a receiver is built, so Keras users never load it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import warnings
from typing import Any, Callable, Optional, Sequence

import tensorflow as tf

from tfpipe.config import PipelineConfig
from tfpipe.core import ledger
from tfpipe.core.chain import build, check_args
from tfpipe.core.registry import domain_of_config, get_domain
from tfpipe.core.source import Data, find
from tfpipe.train import wait
from tfpipe.train.wait_hook import InputWaitHook  # noqa: F401  (public here: tfpipe.estimator.InputWaitHook)

_LOG = logging.getLogger("tfpipe")


def make_input_fn(data: Data, mode: str = "train", pipeline: Optional[PipelineConfig] = None,
                  features: Any = None, *, resume: bool = True, class_names: Optional[Sequence[str]] = None,
                  **kwargs: Any) -> Callable[..., tf.data.Dataset]:
    """Returns `input_fn(params=None, input_context=None, config=None)` for Estimator.train/evaluate.

    The Estimator calls it in its own graph on the host; with a distribution strategy
    it passes an InputContext and each input pipeline reads its own files.
    `params["batch_size"]`, when the Estimator sets it, overrides the batch size.

    In train mode the stream continues where the latest checkpoint in the Estimator's
    model_dir left it: `train(steps=N)` twice sees what `train(steps=2N)` sees once, and
    `train_and_evaluate` does not restart the data after each evaluation. Each call records
    the stream's position, batch size and files beside the checkpoints
    (`tfpipe-input-*.json`), so a later call continues exactly also after the batch size
    changed, and when the files changed it starts the next epoch of the new files (and says
    so) instead of repeating some examples and skipping others. This uses the resumable
    order (build_dataset's start_step; seed 0 when PipelineConfig.seed is unset).

    Args:
      data: anything build_dataset takes: a folder, CSV, glob, shard folder, `(paths, labels)`.
      mode: "train" | "eval" | "predict" or a tf.estimator.ModeKeys value.
      pipeline: PipelineConfig (default optimized()).
      features: the domain's config (default: the domain's, or a shard folder's own).
      resume: train mode: continue from the checkpoint's global step (False: start the
        shuffled stream afresh at every call, as a plain input_fn does).
      class_names: number the classes by these names (e.g. the training source's
        class_names for eval data that lacks a class). Without it, a train and an eval
        input_fn over the same model_dir whose data list different classes log a warning
        (their ids would differ).
      **kwargs: build_dataset's keyword arguments: read=, process=, batch_process=, feature_key=,
        on_error=.

    Raises:
      ValueError: resume with a cache (a cache replays one epoch in a fixed order and cannot
        start mid-stream): pass resume=False or drop the cache.
    """
    pipeline, mode = check_args(pipeline, mode, None, None)
    if resume and mode == "train" and pipeline.cache:
        raise ValueError(f"make_input_fn(resume=True) with cache={pipeline.cache!r}: a cache replays one epoch in a "
                         f"fixed order and cannot start where the last checkpoint stopped, so every input_fn call "
                         f"(after each evaluation of train_and_evaluate) would replay the same first batches; pass "
                         f"resume=False to accept that, or drop the cache (cache='')")
    resume = resume and mode == "train"

    def input_fn(params: Optional[dict] = None, input_context: Optional[tf.distribute.InputContext] = None,
                 config: Any = None) -> tf.data.Dataset:
        chain = pipeline
        if params and params.get("batch_size"):
            chain = dataclasses.replace(chain, batch_size=int(params["batch_size"]))
        source = find(data, class_names)
        _compare_classes(getattr(config, "model_dir", None), mode, source, warn=class_names is None)
        seed = chain.seed if chain.seed is not None else 0  # the same order at every call
        start = (resume_position(source, chain, input_context, getattr(config, "model_dir", None), seed)
                 if resume else None)
        if mode == "train" and not tf.executing_eagerly():
            _name_the_data(data, kwargs)
        return build(source, mode, chain, features, input_context, start_example=start,
                     seed=seed if resume else None, allow_device_prefetch=False, **kwargs)

    return input_fn


def _compare_classes(model_dir: Optional[str], mode: str, source: Any, warn: bool) -> None:
    """Records this mode's class names in model_dir and, unless this call pinned them (`warn`
    False), warns once per pair when the other mode's differ (a train folder with `cat` as 1 and
    an eval folder lacking a class, `cat` as 0)."""
    names = list(getattr(source, "class_names", ()) or ())
    if not model_dir or not names or mode == "predict":
        return
    other = "eval" if mode == "train" else "train"
    path = os.path.join(model_dir, "tfpipe-classes-{}.json")
    try:
        tf.io.gfile.makedirs(model_dir)
        with tf.io.gfile.GFile(path.format(mode), "w") as f:
            f.write(json.dumps(names))
        if not tf.io.gfile.exists(path.format(other)):
            return
        with tf.io.gfile.GFile(path.format(other)) as f:
            theirs = json.loads(f.read())
    except (OSError, ValueError, tf.errors.OpError):
        return  # the check only warns: a model_dir it cannot use changes nothing else
    if warn and theirs != names and (tuple(theirs), tuple(names)) not in _WARNED:
        _WARNED.add((tuple(theirs), tuple(names)))
        _LOG.warning(f"tfpipe: {mode} data has classes {names} but {other} data {theirs}: the same class gets "
                     f"different ids; pass class_names= (e.g. the train source's class_names) to both make_input_fn "
                     f"calls")


_WARNED: set = set()  # (one list, the other): warned once per process, not at every input_fn call


def _name_the_data(data: Data, kwargs: dict) -> None:
    """Leaves the folder tfpipe's chain reads in the graph, for InputWaitHook's `tfpipe bench --data` advice.

    Only where the bench can read it the same way: a path (or a FileSource's folder/CSV) and no
    user functions (with those, the verdict points at the user's own function instead).
    """
    if any(kwargs.get(k) is not None for k in ("read", "process", "batch_process")):
        return
    path = os.fspath(data) if isinstance(data, (str, os.PathLike)) else getattr(data, "root", "")
    if isinstance(path, str) and path:
        tf.compat.v1.add_to_collection(wait.DATA_COLLECTION, path)


def resume_position(source: Any, pipeline: PipelineConfig, input_context: Optional[tf.distribute.InputContext],
                    model_dir: Optional[str], seed: int = 0) -> int:
    """The train stream position (in examples) where the latest checkpoint in model_dir stopped; recorded."""
    # Each step takes one batch per replica this pipeline feeds.
    per_step = max(1, input_context.num_replicas_in_sync // input_context.num_input_pipelines) if input_context else 1
    pipeline_id, pipelines = ((input_context.input_pipeline_id, input_context.num_input_pipelines)
                              if input_context else (0, 1))
    counts = source.examples_per_file()
    step = checkpoint_step(model_dir)
    now = ledger.Entry(step, 0, pipeline.batch_size, per_step,
                       ledger.fingerprint([str(p) for p in source.paths], counts),
                       sum(counts[pipeline_id::pipelines]), seed)
    resumed = ledger.resume_position(model_dir, pipeline_id, step, now)
    if resumed.note:
        _LOG.warning(resumed.note)
    ledger.record(model_dir, pipeline_id, dataclasses.replace(now, position=resumed.position))
    return resumed.position


def checkpoint_step(model_dir: Optional[str]) -> int:
    """The global step of the latest checkpoint in model_dir (0 when there is none)."""
    checkpoint = tf.train.latest_checkpoint(model_dir) if model_dir else None
    return int(tf.train.load_variable(checkpoint, "global_step")) if checkpoint else 0


def serving_input_receiver_fn(features: Any = None, *, domain: Optional[str] = None,
                              fixed_length: bool = False) -> Callable[[], Any]:
    """Returns a `serving_input_receiver_fn` for export: raw inputs in, the training features out.

    The domain builds the signature (`Domain.serving_receiver`: e.g. raw mono waveforms at the
    config's sample rate, cropped or zero-padded like training; or encoded image bytes), with
    the same ops the input pipeline runs, so the served model sees exactly what it was trained on.

    Args:
      features: the config the model was trained with (default: the domain's default).
      domain: a registered domain's name; default: the domain whose config `features` is (no
        features: the default domain, tfpipe.core.registry.default_domain).
      fixed_length: for a "waveform" input: the signature then requires exactly `num_samples` per row.

    Returns:
      A zero-argument function for `Estimator.export_saved_model` or
      `tf.estimator.FinalExporter`, returning a `tf.estimator.export.ServingInputReceiver`.
    """
    plugin = get_domain(domain) if domain is not None else domain_of_config(features)
    config = plugin.config(features)

    def receiver_fn():
        receivers, outputs = plugin.serving_receiver(config)
        if fixed_length and "waveform" in receivers:
            receivers["waveform"].set_shape([None, config.num_samples])
        return tf.estimator.export.ServingInputReceiver(outputs, receivers)  # tf.estimator loads here

    return receiver_fn


def train_distribute(pipeline: Optional[PipelineConfig] = None,
                     devices: Optional[Sequence[str]] = None) -> Optional[tf.distribute.Strategy]:
    """The `RunConfig(train_distribute=...)` that puts each batch on its accelerator ahead of the step.

    An Estimator's own input runs in the step: with one GPU and no strategy, the batch is
    copied to the GPU inside every session.run (tf.data's prefetch_to_device does not work
    with Estimator's iterator). Under a MirroredStrategy the Estimator reads input through a
    MultiDeviceIterator, which prefetches each replica's next batch onto its device while
    the current step runs. So with `pipeline.prefetch_to_device` on, one visible GPU gets a
    one-device MirroredStrategy; several GPUs get MirroredStrategy over all of them (then
    `batch_size` is per replica, and each replica's input is prefetched).

    Args:
      pipeline: its prefetch_to_device toggle decides (default: the optimized preset).
      devices: the devices to mirror over instead of the visible GPUs (e.g. logical CPUs in tests).

    Returns:
      A MirroredStrategy, or None: no accelerator (nothing to copy to) and no devices given,
      or prefetch_to_device off with at most one GPU (plain device placement).
    """
    pipeline = pipeline or PipelineConfig.optimized()
    if devices is None:
        gpus = tf.config.list_logical_devices("GPU")
        if not gpus or (len(gpus) == 1 and not pipeline.prefetch_to_device):
            return None
        devices = [d.name for d in gpus]
    # Under a strategy, TF 2.15's Estimator reads each input's tf.data options in graph mode and
    # warns "To make it possible to preserve tf.data options ..." at every input_fn call (seen on
    # the H100 host): TensorFlow's internals, nothing about the user's data.
    warnings.filterwarnings("ignore", message="To make it possible to preserve tf.data options",
                            category=UserWarning)
    return tf.distribute.MirroredStrategy(list(devices))
