"""tfpipe.records: TFRecord files any writer produced (TF-slim, tensorflow/models, Beam, TFDS) as a Source.

Through the one chain: files shuffled -> parallel interleave -> record shuffle buffer ->
parse / your process(record) -> batch -> batch_process -> prefetch, every toggle applying.
Files are scanned once before training (compression, record counts, damage; counts are
remembered in the user's cache folder), so eval gives every record once, resuming starts
mid-stream, and a file that is not a TFRecord is named before any step runs.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Any, Callable, Mapping, Optional, Sequence, Union

import tensorflow as tf

from tfpipe.core import filesystem as fs
from tfpipe.core import registry
from tfpipe.core.chain_input import ChainInput
from tfpipe.core.labels import check_class_names, pinned_ids
from tfpipe.core.registry import domain_of_config
from tfpipe.core.stage import Stage, as_stage, user_stages
from tfpipe.errors import DataError, listed
from tfpipe.storage import tfds_folder, tfrecord
from tfpipe.storage.formats import checked_records
from tfpipe.storage.record_parse import FILE_STRIDE, Labels, check_first_records, need_labels, parse_fn, split_label


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
      class_names: label id -> name: the writer's (TFDS ClassLabel) or the ones pinned by class_names=.
      decode: a per-record decoder that gives a features dict (TFDS's own), else None.
      unlabeled: the records hold no label: eval gives label 0 (train refuses).
      feature: as_supervised: the one feature yielded instead of the features dict.
      encoded_key: a spec key holding an encoded value (an image file) a domain decodes.
      features: that domain's config.
      writer_names: the class names the writer recorded (TFDS), which class_names renumbers.
    """

    root: str
    paths: tuple[str, ...]
    compressions: tuple[str, ...]
    counts: tuple[int, ...]
    spec: Optional[Mapping[str, Any]] = dataclasses.field(default=None, compare=False)
    label_key: Optional[str] = None
    class_names: tuple[str, ...] = ()
    decode: Optional[Callable[..., Any]] = dataclasses.field(default=None, compare=False)
    unlabeled: bool = False
    feature: Optional[str] = None
    encoded_key: Optional[str] = None
    features: Any = None
    writer_names: tuple[str, ...] = ()
    kind = "records"  # what Source.kind names (not a field)

    @property
    def num_examples(self) -> int:
        return sum(self.counts)

    def examples_per_file(self) -> tuple[int, ...]:
        return self.counts

    def with_class_names(self, class_names: Sequence[str]) -> "RecordsSource":
        """The same records with labels numbered by `class_names`: the writer's class names renumbered
        by name, names (a tf.string label) looked up, ids checked to be below their count."""
        class_names = check_class_names(class_names)
        if self.writer_names:
            pinned_ids(self.writer_names, class_names, self.root or "records")  # refuses an unknown class
        return dataclasses.replace(self, class_names=class_names)

    def chain_input(self, mode: str, features: Any = None, *, read: Any = None, process: Any = None,
                    batch_process: Any = None) -> ChainInput:
        """Files -> records (interleaved) -> parse (or decode) -> a domain's decode -> your process -> batch
        -> batch_process."""
        where = self.root or "records"
        if read is not None:
            raise ValueError(f"{where}: read= is for files of one example; TFRecord files are read by tfpipe "
                             f"(pass process= to work on each record)")
        if features is not None and self.encoded_key is None:
            raise ValueError(f"{where}: features= configures a domain; records are parsed by spec= or your "
                             f"process= (or name a key a domain decodes: tfpipe.records(..., encoded_key=KEY, "
                             f"features=CONFIG))")
        stages = self._parse_stages(mode, process)
        if self.encoded_key is not None:
            domain = domain_of_config(features if features is not None else self.features)
            stages += domain.record_stages(domain.config(features if features is not None else self.features),
                                           mode, self.encoded_key)
        if self.feature is not None:
            key = self.feature
            stages.append(Stage("supervised", lambda f, label: (f[key], label), batchable=True))
        stages += user_stages(process=process if self._parses else None, batch_process=batch_process)
        files = tf.data.Dataset.from_tensor_slices((list(self.paths), list(self.compressions),
                                                    tf.constant(self.counts, tf.int64),
                                                    tf.range(len(self.paths), dtype=tf.int64)))
        return ChainInput(files, len(self.paths), self.num_examples, tuple(stages), expand=_read_file,
                          block_length=16, count_of=_count_of, paths=self.paths, records_per_file=self.counts)

    @property
    def _parses(self) -> bool:
        return self.spec is not None or self.decode is not None

    def _labels(self, mode: str) -> Labels:
        ids = None
        if self.writer_names and self.class_names != self.writer_names:
            ids = tuple(pinned_ids(self.writer_names, self.class_names, self.root) or range(len(self.writer_names)))
        return Labels(self.label_key, mode, self.unlabeled, self.class_names, ids)

    def _parse_stages(self, mode: str, process: Any) -> list[Stage]:
        """The first stage, over checked_records' (position, record) elements."""
        if self._parses:
            labels = self._labels(mode)
            need_labels(labels, self.root)
            if self.spec is not None:
                return [Stage("parse", parse_fn(self.spec, self.paths, labels), batchable=True)]
            decode = self.decode
            return [Stage("decode", lambda position, record: split_label(dict(decode(record)), labels,
                                                                         tf.constant([], tf.int64)))]
        if process is None:
            tfds = (" or install tensorflow-datasets (pip install tfpipe[tfds]) to decode this TFDS folder's "
                    "features" if self.root and tfds_folder.is_tfds_folder(self.root) else "")
            raise ValueError(f"{self.root or 'records'}: pass spec= (a dict of tf.io.FixedLenFeature / "
                             f"VarLenFeature / RaggedFeature, with label_key=) to have tfpipe parse the records, "
                             f"or process=(record) -> (features, label){tfds}")
        stage = as_stage(process, "process", random=True)
        return [dataclasses.replace(stage, fn=lambda position, record: stage.fn(record))]


