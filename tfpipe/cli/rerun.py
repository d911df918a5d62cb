"""`tfpipe prepare` run again with the same command on its complete folder: "nothing to do", at once.

Finding that out the writer's way lists the inputs through tf.io.gfile and asks the domain for
its schema, which starts TensorFlow (~2.4 s of CPU) to say that nothing will happen. A prepare
that finished leaves a record beside its index (`RECORD`, a hidden file no shard glob reads):
a digest of the command (every flag, the domain configs they make, the tfpipe version) and of
the input folder's listing (every file's path, size and mtime, as the writer's own inputs
key uses), and the digest of the index it ended with. The same command finds its record, the
same listing, the same index and every shard at its indexed size: nothing to do, with no
TensorFlow. Anything else (another flag, an input added or touched, a folder rewritten by
another command, a damaged shard, a CSV manifest or a remote folder, which this does not
list) goes to the writer, which decides as before: the record only ever saves time.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from typing import Any, Optional

RECORD = ".tfpipe-prepare.json"  # hidden: `{split}-*` globs and tfpipe inspect --verify ignore it


@dataclasses.dataclass(frozen=True)
class Done:
    """A complete folder for this command: its index, and how long finding that out took."""

    index: dict
    seconds: float


def command_key(data: str, flag_values: Any) -> Optional[str]:
    """The digest of this command over a local input folder (None: an input this does not list).

    Args:
      data: the --input.
      flag_values: the parsed absl FlagValues (every tfpipe flag counts, and the domain configs they make).
    """
    if "://" in data or not os.path.isdir(data):
        return None
    from tfpipe import __version__
    from tfpipe import flags as tfpipe_flags

    given = {f.name: f.value for module, defined in flag_values.flags_by_module_dict().items()
             if module.startswith("tfpipe") for f in defined}
    configs = {}
    for config in tfpipe_flags.domain_configs():
        try:  # what the flags make of each domain's config: a changed default changes the command
            configs[config.__name__] = dataclasses.asdict(config(**tfpipe_flags.set_fields(config, flag_values)))
        except (TypeError, ValueError):
            configs[config.__name__] = None  # flags another domain's config refuses: not this data's domain
    what = {"tfpipe": __version__, "flags": given, "configs": configs, "input": os.path.realpath(data),
            "listing": _listing(data)}
    return hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()


def _listing(root: str) -> list:
    """(path, size, mtime_ns) of every file under `root` and every folder, linked folders followed once."""
    entries, seen = [], set()
    for folder, subfolders, files in os.walk(root, followlinks=True):
        real = os.path.realpath(folder)
        if real in seen:  # a link back up the tree: listed once
            subfolders[:] = []
            continue
        seen.add(real)
        subfolders.sort()
        where = os.path.relpath(folder, root)
        entries.append([where + os.sep])
        for name in sorted(files):
            try:
                st = os.stat(os.path.join(folder, name))
                entries.append([os.path.join(where, name), st.st_size, st.st_mtime_ns])
            except OSError:
                entries.append([os.path.join(where, name), -1, -1])
    return entries


def complete(out_dir: str, command: Optional[str]) -> Optional[Done]:
    """Done when `out_dir` is complete for exactly this command (see the module doc), else None."""
    if command is None:
        return None
    start = time.perf_counter()
    from tfpipe.storage import index as index_lib  # json and os: no TensorFlow
    from tfpipe.errors import DataError

    try:
        with open(os.path.join(out_dir, RECORD)) as f:
            record = json.load(f)
        with open(os.path.join(out_dir, index_lib.INDEX_NAME), "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        if record.get("command") != command or record.get("index") != digest:
            return None
        index = index_lib.read_index(out_dir)
    except (OSError, ValueError, DataError):
        return None
    if index is None or any(index_lib.size_problem(os.path.join(out_dir, s["file"]), s["bytes"])
                            for s in index["shards"]):
        return None
    return Done(index, time.perf_counter() - start)


def remember(out_dir: str, command: Optional[str]) -> None:
    """Records that `out_dir` is complete for this command (after the writer finished it)."""
    if command is None:
        return
    from tfpipe.storage.index import INDEX_NAME

    try:
        with open(os.path.join(out_dir, INDEX_NAME), "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        tmp = os.path.join(out_dir, f"{RECORD}.tmp-{os.getpid()}")
        with open(tmp, "w") as f:
            json.dump({"command": command, "index": digest}, f)
        os.replace(tmp, os.path.join(out_dir, RECORD))
    except OSError:
        pass  # the record only saves time: a folder it cannot be written to is still complete
