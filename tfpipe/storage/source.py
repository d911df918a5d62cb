"""ShardSource: a shard folder as a Source of the core chain (`read_folder`, which tfpipe.storage registers).

The folder's format reads each shard (expand, inside the chain's interleave) and parses its
records; a domain's shards then go through the domain's `stored_stages` (e.g. log-mel from
stored waveforms); your own examples come back as written: the same keys, dtypes, shapes.

Checked when the dataset is built, before training starts: the index (keys, types, shard
names inside the folder), each shard's size against the index (one stat each), and the
domain features asked for against the stored ones. Checked while reading, naming the
shard: fewer readable records than indexed (CRC errors, truncation), more records than
indexed, and in blocks, each block's example count.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Optional, Sequence

import tensorflow as tf

from tfpipe.core import filesystem as fs
from tfpipe.core.chain_input import ChainInput
from tfpipe.core.labels import check_class_names, class_ids_stage, pinned_ids
from tfpipe.core.registry import get_domain
from tfpipe.core.stage import Stage, user_stages
from tfpipe.errors import DataError
from tfpipe.storage import index as index_lib
from tfpipe.storage.codec import RecordCodec
from tfpipe.storage.folder import WORK_DIR, hold_for_reading
from tfpipe.storage.formats import get_format

INDEX_NAME = index_lib.INDEX_NAME


@dataclasses.dataclass(frozen=True)
class ShardSource:
    """A shard folder: TFRecord shards plus the tfpipe.json index that describes them.

    Attributes:
      root: the folder.
      paths: shard files, absolute, in index order.
      class_names: label id -> class name, as written (or as class_names= pinned them).
      index: the checked tfpipe.json (version-2 layout; v1 folders are upgraded in memory).
    """

    root: str
    paths: tuple[str, ...]
    class_names: tuple[str, ...]
    index: dict
    labels: tuple[int, ...] = ()
    kind = "shards"

    @property
    def num_examples(self) -> int:
        return int(self.index["num_examples"])

    @property
    def domain(self) -> str:
        """The domain that wrote the shards ("" for your own examples)."""
        return (self.index.get("domain") or {}).get("name", "")

    @property
    def codec(self) -> RecordCodec:
        index = self.index
        return RecordCodec.from_json(index["features"], index.get("label_key"), index.get("label_names", True))

    def with_class_names(self, class_names: Sequence[str]) -> "ShardSource":
        """The same shards with labels numbered by `class_names` (by name: one gather per batch).

        Raises:
          ValueError: a class the shards hold that `class_names` does not list, naming it.
        """
        class_names = check_class_names(class_names)
        pinned_ids(tuple(self.index["class_names"]), class_names, self.root)
        return dataclasses.replace(self, class_names=class_names)

    def examples_per_file(self) -> tuple[int, ...]:
        """Examples in each shard, from the index."""
        return tuple(int(s["num_examples"]) for s in self.index["shards"])

    def class_counts(self) -> Optional[list[int]]:
        """Examples per class from the index (None for folders written before it recorded them)."""
        shards = self.index["shards"]
        if not shards or any(s.get("class_counts") is None for s in shards):
            return None
        return [sum(column) for column in zip(*(s["class_counts"] for s in shards))]

    def config(self, features: Any = None) -> Any:
        """The domain config to read with: `features`, or the one the shards were written with."""
        stored = self.index.get("domain")
        if not stored:
            return None
        domain = get_domain(stored["name"])
        return domain.config(features) if features is not None else domain.config_from_dict(stored["config"])

    def chain_input(self, mode: str, features: Any = None, *, read: Any = None, process: Any = None,
                    batch_process: Any = None) -> ChainInput:
        """Shard files -> records (interleaved) -> parse -> the domain's stored stages -> yours.

        Raises:
          DataError: the shards store other features than `features` asks for, or a shard's
            size differs from the index (truncated or overwritten), naming the shard.
        """
        if read is not None:
            raise ValueError(f"{self.root}: read= is for files; a shard folder's records are read by "
                             f"tfpipe (pass process= or batch_process= to work on its examples)")
        index = self.index
        index_lib.check_readable(index, fs.join(self.root, INDEX_NAME))
        fs.parallel(lambda i: _check_size(self.paths[i], index["shards"][i]["bytes"], self.root),  # damage caught
                    range(len(self.paths)), remote=fs.is_remote(self.root))  # before training starts
        fmt, codec = get_format(index["format"]), self.codec
        stored = index.get("domain")
        if stored:
            keys = list(stored["features"])
            # Numbers stored narrower than the domain hands them (float16 on disk) are cast back;
            # bytes (an encoded image) are decoded by the domain's stored stages instead.
            cast = {k: v["dtype"] for k, v in stored["features"].items()
                    if v["dtype"] not in ("bytes", "str") and v["dtype"] != codec.fields[k].dtype}
            stages = self._stored_stages(features, mode)
        else:
            if features is not None:
                raise ValueError(f"{self.root}: features={type(features).__name__}(...) but these shards hold "
                                 f"your own examples ({', '.join(codec.fields)}); leave features unset")
            keys, cast, stages = list(codec.fields), {}, []
        stages = fmt.stages(codec, keys, cast) + stages
        ids = pinned_ids(tuple(index["class_names"]), self.class_names, self.root)
        stages += [class_ids_stage(ids)] if ids is not None else []  # class_names= pinned other ids
        stages += user_stages(process=process, batch_process=batch_process)
        shards = index["shards"]
        files = tf.data.Dataset.from_tensor_slices((
            list(self.paths), tf.constant([s["num_records"] for s in shards], tf.int64),
            tf.constant([s["num_examples"] for s in shards], tf.int64),
            tf.constant([s["block_size"] for s in shards], tf.int64)))
        block = max([s["block_size"] for s in shards] or [1])
        return ChainInput(files, len(self.paths), self.num_examples, tuple(stages),
                          expand=fmt.expand(codec, keys, cast), block_length=fmt.interleave_block(block),
                          blocked=fmt.blocked, examples_per_block=block,
                          fixed_shapes=not any(codec.fields[k].variable for k in keys), count_of=_examples_of,
                          paths=self.paths, records_per_file=tuple(s["num_records"] for s in shards),
                          example_bytes=sum(int(s["bytes"]) for s in shards) // max(1, self.num_examples))

    def _stored_stages(self, features: Any, mode: str = "eval") -> list[Stage]:
        stored = self.index["domain"]
        try:
            return get_domain(stored["name"]).stored_stages(
                {"store": stored["store"], "config": stored["config"]}, self.config(features), mode)
        except DataError as e:
            raise DataError(str(e).replace("the shard index", fs.join(self.root, INDEX_NAME), 1)) from None


def _examples_of(path, num_records, num_examples, block_size):
    """A shard file element's example count (the resumable order skips by examples)."""
    return num_examples