def records(files: Union[str, os.PathLike, Sequence[Union[str, os.PathLike]]], *, compression: str = "auto",
            spec: Optional[Mapping[str, Any]] = None, label_key: Optional[str] = None,
            split: Optional[str] = None, progress: bool = True, class_names: Optional[Sequence[str]] = None,
            unlabeled: bool = False, as_supervised: bool = False, encoded_key: Optional[str] = None,
            features: Any = None) -> RecordsSource:
    """A Source of TFRecord files any writer produced, for build_dataset / make_input_fn / mix.

    Args:
      files: a glob ("records/train-*"), a list of paths, a folder of TFRecord files (named
        *.tfrecord* / *.tfrec / *.record*, or found so by their first header) holding one
        prefix (or pass `split`), or a folder tensorflow_datasets prepared (dataset_info.json).
      compression: "auto" (read from each file's first bytes), "", "GZIP" or "ZLIB".
      spec: a dict of tf.io.FixedLenFeature / VarLenFeature / RaggedFeature: tfpipe parses the
        records (on whole batches with tf.io.parse_example when vectorize is on and nothing
        per-example follows), after checking it against each file's first record. Without it,
        pass process=(record) -> (features, label) to build_dataset. A TFDS folder needs
        neither when tensorflow-datasets is installed.
      label_key: the key of the label in `spec` (or in the TFDS features; default: its
        supervised label): int ids, or class names (tf.string) with `class_names`.
      split: a folder's files of one prefix ("train" for train-*.tfrecord), or a TFDS split.
      progress: a progress bar while files are scanned for the first time.
      class_names: number the labels by these names (e.g. the training source's class_names):
        TFDS class names are renumbered, tf.string labels looked up, int ids checked against them.
      unlabeled: the records hold no label; eval then gives label 0 (train refuses).
      as_supervised: yield (feature, label) instead of ({key: feature}, label): the TFDS
        folder's supervised input, or the one feature the spec leaves besides the label.
      encoded_key: a key whose value a domain decodes per example, at its own chain's speed
        (e.g. "image/encoded" with an image config: its fused decode-and-crop); without a
        spec, the spec is that key (bytes) and label_key (int64).
      features: the config of the domain that decodes `encoded_key` (build_dataset's
        features= may replace it with another of the same domain).

    Returns:
      A RecordsSource.

    Raises:
      DataError: files that are missing, not TFRecords, or cut short, all named at once with
        the fix; a spec that does not fit a file's first record (or SequenceExample records);
        a folder of several prefixes without split; a TFDS folder without the split.
    """
    if compression not in ("auto",) + tfrecord.COMPRESSIONS:
        raise ValueError(f"compression={compression!r}: allowed values are 'auto', '', 'GZIP', 'ZLIB'")
    spec = _encoded_spec(spec, label_key, encoded_key, features)
    if isinstance(files, (str, os.PathLike)) and fs.isdir(os.fspath(files)):
        folder = os.fspath(files)
        if tfds_folder.is_tfds_folder(folder):
            found = _tfds(folder, split, spec, label_key, as_supervised)
        else:
            found = _scanned(folder, _folder_files(folder, split), compression, spec, label_key, progress)
    else:
        if split is not None:
            raise ValueError(f"split={split!r} picks one prefix of a folder's files (train-*, eval-*) or a "
                             f"tensorflow_datasets split; with a glob or a list, name that split's files")
        patterns = [os.fspath(files)] if isinstance(files, (str, os.PathLike)) else [os.fspath(f) for f in files]
        paths = tfrecord.files_in(patterns)
        if not paths:
            for pattern in patterns:
                fs.check_bucket(pattern)
            raise DataError(f"{', '.join(patterns) or 'records'}: no files match; pass TFRecord paths, a glob, "
                            f"or a folder")
        found = _scanned(patterns[0] if len(patterns) == 1 else "", paths, compression, spec, label_key, progress)
    found = dataclasses.replace(found, unlabeled=unlabeled, encoded_key=encoded_key, features=features)
    if as_supervised and found.feature is None:
        found = dataclasses.replace(found, feature=_one_feature(found))
    return found.with_class_names(class_names) if class_names is not None else found


