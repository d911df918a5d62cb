"""tfpipe.json: the shard index. Load (checked, v1 folders upgraded in memory), make, save atomically.

The index is the only thing a reader trusts: it is written last, after every shard is
whole, and removed before the first shard of a rerun is replaced. Layout (version 2):

  format        "tfrecord-block" | "tfrecord-example"
  version       2
  split         shard file prefix
  num_examples  total
  class_names   label id -> name
  label_key     the label's key in the records (None: unlabeled)
  features      the record schema: key -> {"dtype", "shape"} as stored
  domain        None (your own examples) or {"name", "store", "config", "features"}: the
                domain that made them, its config, and the dtypes it hands the reader
  notes         counts of silent conversions (cropped, padded, resampled, mixed_to_mono)
  key           identifies the command and inputs that made the folder (a rerun of the same
                command on a complete folder is recognized without reading a shard)
  shards        [{file, num_examples, num_records, block_size, bytes, sha256, class_counts}]
  rejected      [{path, reason}] inputs not written, with why
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Optional, Sequence

from tfpipe.core import filesystem as fs
from tfpipe.errors import DataError

INDEX_NAME = "tfpipe.json"
VERSION = 2
LEGACY_FORMAT = "tfpipe-shards"  # version 1 folders (one example per record, audio only)
_HASH_BLOCK = 1 << 20  # 1 MiB reads when hashing shards
_SHARD_KEYS = ("file", "num_examples", "bytes", "sha256")
_FIX = "rerun the tfpipe prepare command that wrote the folder"


def sha256_file(path: str) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with fs.open(path, "rb") as f:
        for block in iter(lambda: f.read(_HASH_BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


def fsync_dir(path: str) -> None:
    """Makes renames inside `path` durable (nothing to do on an object store)."""
    fs.fsync_dir(path)


def write_json_atomic(path: str, value: Any, tmp_dir: Optional[str] = None) -> None:
    """Writes JSON so that readers see the old file or the whole new one.

    Locally: a temp name, fsync, rename. On an object store: one upload under the final name
    (an object appears whole when its writer closes it; there is no atomic rename).

    Args:
      path: the final name.
      value: JSON-serializable value.
      tmp_dir: where the temp file goes (same filesystem); default: next to `path`.

    Raises:
      DataError: the disk is full (the temp file is removed).
    """
    try:
        fs.write_atomic(path, (json.dumps(value, indent=1) + "\n").encode(), tmp_dir)
    except OSError as e:
        raise disk_error(e, path) from e


def disk_error(error: BaseException, path: str) -> BaseException:
    """A DataError for a full disk or file-size limit (naming the file), else `error` itself."""
    import errno

    code = getattr(error, "errno", None)
    text = str(error)
    if code in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT) or "No space left" in text or "too large" in text:
        return DataError(f"{path}: cannot write: the disk is full or the file size limit was reached "
                         f"({getattr(error, 'strerror', None) or text.splitlines()[0][:120]}); free space and "
                         f"rerun the same command (complete shards are kept)")
    return error


def make_index(header: dict, shards: Sequence[dict], rejected: Sequence[dict]) -> dict:
    """The tfpipe.json dict: header keys, totals, shards in plan order, rejected inputs by path."""
    index = {"format": header["format"], "version": VERSION, "split": header["split"],
             "num_examples": sum(s["num_examples"] for s in shards)}
    for key in ("class_names", "label_key", "label_names", "features", "domain", "notes", "plan", "key", "input"):
        index[key] = header.get(key)
    index["notes"] = _sum_notes(shards)
    index["shards"] = [{k: s[k] for k in ("file", "num_examples", "num_records", "block_size", "bytes",
                                          "sha256", "class_counts")} for s in shards]
    index["rejected"] = [{"path": r["path"], "reason": r["reason"]} for r in sorted(rejected, key=lambda r: r["path"])]
    return index


def _sum_notes(shards: Sequence[dict]) -> dict:
    total: dict = {}
    for shard in shards:
        for k, v in (shard.get("notes") or {}).items():
            total[k] = total.get(k, 0) + v
    return dict(sorted(total.items()))


def check_counts(index: dict, found: int) -> None:
    """found = written + rejected, or a RuntimeError (a bug, never the user's data)."""
    written, rejected = index["num_examples"], len(index["rejected"])
    if written + rejected != found:
        raise RuntimeError(f"tfpipe bug: found {found} inputs but wrote {written} and rejected {rejected}")


def read_index(root: str) -> Optional[dict]:
    """The index of shard folder `root`, checked and in the version-2 layout; None if there is none.

    Raises:
      DataError: unreadable JSON, missing keys, wrong types, or a shard path outside the folder,
        naming the index and what to do.
    """
    path = fs.join(root, INDEX_NAME)
    try:
        with fs.open(path, "rb") as f:
            index = json.loads(f.read())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise DataError(f"{path}: unreadable shard index ({e}); rerun tfpipe prepare") from e
    if not isinstance(index, dict):
        raise DataError(f"{path}: not a tfpipe shard index (a JSON {type(index).__name__}); rerun tfpipe prepare")
    if index.get("format") == LEGACY_FORMAT:
        index = _upgrade_v1(index, path)
    return check_index(index, path)


def check_index(index: dict, where: str) -> dict:
    """`index` if it names its shards (inside the folder), examples and classes; else DataError naming it.

    Enough to recognize a shard folder (`find`); `check_readable` checks what reading needs.
    """
    from tfpipe.storage.formats import FORMATS

    missing = [k for k in ("format", "num_examples", "class_names", "shards") if k not in index]
    if missing:
        raise DataError(f"{where}: not a complete shard index: no {', '.join(map(repr, missing))}; {_FIX}")
    if index["format"] not in FORMATS:
        raise DataError(f"{where}: format {index['format']!r} is not one this tfpipe reads "
                        f"({', '.join(FORMATS)}); {_FIX}")
    shards = index["shards"]
    if not isinstance(shards, list) or not all(isinstance(s, dict) and "file" in s and "num_examples" in s
                                               for s in shards):
        raise DataError(f"{where}: 'shards' must list {{{', '.join(_SHARD_KEYS)}}} per shard; {_FIX}")
    for shard in shards:
        name = shard["file"]
        if not isinstance(name, str) or os.path.basename(name) != name or name in ("", ".", ".."):
            raise DataError(f"{where}: shard {name!r} is not a file name inside the folder (paths such as "
                            f"'../x' are refused: an index only names its own folder's shards); {_FIX}")
        shard.setdefault("num_records", shard["num_examples"])
        shard.setdefault("block_size", 1)
    index.setdefault("label_key", "label")
    index.setdefault("label_names", True)
    index.setdefault("domain", None)
    index.setdefault("notes", {})
    index.setdefault("rejected", [])
    return index


def check_readable(index: dict, where: str) -> None:
    """DataError naming the index unless it has what reading and verifying need (schema, sizes, hashes)."""
    features = index.get("features")
    if not isinstance(features, dict) or not all(
            isinstance(v, dict) and v.get("dtype") and isinstance(v.get("shape"), list) for v in features.values()):
        raise DataError(f"{where}: 'features' must map each key to {{dtype, shape}}; {_FIX}")
    incomplete = [s["file"] for s in index["shards"] if not all(k in s for k in _SHARD_KEYS)]
    if incomplete:
        raise DataError(f"{where}: shard {incomplete[0]} lacks one of {', '.join(_SHARD_KEYS)}; {_FIX}")


def _upgrade_v1(old: dict, where: str) -> dict:
    """A version-1 index (audio only, one example per record) in the version-2 layout."""
    try:
        store, dtype, shape = old["store"], old["dtype"], [int(d) for d in old["shape"]]
        features = {store: {"dtype": dtype, "shape": shape}, "path": {"dtype": "bytes", "shape": []}}
        domain = {"name": _v1_domain(store), "store": store, "config": old["features"],
                  "features": {store: {"dtype": "float32", "shape": shape}}}
    except (KeyError, TypeError, ValueError):
        features, domain = None, None  # recognized as a shard folder; reading it fails in check_readable
    return {**{k: v for k, v in old.items() if k not in ("store", "dtype", "shape")},
            "format": "tfrecord-example", "version": 1, "features": features, "domain": domain,
            "label_key": "label", "label_names": False}


def _v1_domain(store: str) -> str:
    """The domain of a version-1 index (which names none): the one whose shards store `store`."""
    from tfpipe.core.registry import domains  # the domain plug-ins, loaded on first use

    return next((d.name for d in domains().values() if store in d.stores()), "")


def size_problem(path: str, expected: int) -> str:
    """'' when the shard's size on disk is the index's, else what differs (one stat, no read)."""
    try:
        actual = fs.getsize(path)
    except OSError as e:
        return f"shard missing ({e.strerror})"
    return "" if actual == expected else f"{actual} bytes on disk but {INDEX_NAME} lists {expected}"
