"""A folder tensorflow_datasets prepared, for tfpipe.records: its split's files and counts from
dataset_info.json, its supervised keys, and TFDS's own decoder when tensorflow-datasets is installed."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import tempfile
from typing import Any, Callable, Iterator, Optional

from tfpipe.core import filesystem as fs
from tfpipe.errors import DataError, listed

INFO = "dataset_info.json"


@dataclasses.dataclass(frozen=True)
class TfdsSplit:
    """One split of a TFDS folder.

    Attributes:
      paths: its files, in shard order.
      counts: records per file.
      supervised: (input key, label key) of its supervised keys, or ().
      decode: TFDS's per-record decoder (None without tensorflow-datasets, or with a spec).
      class_names: the label's class names, where its feature is a ClassLabel.
    """

    paths: tuple[str, ...]
    counts: tuple[int, ...]
    supervised: tuple[str, ...] = ()
    decode: Optional[Callable[..., Any]] = None
    class_names: tuple[str, ...] = ()


def is_tfds_folder(folder: str) -> bool:
    return fs.isfile(fs.join(folder, INFO))


def read_split(folder: str, split: Optional[str], label_key: Optional[str], decoder: bool) -> TfdsSplit:
    """The split's files (checked to exist) and keys; `decoder`: also TFDS's decoder and class names."""
    with fs.open(fs.join(folder, INFO), "rb") as f:
        info = json.loads(f.read())
    splits = {s["name"]: s for s in info.get("splits", [])}
    if split not in splits:
        raise DataError(f"{folder}: a tensorflow_datasets folder; pass split= one of {', '.join(map(repr, splits))}")
    entry, name = splits[split], info["name"]
    counts = tuple(int(n) for n in entry.get("shardLengths", []))
    template = entry.get("filepathTemplate", "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}")
    paths = tuple(fs.join(fs.abspath(folder), template.format(
        DATASET=name, SPLIT=split, FILEFORMAT=info.get("fileFormat", "tfrecord"),
        SHARD_X_OF_Y=f"{i:05d}-of-{len(counts):05d}", SHARD_INDEX=i, NUM_SHARDS=len(counts)))
        for i in range(len(counts)))
    missing = fs.first_missing(paths)
    if missing:
        raise DataError(f"{folder}: {len(missing)} of the split's files listed in {INFO} are missing:"
                        + listed(missing) + "\nprepare the dataset again (tfds build / download_and_prepare)")
    supervised = tuple(i.get("featureKey") for i in info.get("supervisedKeys", {}).get("tuple", {}).get("items", []))
    supervised = supervised if len(supervised) == 2 else ()
    if not decoder:
        return TfdsSplit(paths, counts, supervised)
    decode, names = _decoder(folder, label_key or (supervised[1] if supervised else None))
    return TfdsSplit(paths, counts, supervised, decode, names)


def _decoder(folder: str, label_key: Optional[str]) -> tuple[Optional[Callable[..., Any]], tuple[str, ...]]:
    """TFDS's own decoder of the folder's features, and the label's class names (needs tensorflow-datasets)."""
    try:
        import tensorflow_datasets as tfds
    except ImportError:
        return None, ()  # process= or spec= then parse; tfpipe.records says so when neither is given
    with _local_metadata(folder) as metadata:
        features = tfds.builder_from_directory(metadata).info.features  # read whole here: the copy can go
    label = features[label_key] if label_key and label_key in features else None
    names = tuple(getattr(label, "names", ()) or ())
    return features.deserialize_example, names


@contextlib.contextmanager
def _local_metadata(folder: str) -> Iterator[str]:
    """`folder`, or for a remote one a local copy of its metadata (the .json and .txt files, a few KB),
    removed on exit.

    TFDS opens its folders with its own path library (etils), which knows gs:// and s3:// only
    through extra packages and ram:// not at all; its decoders need the metadata alone, while
    the records themselves are read by tfpipe's chain through tf.io.gfile.
    """
    if not fs.is_remote(folder):
        yield folder
        return
    with tempfile.TemporaryDirectory(prefix="tfpipe-tfds-") as copy:
        for name in fs.listdir(folder):
            if name.endswith((".json", ".txt")):
                with fs.open(fs.join(folder, name), "rb") as src, open(os.path.join(copy, name), "wb") as dst:
                    dst.write(src.read())
        yield copy