def _encoded_spec(spec: Optional[Mapping[str, Any]], label_key: Optional[str], encoded_key: Optional[str],
                  features: Any) -> Optional[Mapping[str, Any]]:
    """The spec to parse with: the user's, or for an encoded key alone that key (bytes) and the label (int64)."""
    if encoded_key is None:
        if features is not None:
            raise ValueError("features= configures the domain that decodes encoded_key=; name the key too")
        return spec
    if features is None:
        configs = ", ".join(d.config_class.__name__ for d in registry.domains().values())
        raise ValueError(f"encoded_key={encoded_key!r}: pass features= the config of the domain that decodes it "
                         f"(one of {configs})")
    domain_of_config(features)  # a config no registered domain has is refused here
    if spec is None:
        spec = {encoded_key: tf.io.FixedLenFeature([], tf.string)}
        if label_key is not None:
            spec[label_key] = tf.io.FixedLenFeature([], tf.int64)
    elif encoded_key not in spec:
        raise ValueError(f"encoded_key={encoded_key!r}: not a key of spec ({', '.join(map(repr, spec))})")
    return spec


def _one_feature(found: RecordsSource) -> str:
    """as_supervised: the one feature the records give besides the label, or a ValueError naming them."""
    if found.spec is None:
        raise ValueError(f"{found.root or 'records'}: as_supervised=True is for records tfpipe parses (spec=, a "
                         f"TFDS folder); your process= returns (feature, label) itself")
    keys = [k for k in found.spec if k != found.label_key]
    if found.encoded_key is not None:
        keys = [k for k in keys if k != found.encoded_key] + [found.features.feature_key
                                                              if hasattr(found.features, "feature_key") else ""]
    if len(keys) != 1 or not keys[0]:
        raise ValueError(f"{found.root or 'records'}: as_supervised=True yields one feature, but these records give "
                         f"{', '.join(map(repr, keys))}; pick one with build_dataset(..., feature_key=KEY)")
    return keys[0]


