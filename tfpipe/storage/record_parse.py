"""How tfpipe.records parses records with a `spec`: checked against each file's first record up
front, and every record named by its file and number when it does not fit.

Up front (`check_first_records`): each file's first record is parsed in Python against the spec
(keys, dtypes, value counts), so TF-slim keys on other files, or SequenceExample records, are
named with the file before any step runs. While reading (`parse_fn`): records carry a position
(file index and record number, from checked_records), and the parse names each record with it
(`example_names`), so a record missing a key or of another dtype mid-file fails naming the file,
the record and the key. Labels: int ids (cast to int64), TFDS ids renumbered by class name, or
names looked up in `class_names`; each refused by name when it is not one of the classes.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np
import tensorflow as tf

from tfpipe.core import filesystem as fs
from tfpipe.errors import DataError, listed
from tfpipe.storage import tfrecord

FILE_STRIDE = 1 << 40  # a record's position: file index * FILE_STRIDE + record number
_KINDS = {tf.int64: "int64_list", tf.float32: "float_list", tf.string: "bytes_list"}
_KIND_NAMES = {"int64_list": "int64", "float_list": "float32", "bytes_list": "bytes"}


@dataclasses.dataclass(frozen=True)
class Labels:
    """What the label becomes.

    Attributes:
      key: the spec's (or TFDS's) label key; None: no label.
      mode: "train" | "eval" | "predict".
      unlabeled: the user said the records hold no label (eval then gives 0).
      class_names: pinned names (ids must be below their count; string labels are looked up).
      ids: own id -> pinned id (TFDS class names renumbered), or None.
    """

    key: Optional[str]
    mode: str
    unlabeled: bool = False
    class_names: tuple[str, ...] = ()
    ids: Optional[tuple[int, ...]] = None


def check_first_records(paths: Sequence[str], compressions: Sequence[str], counts: Sequence[int],
                        spec: Mapping[str, Any]) -> None:
    """DataError naming each file whose first record the spec does not fit, and what the record holds."""
    looked = [i for i, n in enumerate(counts) if n]
    found = fs.parallel(lambda i: tfrecord.first_record(paths[i], compressions[i]), looked,
                        remote=bool(paths) and fs.is_remote(paths[0]))
    problems = [(paths[i], problem) for i, record in zip(looked, found)
                for problem in [record_problem(record, spec)] if problem]
    if problems:
        sequence = any("SequenceExample" in p for _, p in problems)
        fix = ("pass process= with tf.io.parse_single_sequence_example(record, context_features=..., "
               "sequence_features=...) to parse them" if sequence else
               "make spec= name the records' own keys and dtypes (or give a FixedLenFeature a default_value)")
        raise DataError(f"spec= does not fit {len(problems)} of {len(looked)} files (their first record):"
                        + listed(f"{p}: {why}" for p, why in problems) + f"\n{fix}")


def record_problem(record: Optional[bytes], spec: Mapping[str, Any]) -> str:
    """'' when `spec` parses this serialized record, else what does not fit (and what it holds)."""
    if record is None:
        return "cannot read its first record"
    try:
        sequence = tf.train.SequenceExample.FromString(record)
    except Exception:  # noqa: BLE001  (protobuf's DecodeError: not a protocol buffer at all)
        return "its first record is not a tf.train.Example"
    if sequence.feature_lists.feature_list:
        lists = ", ".join(map(repr, sorted(sequence.feature_lists.feature_list)))
        return (f"records are tf.train.SequenceExample (feature_lists {lists}), which spec= (tf.train.Example) "
                f"would read as empty")
    held = sequence.context.feature
    wrong = []
    for key, feature in spec.items():
        for name, dtype, count, required in _wants(key, feature):
            value = held.get(name)
            kind = value.WhichOneof("kind") if value is not None else None
            if kind is None:
                if required:
                    wrong.append(f"lacks {name!r}")
                continue
            if _KINDS.get(tf.as_dtype(dtype)) != kind:
                wrong.append(f"{name!r} holds {_KIND_NAMES[kind]}, spec asks {tf.as_dtype(dtype).name}")
            elif count is not None and len(getattr(value, kind).value) != count:
                wrong.append(f"{name!r} holds {len(getattr(value, kind).value)} values, spec asks {count}")
    if not wrong:
        return ""
    holds = ", ".join(f"{k!r} ({_KIND_NAMES.get(v.WhichOneof('kind'), 'empty')} x{_count(v)})"
                      for k, v in sorted(held.items()))
    return f"{'; '.join(wrong)} (the record holds {holds or 'no features'})"


def _wants(key: str, feature: Any) -> list[tuple[str, Any, Optional[int], bool]]:
    """(name in the record, dtype, value count or None, required) of each value a spec entry reads."""
    if isinstance(feature, tf.io.FixedLenFeature):
        count = int(np.prod(feature.shape)) if all(d is not None for d in feature.shape) else None
        return [(key, feature.dtype, count, feature.default_value is None)]
    if isinstance(feature, tf.io.SparseFeature):
        keys = feature.index_key if isinstance(feature.index_key, (list, tuple)) else [feature.index_key]
        return [(feature.value_key, feature.dtype, None, False)] + [(k, tf.int64, None, False) for k in keys]
    if isinstance(feature, tf.io.RaggedFeature):
        return [(feature.value_key or key, feature.dtype, None, False)]
    return [(key, feature.dtype, None, False)]  # VarLenFeature, FixedLenSequenceFeature


def _count(value: Any) -> int:
    kind = value.WhichOneof("kind")
    return len(getattr(value, kind).value) if kind else 0


def parse_fn(spec: Mapping[str, Any], paths: Sequence[str], labels: Labels,
             then: Optional[Callable[[dict], Any]] = None) -> Callable[..., Any]:
    """(position, record) -> (features, label), one record or (vectorized) a batch: one parse call,
    each record named by its file and number should it not fit the spec."""
    spec = dict(spec)
    prefixes = tf.constant([f"{p}, record " for p in paths]) if paths else tf.constant([""])

    def parse(positions, records):
        names = tf.strings.join([tf.gather(prefixes, positions // FILE_STRIDE),
                                 tf.strings.as_string(positions % FILE_STRIDE)])
        if records.shape.rank:
            parsed = tf.io.parse_example(records, spec, example_names=names)
        else:  # parse_single_example drops example_names: a batch of one keeps them
            parsed = {k: _first(v) for k, v in tf.io.parse_example(records[None], spec,
                                                                   example_names=names[None]).items()}
        features, label = split_label(parsed, labels, tf.shape(records, out_type=tf.int64), names)
        return (then(features) if then else features), label

    return parse


def _first(value: Any) -> Any:
    if isinstance(value, tf.sparse.SparseTensor):
        return tf.sparse.reshape(value, value.dense_shape[1:])
    return value[0]


def split_label(features: dict, labels: Labels, batch_shape: tf.Tensor, names: Optional[tf.Tensor] = None):
    """(features without the label, label ids int64); zeros where the records hold no label."""
    if labels.key is None:
        return features, tf.zeros(batch_shape, tf.int64)  # predict, or unlabeled eval (the user said so)
    features = dict(features)
    label = features.pop(labels.key)
    if label.dtype == tf.string:
        return features, _looked_up(label, labels, names)
    if not label.dtype.is_integer:
        return features, label  # a regression target: as it is
    label = tf.cast(label, tf.int64)
    if labels.ids is not None:
        label = tf.gather(tf.constant(labels.ids, tf.int64), label)
    elif labels.class_names:
        label = _checked_below(label, len(labels.class_names), names)
    return features, label


def _looked_up(label: tf.Tensor, labels: Labels, names: Optional[tf.Tensor]) -> tf.Tensor:
    """Class names -> their ids in class_names; a name not listed fails naming it (and its record).

    Compared with every name (no lookup table: a table is a resource an Estimator's graph would
    have to initialize); class lists are short.
    """
    if not labels.class_names:
        raise ValueError(f"label_key={labels.key!r} holds class names (tf.string): pass class_names= (the "
                         f"names in id order, e.g. the training source's class_names) to make them ids")
    equal = tf.equal(tf.expand_dims(label, -1), tf.constant(labels.class_names))
    ids = tf.argmax(tf.cast(equal, tf.int32), -1, output_type=tf.int64)
    return _checked(ids, tf.logical_not(tf.reduce_any(equal, -1)), label, names,
                    f"label is not one of class_names ({', '.join(labels.class_names[:12])})")


def _checked_below(label: tf.Tensor, count: int, names: Optional[tf.Tensor]) -> tf.Tensor:
    """Label ids below `count` (the pinned classes), or a failure naming the first record beyond."""
    return _checked(label, tf.logical_or(label < 0, label >= count), label, names,
                    f"label id is not below the {count} class_names")


def _checked(ids: tf.Tensor, bad: tf.Tensor, label: tf.Tensor, names: Optional[tf.Tensor], why: str) -> tf.Tensor:
    """`ids`, once no label is `bad`; else a failure naming the first bad record (`names`), its label and why."""
    bad = tf.reshape(bad, [-1])
    where = tf.boolean_mask(tf.reshape(names, [-1]), bad) if names is not None else tf.constant([""])
    check = tf.debugging.Assert(tf.logical_not(tf.reduce_any(bad)), [
        where[:1], tf.boolean_mask(tf.reshape(label, [-1]), bad)[:1], tf.constant(why)])
    with tf.control_dependencies([check]):
        return tf.identity(ids)


def need_labels(labels: Labels, root: str) -> None:
    """ValueError when train or eval would get label 0 for every record (no label_key), unless said."""
    if labels.key is not None or labels.mode == "predict" or (labels.unlabeled and labels.mode != "train"):
        return
    if labels.mode == "train":
        raise ValueError(f"{root or 'records'}: name the label with label_key= (or pass process= returning "
                         f"(features, label)); only eval and predict may go without labels")
    raise ValueError(f"{root or 'records'}: eval without label_key= would compare predictions against label 0 "
                     f"for every record; name the label with label_key=, or pass unlabeled=True to "
                     f"tfpipe.records if the records hold none (predict needs no label)")


def string_label(spec: Optional[Mapping[str, Any]], key: Optional[str]) -> bool:
    """The spec's label holds names (tf.string)."""
    return bool(spec) and key is not None and key in spec and tf.as_dtype(spec[key].dtype) == tf.string
