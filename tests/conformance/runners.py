"""Ways of running a chain, each returning what the consumer saw: [(ids, labels)] per batch.

eager: iterating the dataset in Python. graph: the dataset built inside a tf.Graph and read by a
session, as an Estimator runs its input_fn. estimator: a real Estimator whose model_fn records
each batch (train(steps) in its model_dir). keras: Model.fit with a train_step that records.
"""

import numpy as np
import tensorflow as tf


def eager(ds, ids_of, batches=None):
    """The first `batches` batches (all, when None) as [(ids, labels)]."""
    out = []
    for element in ds:
        features, labels = element if isinstance(element, tuple) else (element, None)
        out.append((ids_of(features).numpy(), None if labels is None else labels.numpy()))
        if batches is not None and len(out) == batches:
            break
    return out


def graph(make_ds, ids_of, batches=None):
    """make_ds() called inside a fresh tf.Graph (an Estimator's way), read by a v1 session."""
    with tf.Graph().as_default():
        ds = make_ds()
        iterator = tf.compat.v1.data.make_initializable_iterator(ds)
        element = iterator.get_next()
        features, labels = element if isinstance(element, tuple) else (element, tf.constant(0))
        fetch = (ids_of(features), labels)
        out = []
        with tf.compat.v1.Session() as session:
            session.run(iterator.initializer)
            while batches is None or len(out) < batches:
                try:
                    ids, labels = session.run(fetch)
                except tf.errors.OutOfRangeError:
                    break
                out.append((ids, labels))
    return out


def estimator(input_fn, ids_of, model_dir, steps):
    """Estimator.train(input_fn, steps) into model_dir; the batches its model_fn was given."""
    seen = []

    def record(ids, labels):
        seen.append((ids.copy(), labels.copy()))
        return np.int64(0)

    def model_fn(features, labels, mode):
        done = tf.compat.v1.py_func(record, [ids_of(features), labels], tf.int64)
        step = tf.compat.v1.train.get_or_create_global_step()
        with tf.control_dependencies([done]):
            train_op = tf.compat.v1.assign_add(step, 1)
        return tf.estimator.EstimatorSpec(mode, loss=tf.constant(0.0), train_op=train_op)

    config = tf.estimator.RunConfig(model_dir=str(model_dir), log_step_count_steps=10_000,
                                    save_summary_steps=None)
    tf.estimator.Estimator(model_fn, config=config).train(input_fn, steps=steps)
    return seen


class _Recorder(tf.keras.Model):
    """A model that learns nothing and records the ids of every batch it is trained on."""

    def __init__(self, ids_of):
        super().__init__()
        self.ids_of, self.seen = ids_of, []

    def _record(self, ids, labels):
        self.seen.append((ids.numpy(), labels.numpy()))
        return tf.constant(0, tf.int64)

    def train_step(self, data):
        features, labels = data
        tf.py_function(self._record, [self.ids_of(features), labels], tf.int64)
        return {}


def keras(ds, ids_of, epochs, steps_per_epoch):
    """Model.fit(ds, epochs, steps_per_epoch): the batches its train steps were given."""
    model = _Recorder(ids_of)
    model.compile()
    model.fit(ds, epochs=epochs, steps_per_epoch=steps_per_epoch, verbose=0)
    return model.seen


def flat(batches):
    """All ids of [(ids, labels)] in order, as ints."""
    return [int(i) for ids, _ in batches for i in ids]