def _folder_files(folder: str, split: Optional[str]) -> list[str]:
    """The folder's TFRecord files (of `split`'s prefix), or a DataError: none, or several prefixes."""
    root = fs.abspath(folder)
    names = sorted(n for n in fs.listdir(folder) if not n.startswith(".") and not n.endswith("/"))
    named = [n for n in names if tfrecord.named_as_records(n)]
    # Files named otherwise (train-00000-of-01024, as tensorflow/models writes them): found by their first header.
    others = [n for n in names if registry.domain_of(n) is None and n not in named]
    named += [n for n, c in zip(others, fs.parallel(lambda n: tfrecord.sniff(fs.join(root, n)), others,
                                                    remote=fs.is_remote(root))) if c is not None]
    named.sort()
    found = [n for n, ok in zip(named, fs.parallel(fs.isfile, [fs.join(root, n) for n in named])) if ok]
    if not found:
        raise DataError(f"{folder}: no TFRecord files (*.tfrecord*, *.tfrec, *.record*) in the folder; pass a glob "
                        f"or a list of the files")
    prefixes: dict[str, list[str]] = {}
    for name in found:
        prefixes.setdefault(_prefix(name), []).append(name)
    if split is not None:
        found = [n for n in found if re.search(rf"(^|[-_.]){re.escape(split)}($|[-_.])", _stem(n))]
        if not found:
            raise DataError(f"{folder}: no files of split={split!r}; its files' prefixes are "
                            f"{', '.join(map(repr, prefixes))}")
    elif len(prefixes) > 1:
        raise DataError(f"{folder}: TFRecord files of {len(prefixes)} prefixes, which would be read as one set:"
                        + listed(f"{p}*: {len(n)} files" for p, n in prefixes.items())
                        + f"\npass split= one of {', '.join(map(repr, prefixes))} (tfpipe.records(folder, "
                          f"split='train')), or a glob of the files to read")
    return [fs.join(root, n) for n in found]


def _stem(name: str) -> str:
    """The name before its TFRecord suffix ("train-00000-of-00010.tfrecord.gz" -> "train-00000-of-00010")."""
    lower = name.lower()
    cuts = [lower.find(s) for s in tfrecord.SUFFIXES if s in lower]
    return name[:min(cuts)] if cuts else name


def _prefix(name: str) -> str:
    """The name without its suffix and shard numbering ("train-00000-of-00010.tfrecord" -> "train")."""
    return re.sub(r"([-_.]?\d+)?([-_.]of[-_.]?\d+)?$", "", _stem(name)) or _stem(name)


def _scanned(root: str, paths: Sequence[str], compression: str, spec: Any, label_key: Optional[str],
             progress: bool) -> RecordsSource:
    """Scans (or recalls) every file; DataError listing each unusable one with the fix."""
    _check_spec(spec, label_key)
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
    source = RecordsSource(root, tuple(f.path for f in found), tuple(f.compression for f in found),
                           tuple(f.num_records for f in found), spec, label_key)
    if spec is not None:
        check_first_records(source.paths, source.compressions, source.counts, spec)
    return source


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


def _read_file(path, compression, num_records, file_index):
    return checked_records(path, num_records, compression=compression, first=file_index * FILE_STRIDE,
                           damaged=": fewer readable records than when tfpipe.records scanned it (the file changed "
                                   "or a record's data is damaged); build the dataset again to rescan it",
                           missing=": file missing: removed after the dataset was built; build the dataset again",
                           extra=": more records than when tfpipe.records scanned it (the file changed); build the "
                                 "dataset again to rescan it")


def _count_of(path, compression, num_records, file_index):
    return num_records


def _tfds(folder: str, split: Optional[str], spec: Any, label_key: Optional[str], as_supervised: bool) -> RecordsSource:
    """A TFDS-prepared folder: files and counts from dataset_info.json; TFDS decodes when installed."""
    found = tfds_folder.read_split(folder, split, label_key, decoder=spec is None)
    label_key = label_key or (found.supervised[1] if found.supervised else None)
    if spec is not None:
        _check_spec(spec, label_key)
        check_first_records(found.paths, ("",) * len(found.paths), found.counts, spec)
    feature = None
    if as_supervised:
        if not found.supervised:
            raise ValueError(f"{folder}: as_supervised=True, but the dataset declares no supervised keys; pick "
                             f"the feature with build_dataset(..., feature_key=KEY)")
        feature = found.supervised[0]
    return RecordsSource(folder, found.paths, ("",) * len(found.paths), found.counts, spec, label_key,
                         found.class_names, found.decode, feature=feature, writer_names=found.class_names)
