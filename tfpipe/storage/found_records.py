"""TFRecord files that reach `find()` as a folder or a glob: recognized, and read as `tfpipe.records`.

A user's first try is `build_dataset("records/train-*", process=parse)`: without this, the glob
would be a list of files of one example each, and `parse` would be called with (path, label).
A file is a TFRecord file when its name says so (.tfrecord, .tfrec, .record) or its first
header is a TFRecord's (length + masked CRC; GZIP and ZLIB looked inside), so files named
`train-00000-of-01024` (tensorflow/models' ImageNet) are found too. No TensorFlow is loaded
until they are.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from tfpipe.core import filesystem as fs
from tfpipe.core import registry
from tfpipe.storage import tfrecord

_TFDS_INFO = "dataset_info.json"
_LOOKED_AT = 3  # files of a folder whose first bytes are read to decide
named_as_records = tfrecord.named_as_records


def records_folder(root: str) -> Optional[Any]:
    """`tfpipe.records(root)` when the folder's own files are TFRecords, else None."""
    names = sorted(n for n in fs.listdir(root) if not n.startswith(".") and not n.endswith("/"))
    if _TFDS_INFO in names:
        from tfpipe.errors import DataError

        raise DataError(f"{root}: a folder tensorflow_datasets prepared; read it with tfpipe.records({root!r}, "
                        f"split='train') (or another of its splits)")
    candidates = [fs.join(root, n) for n in names if registry.domain_of(n) is None]
    named = [p for p in candidates if named_as_records(p)]
    looked = (named or candidates)[:_LOOKED_AT]
    if not any(ok and (named_as_records(p) or tfrecord.sniff(p) is not None)
               for p, ok in zip(looked, fs.parallel(fs.isfile, looked))):
        return None
    from tfpipe.storage.records import records  # TensorFlow loads here: the folder holds records

    return records(root)


def record_files(what: str, paths: Sequence[str]) -> Optional[Any]:
    """`tfpipe.records(what)` when the files matched by `what` are TFRecords, else None."""
    first = list(paths[:1])
    if not first or not (named_as_records(first[0]) or tfrecord.sniff(first[0]) is not None):
        return None
    from tfpipe.storage.records import records

    return records(what)