def _check_size(path: str, expected: int, root: str) -> None:
    """DataError naming the shard when its size on disk differs from the index, or it cannot be read."""
    problem = index_lib.size_problem(path, expected)
    if problem:
        raise DataError(f"{path}: damaged shard: {problem}; rerun the same tfpipe prepare command to "
                        f"rewrite it, then `tfpipe inspect --verify {root}`")
    if not fs.is_remote(path) and not os.access(path, os.R_OK):
        raise DataError(f"{path}: shard cannot be read (permission denied); give this user read access "
                        f"(chmod a+r), or read the folder as its owner")


def read_folder(root: str) -> Optional[ShardSource]:
    """The ShardSource of a folder with tfpipe.json (None for other folders).

    The process keeps a shared lock on the folder's index from now on, so a tfpipe prepare
    into it is refused while this process may still read it (tfpipe.storage.folder).

    Raises:
      DataError: the folder is a prepare that has not finished (its work folder, no index yet),
        or one that is rewriting it now.
    """
    hold_for_reading(root)
    index = index_lib.read_index(root)
    if index is None:
        if fs.isdir(fs.join(root, WORK_DIR)):
            raise DataError(f"{root}: an unfinished tfpipe prepare (no {INDEX_NAME} yet; {WORK_DIR}/ holds its "
                            f"progress): rerun the same prepare command to finish it")
        return None
    paths = tuple(fs.join(root, s["file"]) for s in index["shards"])
    missing = fs.first_missing(paths)
    if missing:
        raise DataError(f"{root}: {len(missing)} shard files listed in {INDEX_NAME} are missing, e.g. "
                        f"{missing[0]}; rerun the same tfpipe prepare command to finish them")
    return ShardSource(root, paths, tuple(index["class_names"]), index)


def check_features(source: ShardSource, features: Any) -> None:
    """DataError naming each field where the stored features differ from the requested ones."""
    if source.index.get("domain"):
        source._stored_stages(features)  # pylint: disable=protected-access

