"""tfpipe.records: TFRecord files any writer produced (TF-slim, tensorflow/models, Beam, TFDS) as a Source.

Through the one chain: files shuffled -> parallel interleave -> record shuffle buffer ->
parse / your process(record) -> batch -> batch_process -> prefetch, every toggle applying.
Files are scanned once before training (compression, record counts, damage; counts are
remembered in the user's cache folder), so eval gives every record once, resuming starts
mid-stream, and a file that is not a TFRecord is named before any step runs.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Callable, Mapping, Optional, Sequence, Union

import tensorflow as tf

from tfpipe.core import filesystem as fs
from tfpipe.core.chain_input import ChainInput
from tfpipe.core.stage import Stage, as_stage, user_stages
from tfpipe.errors import DataError, listed
from tfpipe.storage import tfrecord
from tfpipe.storage.formats import checked_records

_SUFFIXES = (".tfrecord", ".tfrecords", ".tfrec", ".record", ".records")
_TFDS_INFO = "dataset_info.json"


@dataclasses.dataclass(frozen=True)
class RecordsSource:
    """TFRecord files: their paths, compression and record counts, and how a record becomes an example.

    Attributes:
      root: what the user named (a glob, a folder, or "" for a list).
      paths: the files, in the order given (globs sorted).
      compressions: "", "GZIP" or "ZLIB" per file.
      counts: records per file.
      spec: tf.io feature spec to parse with (None: your process= parses).
      label_key: the spec key that is the label.
      class_names: label id -> name, where the writer recorded them (TFDS ClassLabel).
      decode: a per-record decoder that gives a features dict (TFDS's own), else None.
    """

    root: str
    paths: tuple[str, ...]
    compressions: tuple[str, ...]
    counts: tuple[int, ...]
    spec: Optional[Mapping[str, Any]] = dataclasses.field(default=None, compare=False)
    label_key: Optional[str] = None
    class_names: tuple[str, ...] = ()
    decode: Optional[Callable[..., Any]] = dataclasses.field(default=None, compare=False)
    kind = "records"  # what Source.kind names (not a field)

    @property
    def num_examples(self) -> int:
        return sum(self.counts)

    def examples_per_file(self) -> tuple[int, ...]:
        return self.counts

    def chain_input(self, mode: str, features: Any = None, *, read: Any = None, process: Any = None,
                    batch_process: Any = None) -> ChainInput:
        """Files -> records (interleaved) -> parse (or decode) -> your process -> batch -> batch_process."""
        if read is not None:
            raise ValueError(f"{self.root or 'records'}: read= is for files of one example; TFRecord files are "
                             f"read by tfpipe (pass process= to work on each record)")
        if features is not None:
            raise ValueError(f"{self.root or 'records'}: features= configures a domain; records are parsed by "
                             f"spec= or your process=")
        first, = self._parse_stages(mode, process)
        stages = [_without_position(first)] + user_stages(process=process if self._parses else None,
                                                           batch_process=batch_process)
        files = tf.data.Dataset.from_tensor_slices((list(self.paths), list(self.compressions),
                                                    tf.constant(self.counts, tf.int64)))
        return ChainInput(files, len(self.paths), self.num_examples, tuple(stages), expand=_read_file,
                          block_length=16, count_of=_count_of, paths=self.paths, records_per_file=self.counts)

    @property
    def _parses(self) -> bool:
        return self.spec is not None or self.decode is not None

    def _parse_stages(self, mode: str, process: Any) -> list[Stage]:
        if self.decode is not None:
            return [Stage("decode", _labelled(self.decode, self.label_key, mode))]
        if self.spec is not None:
            return [Stage("parse", _parse_fn(self.spec, self.label_key, mode), batchable=True)]
        if process is None:
            tfds = (" or install tensorflow-datasets (pip install tfpipe[tfds]) to decode this TFDS folder's "
                    "features" if self.root and fs.isfile(fs.join(self.root, _TFDS_INFO)) else "")
            raise ValueError(f"{self.root or 'records'}: pass spec= (a dict of tf.io.FixedLenFeature / "
                             f"VarLenFeature / RaggedFeature, with label_key=) to have tfpipe parse the records, "
                             f"or process=(record) -> (features, label){tfds}")
        return [as_stage(process, "process", random=True)]


def records(files: Union[str, os.PathLike, Sequence[Union[str, os.PathLike]]], *, compression: str = "auto",
            spec: Optional[Mapping[str, Any]] = None, label_key: Optional[str] = None,
            split: Optional[str] = None, progress: bool = True) -> RecordsSource:
    """A Source of TFRecord files any writer produced, for build_dataset / make_input_fn / mix.

    Args:
      files: a glob ("records/train-*"), a list of paths, a folder of *.tfrecord* / *.tfrec /
        *.record* files, or a folder tensorflow_datasets prepared (dataset_info.json; pass `split`).
      compression: "auto" (read from each file's first bytes), "", "GZIP" or "ZLIB".
      spec: a dict of tf.io.FixedLenFeature / VarLenFeature / RaggedFeature: tfpipe parses the
        records (on whole batches with tf.io.parse_example when vectorize is on and nothing
        per-example follows). Without it, pass process=(record) -> (features, label) to
        build_dataset. A TFDS folder needs neither when tensorflow-datasets is installed.
      label_key: the key of the label in `spec` (or in the TFDS features; default: its
        supervised label). Required in train mode when tfpipe parses.
      split: a TFDS folder's split ("train", "test", ...).
      progress: a progress bar while files are scanned for the first time.

    Returns:
      A RecordsSource.

    Raises:
      DataError: files that are missing, not TFRecords, or cut short, all named at once with
        the fix; a TFDS folder without the split.
    """
    if compression not in ("auto",) + tfrecord.COMPRESSIONS:
        raise ValueError(f"compression={compression!r}: allowed values are 'auto', '', 'GZIP', 'ZLIB'")
    if isinstance(files, (str, os.PathLike)) and fs.isdir(os.fspath(files)):
        folder = os.fspath(files)
        if fs.isfile(fs.join(folder, _TFDS_INFO)):
            return _tfds_folder(folder, split, spec, label_key)
        return _scanned(folder, _folder_files(folder), compression, spec, label_key, progress)
    if split is not None:
        raise ValueError(f"split={split!r} is for a folder that tensorflow_datasets prepared (with {_TFDS_INFO})")
    patterns = [os.fspath(files)] if isinstance(files, (str, os.PathLike)) else [os.fspath(f) for f in files]
    paths = tfrecord.files_in(patterns)
    if not paths:
        for pattern in patterns:
            fs.check_bucket(pattern)
        raise DataError(f"{', '.join(patterns) or 'records'}: no files match; pass TFRecord paths, a glob, or a folder")
    return _scanned(patterns[0] if len(patterns) == 1 else "", paths, compression, spec, label_key, progress)


def _folder_files(folder: str) -> list[str]:
    root = fs.abspath(folder)
    named = sorted(n for n in fs.listdir(folder) if not n.startswith(".") and any(s in n.lower() for s in _SUFFIXES))
    found = [fs.join(root, n) for n, ok in zip(named, fs.parallel(fs.isfile, [fs.join(root, n) for n in named])) if ok]
    if not found:
        raise DataError(f"{folder}: no TFRecord files (*.tfrecord*, *.tfrec, *.record*) in the folder; pass a glob "
                        f"or a list of the files")
    return found


def _scanned(root: str, paths: Sequence[str], compression: str, spec: Any, label_key: Optional[str],
             progress: bool) -> RecordsSource:
    """Scans (or recalls) every file; DataError listing each unusable one with the fix."""
    bar = _bar(len(paths), progress)
    found, seconds, scanned = tfrecord.scan_all(paths, compression, progress=bar.update if bar else None)
    if bar:
        bar.close()
    bad = [f for f in found if f.problem]
    if bad:
        raise DataError(f"{len(bad)} of {len(found)} files cannot be read as TFRecords:"
                        + listed(f"{f.path}: {f.problem}" for f in bad)
                        + "\nremove them from the list, or rewrite them (TFRecordWriter); a file written "
                          "with compression needs compression='GZIP'/'ZLIB' if 'auto' misreads it")
    if scanned and seconds > 2:
        print(f"tfpipe: counted the records of {scanned} TFRecord files in {seconds:.1f} s (once: remembered in "
              f"{tfrecord.cache_dir()})", flush=True)
    _check_spec(spec, label_key)
    return RecordsSource(root, tuple(f.path for f in found), tuple(f.compression for f in found),
                         tuple(f.num_records for f in found), spec, label_key)


def _bar(total: int, progress: bool):
    if not progress or total < 50:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc="scanning TFRecord files (once)", unit="file", leave=False)


def _check_spec(spec: Any, label_key: Optional[str]) -> None:
    if spec is None:
        if label_key is not None:
            raise ValueError(f"label_key={label_key!r} without spec=: the label is found in records tfpipe parses")
        return
    kinds = (tf.io.FixedLenFeature, tf.io.VarLenFeature, tf.io.RaggedFeature, tf.io.FixedLenSequenceFeature,
             tf.io.SparseFeature)
    bad = [k for k, v in dict(spec).items() if not isinstance(v, kinds)]
    if bad:
        raise ValueError(f"spec: {', '.join(map(repr, bad))} are not tf.io features (FixedLenFeature, VarLenFeature, "
                         f"RaggedFeature, ...)")
    if label_key is not None and label_key not in spec:
        raise ValueError(f"label_key={label_key!r}: not a key of spec ({', '.join(map(repr, spec))})")


def _parse_fn(spec: Mapping[str, Any], label_key: Optional[str], mode: str) -> Callable[..., Any]:
    """records (one, or a batch) -> (features, label), one parse_example call per batch."""
    spec = dict(spec)

    def parse(records):
        parsed = (tf.io.parse_example(records, spec) if records.shape.rank else
                  tf.io.parse_single_example(records, spec))
        return _split_label(parsed, label_key, mode, tf.shape(records, out_type=tf.int64))

    return parse


def _labelled(decode: Callable[..., Any], label_key: Optional[str], mode: str) -> Callable[..., Any]:
    def decoded(record):
        return _split_label(dict(decode(record)), label_key, mode, tf.constant([], tf.int64))

    return decoded


def _split_label(features: dict, label_key: Optional[str], mode: str, batch_shape: tf.Tensor):
    if label_key is None:
        if mode == "train":
            raise ValueError("records: name the label with label_key= (or pass process= returning (features, "
                             "label)); only eval and predict may go without labels")
        return features, tf.zeros(batch_shape, tf.int64)  # unlabeled: predict / eval without labels
    label = features.pop(label_key)
    return features, tf.cast(label, tf.int64) if label.dtype.is_integer else label


def _without_position(stage: Stage) -> Stage:
    """The stage on a (position, record) element of checked_records: the record alone goes to it."""
    return dataclasses.replace(stage, fn=lambda position, record: stage.fn(record))


def _read_file(path, compression, num_records):
    return checked_records(path, num_records, compression=compression,
                           damaged=": fewer readable records than when tfpipe.records scanned it (the file changed "
                                   "or a record's data is damaged); build the dataset again to rescan it",
                           missing=": file missing: removed after the dataset was built; build the dataset again",
                           extra=": more records than when tfpipe.records scanned it (the file changed); build the "
                                 "dataset again to rescan it")


def _count_of(path, compression, num_records):
    return num_records


# --- folders tensorflow_datasets prepared ---------------------------------------------------------

def _tfds_folder(folder: str, split: Optional[str], spec: Any, label_key: Optional[str]) -> RecordsSource:
    """A TFDS-prepared folder: files and counts from dataset_info.json; TFDS decodes when installed."""
    with fs.open(fs.join(folder, _TFDS_INFO), "rb") as f:
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
        raise DataError(f"{folder}: {len(missing)} of the split's files listed in {_TFDS_INFO} are missing:"
                        + listed(missing) + "\nprepare the dataset again (tfds build / download_and_prepare)")
    supervised = [i.get("featureKey") for i in info.get("supervisedKeys", {}).get("tuple", {}).get("items", [])]
    label_key = label_key or (supervised[1] if len(supervised) == 2 else None)
    decode, names = None, ()
    if spec is None:
        decode, names = _tfds_decoder(folder, label_key)
    else:
        _check_spec(spec, label_key)
    return RecordsSource(folder, paths, ("",) * len(paths), counts, spec, label_key, names, decode)


def _tfds_decoder(folder: str, label_key: Optional[str]) -> tuple[Optional[Callable[..., Any]], tuple[str, ...]]:
    """TFDS's own decoder of the folder's features, and the label's class names (needs tensorflow-datasets)."""
    try:
        import tensorflow_datasets as tfds
    except ImportError:
        return None, ()  # process= or spec= then parse; _parse_stages says so when neither is given
    features = tfds.builder_from_directory(_local_metadata(folder)).info.features
    label = features[label_key] if label_key and label_key in features else None
    names = tuple(getattr(label, "names", ()) or ())
    return features.deserialize_example, names


def _local_metadata(folder: str) -> str:
    """`folder`, or for a remote one a local copy of its metadata (the .json and .txt files, a few KB).

    TFDS opens its folders with its own path library (etils), which knows gs:// and s3:// only
    through extra packages and ram:// not at all; its decoders need the metadata alone, while
    the records themselves are read by tfpipe's chain through tf.io.gfile.
    """
    if not fs.is_remote(folder):
        return folder
    import tempfile

    copy = tempfile.mkdtemp(prefix="tfpipe-tfds-")
    for name in fs.listdir(folder):
        if name.endswith((".json", ".txt")):
            with fs.open(fs.join(folder, name), "rb") as src, open(os.path.join(copy, name), "wb") as dst:
                dst.write(src.read())
    return copy
