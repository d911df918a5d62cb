"""python -m estimator_demo: absl flags -> data -> shards -> train_and_evaluate -> export -> reload, predict.

With no --data it writes the synthetic corpus of --domain (the default domain's into
<model_dir>/corpus, another's into <model_dir>/NAME_corpus); a class folder or CSV given
with --data is used as is, its domain found from the files. Either way a held-out split (a
hash of each path, stable across runs) is set aside unless --eval_data is given. A domain
that asks for it (`Domain.shards_for_training`, e.g. any wav, resampled) is then sharded into
<model_dir>/shards/{train,eval} (complete shards are reused on the next run); other domains'
files are read online by default (--shards to shard them too). The Estimator trains with the
pipeline the tfpipe flags describe (--pipeline=naive|optimized, --[no]prefetch, --batch_size,
...). The run ends by exporting a SavedModel that takes what the domain serves (raw waveforms,
encoded image bytes, ...), reloading it with tf.saved_model.load, and predicting a few
held-out files.

This is the only module of the demo that reads absl flags.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # must happen before TensorFlow loads

import dataclasses  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from typing import Any, Optional, Sequence  # noqa: E402

import tensorflow as tf  # noqa: E402
from absl import app, flags, logging  # noqa: E402

import tfpipe  # noqa: E402
from estimator_demo import hooks, model  # noqa: E402
from estimator_demo.data import DemoData, pick_files, prepare_data  # noqa: E402
from tfpipe import flags as tfpipe_flags  # noqa: E402
from tfpipe.config import PipelineConfig  # noqa: E402
from tfpipe.core import filesystem as fs  # noqa: E402
from tfpipe.core import registry  # noqa: E402
from tfpipe.errors import DataError  # noqa: E402
from tfpipe.train.wait import WaitStats  # noqa: E402
from tfpipe.core.files import FileSource  # noqa: E402
from tfpipe.core.source import find  # noqa: E402

FLAGS = flags.FLAGS


def define_flags(flag_values: flags.FlagValues = FLAGS) -> None:
    """Defines the tfpipe pipeline and feature flags and the demo's own (idempotent).

    Called by `run()`, so importing this module defines no flags.
    """
    if "train_steps" in flag_values:
        return
    tfpipe_flags.define_flags(flag_values)  # the pipeline's and every domain config's fields
    domains = registry.domains().values()
    corpora = [d.name for d in domains if d.corpus is not None]
    default = registry.default_domain()
    fv = {"flag_values": flag_values}
    flags.DEFINE_string("data", None, f"Training data: a folder with one subfolder per class of a domain's files "
                        f"({registry.known_extensions()}), a CSV manifest (path,label) or a shard folder; the "
                        f"domain is found from the files. Unset: the synthetic corpus of --domain.", **fv)
    flags.DEFINE_enum("domain", default.name if default.name in corpora else corpora[0], corpora,
                      "No --data: which synthetic corpus to train on.", **fv)
    flags.DEFINE_string("eval_data", None, "Held-out data, same forms as --data. "
                        "Unset: --eval_fraction of --data.", **fv)
    flags.DEFINE_list("class_names", None, "Class names in id order (comma-separated), for train and eval "
                      "data. Unset: the training data's own, which --eval_data takes (an eval folder lacking a "
                      "class keeps the training ids).", **fv)
    flags.DEFINE_float("eval_fraction", 0.2, "Share of --data held out for eval, chosen by a hash of each "
                       "path.", lower_bound=0.01, upper_bound=0.9, **fv)
    flags.DEFINE_string("model_dir", os.path.join("runs", "demo"), "Checkpoints, TensorBoard summaries, "
                        "the SavedModel, and the corpus and shards.", **fv)
    flags.DEFINE_integer("train_steps", 400, "Training steps (batches).", lower_bound=1, **fv)
    flags.DEFINE_integer("evals", 4, "Evaluations on the held-out set during training; the last one ends it.",
                         lower_bound=1, **fv)
    flags.DEFINE_float("learning_rate", 2e-3, "Adam learning rate.", lower_bound=0.0, **fv)
    flags.DEFINE_boolean("resume", False, "Continue from the checkpoints in --model_dir. Default: start "
                         "over (the previous run's checkpoints, summaries and exports are deleted; corpus "
                         "and shards are kept).", **fv)
    flags.DEFINE_enum("store", None, list(dict.fromkeys(s for d in domains for s in d.stores())),
                      "What the shards hold; the data's domain decides which (default: its training store): "
                      + "; ".join(f"{d.name} {' or '.join(d.stores())} (default {d.training_store or d.stores()[0]})"
                                  for d in domains) + ".", **fv)
    sharded = [d.name for d in domains if d.shards_for_training]
    flags.DEFINE_boolean("shards", None, "Shard the data before training. Unset: the data's domain decides (on for "
                         f"{', '.join(sharded) or 'none'}: their shards read files the online chain refuses; off "
                         "for the others: read online through the same chain).", **fv)
    flags.DEFINE_integer("num_shards", 16, "Training shards to write (eval gets a quarter as many).",
                         lower_bound=1, **fv)
    flags.DEFINE_integer("shard_workers", 0, "Processes writing shards (0: in this process, the fastest "
                         "for small data: each worker process starts its own TensorFlow).", lower_bound=0,
                         **fv)
    flags.DEFINE_enum("on_error", "fail", ["fail", "skip"], "An unreadable file: stop naming it, or skip it "
                      "(listed in the shard index's 'rejected' and counted in the summary).", **fv)
    flags.DEFINE_integer("per_class", 250, "Synthetic corpus (no --data): files per class.", lower_bound=4,
                         **fv)
    flags.DEFINE_integer("corpus_seed", 0, "Synthetic corpus (no --data): the seed it is generated from.",
                         lower_bound=0, **fv)
    flags.DEFINE_integer("predict_files", 8, "Held-out files the reloaded SavedModel predicts at the end.",
                         lower_bound=0, **fv)


# What a run leaves in model_dir that the next run, starting over, removes.
_RUN_ARTIFACTS = ("checkpoint", "graph.pbtxt", "model.ckpt-*", "events.out.tfevents.*", "eval", "export")


def run_config(model_dir: str, train_steps: int, evals: int, seed: Optional[int],
               pipeline: Optional[PipelineConfig] = None) -> tf.estimator.RunConfig:
    """Checkpoints (each one evaluated) `evals` times per run; batches prefetched onto the GPU(s).

    `tfpipe.estimator.train_distribute` picks the strategy: with --prefetch_to_device a single
    GPU gets a one-device MirroredStrategy (its MultiDeviceIterator copies the next batch
    while the step runs), several GPUs a MirroredStrategy over all; on CPU none.
    Evaluation is not distributed: the held-out set is small, and on one device the
    last partial batch cannot be dropped by a replica that ran out of input.

    Args:
      model_dir: the Estimator's model_dir.
      train_steps: the run's length in steps.
      evals: checkpoints per run, each followed by an evaluation (EvalSpec.throttle_secs=0).
      seed: graph-level random seed (None: random).

    Returns:
      The RunConfig.
    """
    strategy = tfpipe.estimator.train_distribute(pipeline)
    every = max(1, math.ceil(train_steps / evals))
    return tf.estimator.RunConfig(
        model_dir=model_dir, tf_random_seed=seed, save_checkpoints_steps=every, keep_checkpoint_max=2,
        save_summary_steps=max(1, min(50, every)), log_step_count_steps=max(1, min(100, every)),
        train_distribute=strategy,  # eval stays on one device: every held-out example counted once
        session_config=tf.compat.v1.ConfigProto(allow_soft_placement=True))


@dataclasses.dataclass(frozen=True)
class TrainResult:
    """What train_and_evaluate reported.

    Attributes:
      metrics: the final evaluation's metrics (accuracy, loss, global_step).
      export_dir: the SavedModel directory.
      speed: tfpipe.estimator.InputWaitHook's measurements (examples/s, input-wait share).
      evals: (step, accuracy) of every evaluation during the run.
    """

    metrics: dict
    export_dir: str
    speed: WaitStats
    evals: tuple[tuple[int, float], ...]


def train_and_evaluate(data: DemoData, pipeline: PipelineConfig, features: Any, model_dir: str, *,
                       train_steps: int = 400, evals: int = 4, learning_rate: float = 2e-3,
                       resume: bool = False) -> TrainResult:
    """Trains with tf.estimator.train_and_evaluate on tfpipe input_fns and exports a SavedModel.

    Args:
      data: from prepare_data.
      pipeline: the input pipeline for training (evaluation is one ordered pass whatever it says).
      features: the domain config of the data; the SavedModel computes the same features.
      model_dir: the Estimator's model_dir.
      train_steps: steps to train to (global step).
      evals: evaluations on the held-out data, evenly spaced; the last one at the end.
      learning_rate: Adam learning rate.
      resume: continue from model_dir's checkpoints instead of starting over.

    Returns:
      TrainResult: final metrics, SavedModel path, examples/s and input wait, eval history.
    """
    if not resume:
        clear_run(model_dir)
    params = {"class_names": data.class_names, "features": features, "learning_rate": learning_rate}
    estimator = tf.estimator.Estimator(model.model_fn, config=run_config(model_dir, train_steps, evals,
                                                                          pipeline.seed, pipeline), params=params)
    speed = tfpipe.estimator.InputWaitHook(every_n_steps=max(1, math.ceil(train_steps / 6)),
                                           warmup_steps=min(10, train_steps // 10), report=print)
    eval_report = hooks.EvalReportHook()
    train_spec = tf.estimator.TrainSpec(tfpipe.make_input_fn(data.train, "train", pipeline, features),
                                        max_steps=train_steps, hooks=[speed])
    receiver = tfpipe.serving_input_receiver_fn(features)
    eval_input = tfpipe.make_input_fn(data.eval, "eval", pipeline, features)
    exporter = tf.estimator.FinalExporter("demo", receiver)
    eval_spec = tf.estimator.EvalSpec(eval_input, steps=None, exporters=[exporter], hooks=[eval_report],
                                      start_delay_secs=0, throttle_secs=0)
    metrics, exports = tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)
    if metrics is None:  # resumed at max_steps already: nothing was trained, so nothing evaluated
        metrics = estimator.evaluate(eval_input, hooks=[eval_report])
        exports = [estimator.export_saved_model(fs.join(model_dir, "export", "demo"), receiver)]
    export_dir = exports[0].decode() if isinstance(exports[0], bytes) else exports[0]
    return TrainResult(metrics, export_dir, speed.stats, tuple(eval_report.history))


def clear_run(model_dir: str) -> None:
    """Deletes what an earlier run left in model_dir (checkpoints, summaries, exports), nothing else."""
    for pattern in _RUN_ARTIFACTS:
        for path in fs.glob(fs.join(model_dir, pattern)):  # gs://, s3:// model_dirs too
            if fs.isdir(path):
                fs.rmtree(path)
            else:
                fs.remove(path)


def predict_saved_model(export_dir: str, files: Sequence[tuple[str, int]],
                        features: Any) -> list[tuple[str, int, str, float]]:
    """Reloads the SavedModel with tf.saved_model.load and classifies `files` as a client would send them.

    Args:
      export_dir: a SavedModel exported with tfpipe.serving_input_receiver_fn.
      files: (path, label id) pairs, sent as the domain's clients send them (Domain.serving_inputs:
        e.g. any wav the sharding reads as raw waveforms; an image file's bytes as they are).
      features: the domain config the model was trained with.

    Returns:
      (path, true label, predicted class name, its probability) per file.
    """
    if not files:
        return []
    serve = tf.saved_model.load(export_dir).signatures["serving_default"]
    inputs = registry.domain_of_config(features).serving_inputs([path for path, _ in files], features)
    out = serve(**{key: tf.constant(value) for key, value in inputs.items()})
    names = [n.decode() for n in out["class_names"].numpy()]
    confidence = out["probabilities"].numpy().max(axis=1)
    return [(path, label, name, float(p)) for (path, label), name, p in zip(files, names, confidence)]


def main(argv: Sequence[str]) -> None:
    """The demo, from flags to the printed summary."""
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments {' '.join(argv[1:])}; every option is a --flag")
    from tfpipe.cli import quiet_tensorflow

    quiet_tensorflow()
    if os.environ.get("TF_CPP_MIN_LOG_LEVEL") != "0":
        logging.set_verbosity(logging.WARNING)  # TensorFlow also logs through absl (e.g. SavedModel loading)
    started = time.perf_counter()
    model_dir = fs.abspath(FLAGS.model_dir)
    try:
        fs.register(model_dir)  # s3://: TensorFlow's Estimator writes there through tensorflow-io
        source = find(FLAGS.data) if FLAGS.data is not None else None  # looked at once
        domain = _domain(source)
        pipeline, features = tfpipe_flags.pipeline_config(), _feature_config(source, domain)
        store = FLAGS.store or domain.training_store or domain.stores()[0]
        if store not in domain.stores():
            raise ValueError(f"--store={store}: {domain.name} shards store {' or '.join(domain.stores())}")
        shards = FLAGS.shards if FLAGS.shards is not None else domain.shards_for_training
        data = prepare_data(source, FLAGS.eval_data, FLAGS.eval_fraction, model_dir, features,
                            store=store, num_shards=FLAGS.num_shards, shard_workers=FLAGS.shard_workers,
                            on_error=FLAGS.on_error, per_class=FLAGS.per_class, corpus_seed=FLAGS.corpus_seed,
                            shards=shards, class_names=FLAGS.class_names)
    except ValueError as e:  # includes tfpipe.DataError: the message names the file and the fix
        sys.exit(f"estimator_demo: {e}")
    print(f"[data] {data.description}")
    print(f"[train] {FLAGS.train_steps} steps, --pipeline={FLAGS.pipeline} (batch {pipeline.batch_size}), "
          f"model_dir {model_dir}")
    try:
        result = train_and_evaluate(data, pipeline, features, model_dir, train_steps=FLAGS.train_steps,
                                    evals=FLAGS.evals, learning_rate=FLAGS.learning_rate, resume=FLAGS.resume)
    except DataError as e:  # e.g. shards that store other features than the flags ask for
        sys.exit(f"estimator_demo: {e}")
    predictions = predict_saved_model(result.export_dir, pick_files(data.eval_files, FLAGS.predict_files),
                                      features)
    same_data = f" --data {FLAGS.data}" if FLAGS.data else (
        f" --domain {FLAGS.domain}" if FLAGS["domain"].present else "")
    print(summary(data, result, predictions, FLAGS.pipeline, time.perf_counter() - started, same_data=same_data))


def _feature_config(source: Optional[FileSource], domain: Any) -> Any:
    """The feature flags of the data's domain; for a shard folder, its index's features with the
    flags that were set on top."""
    shards = source is not None and source.kind == "shards"
    base = (source.index["domain"] or {}).get("config") if shards else None
    return tfpipe_flags.feature_config(base=base, config_class=domain.config_class)


def _domain(source: Optional[FileSource]) -> Any:
    """The registered Domain of the data: from the files, a shard index, or --domain when there is no --data."""
    name = FLAGS.domain if source is None else getattr(source, "domain", "")
    return registry.get_domain(name) if name else registry.default_domain()


def summary(data: DemoData, result: TrainResult, predictions: Sequence[tuple[str, int, str, float]],
            preset: str, seconds: float, same_data: str = "") -> str:
    """The closing report: accuracy, speed, input wait, export path, predictions."""
    speed = result.speed
    lines = ["", "=" * 72, "estimator_demo summary", "=" * 72,
             f"data               {data.description}",
             f"held-out accuracy  {result.metrics['accuracy']:.3f}  (loss {result.metrics['loss']:.3f}, "
             f"step {result.metrics['global_step']})"]
    if speed.steps:
        lines.append(f"training speed     {speed.examples_per_second:.0f} examples/s, input wait "
                     f"{speed.input_wait_share:.1%} of step time  (--pipeline={preset}, {speed.steps} steps "
                     f"measured)")
        other = "naive" if preset == "optimized" else "optimized"
        lines.append(f"A/B                python -m estimator_demo{same_data} --pipeline={other}  "
                     f"(same data and model; "
                     f"compare examples/s and input wait)")
    else:
        lines.append("training speed     no steps trained (the checkpoint was already at --train_steps; "
                     "drop --resume to start over)")
    lines.append(f"SavedModel         {result.export_dir}")
    if predictions:
        sent = getattr(registry.domain_of(predictions[0][0]), "serving_sends", "files")
        lines.append(f"predictions        SavedModel reloaded with tf.saved_model.load, {sent} in:")
        width = max(len(_short(p)) for p, *_ in predictions)
        for path, label, name, p in predictions:
            truth = data.class_names[label]
            mark = "ok" if name == truth else "WRONG"
            lines.append(f"  {_short(path):<{width}}  true {truth:<12} predicted {name:<12} "
                         f"p={p:.2f}  {mark}")
        right = sum(data.class_names[label] == name for _, label, name, _ in predictions)
        lines.append(f"                   {right} of {len(predictions)} right")
    else:
        lines.append("predictions        skipped: the eval data is a shard folder (no files to send)")
    lines += [f"total time         {seconds:.0f} s", "=" * 72]
    return "\n".join(lines)


def _short(path: str) -> str:
    """class_folder/file.ext: enough to recognise a file."""
    return os.path.join(os.path.basename(os.path.dirname(path)), os.path.basename(path))


def run() -> None:
    """Entry point of `python -m estimator_demo`."""
    define_flags()
    app.run(main)
