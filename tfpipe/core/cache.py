"""The chain's cache step: one epoch of examples in memory, in a file, or as a tf.data snapshot.

A snapshot ("snapshot:DIR") outlives the process, so it must never serve data that changed
since it was written: it lives in a subfolder of DIR named by a fingerprint of every file it
was read from (path, size, modification time), and below that a key of the dataset graph above
the cache (its ops and functions). A file rewritten in place (same size) has a new
modification time, so the next build reads afresh instead of the stale snapshot.

The graph key is tfpipe's, not tf.data's: TensorFlow's own fingerprint of one unchanged graph
now and then differs between processes (tensorflow#61317; here 1 run in ~6, more on a busy
machine), and each new fingerprint writes a whole new snapshot. tfpipe hashes the graph as
Python serializes it, without the per-process counters in its names, and hands that to the
snapshot op; where the graph cannot be serialized, tf.data's own fingerprint is used.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any, Sequence

import tensorflow as tf

from tfpipe.core import filesystem as fs
from tfpipe.errors import DataError

SNAPSHOT = "snapshot:"


def cache(ds: tf.data.Dataset, where: str, inputs: Any) -> tf.data.Dataset:
    """`ds` cached at `where` ("memory", a file path, or "snapshot:DIR"), for the files of `inputs`."""
    if where.startswith(SNAPSHOT):
        folder = where.removeprefix(SNAPSHOT)
        check_space(folder, inputs.paths)
        return _snapshot(ds, fs.join(folder, contents_key(inputs.paths)))
    return ds.cache("" if where == "memory" else where)


def _snapshot(ds: tf.data.Dataset, path: str) -> tf.data.Dataset:
    """`ds.snapshot(path)` keyed by `graph_key(ds)` instead of tf.data's own fingerprint."""
    import multiprocessing

    from tensorflow.python.data.ops import snapshot_op  # TF 2.15's Dataset.snapshot, with its hash attrs

    key = graph_key(ds)
    if key is None:
        return ds.snapshot(path)

    class KeyedSnapshot(snapshot_op._SnapshotDataset):  # pylint: disable=protected-access
        @property
        def _common_args(self):
            return {**super()._common_args, "hash_valid": True, "hash": key}

    shards = multiprocessing.cpu_count()  # as Dataset.snapshot shards its writes
    keyed = KeyedSnapshot(ds.enumerate(), path, shard_func=lambda index, _: index % shards)
    return keyed.map(lambda _, element: element)


def graph_key(ds: tf.data.Dataset) -> int | None:
    """A 63-bit key of `ds`'s graph that is the same in every process for the same pipeline.

    Function names and the datasets' metadata names carry counters of what was traced or built
    before them in the process: the metadata is left out, and each function is renamed by the
    order in which the graph first calls it, so two maps with swapped bodies still differ.
    None where the graph cannot be serialized here (then tf.data's own fingerprint is used).
    """
    import re

    try:
        # External state (a lookup table's contents) is left out, as tf.data's own fingerprint does.
        as_graph = ds._as_serialized_graph(  # pylint: disable=protected-access
            external_state_policy=tf.data.experimental.ExternalStatePolicy.IGNORE, strip_device_assignment=True)
        if tf.executing_eagerly():
            serialized = as_graph.numpy()
        else:
            with tf.compat.v1.Session(graph=as_graph.graph) as session:
                serialized = session.run(as_graph)
    except (tf.errors.OpError, ValueError, TypeError):  # e.g. a placeholder in the graph: tf.data's own key
        return None
    graph = tf.compat.v1.GraphDef.FromString(serialized)
    functions = {f.signature.name: f for f in graph.library.function}
    for node in [*graph.node, *(n for f in functions.values() for n in f.node_def)]:
        if "metadata" in node.attr:
            del node.attr["metadata"]  # a dataset's name for metrics ("MapDataset:5"): a process counter
    order = _call_order(graph.node, functions)
    names = re.compile(r"(?<!\w)(" + "|".join(map(re.escape, order)) + r")(?!\w)") if order else None

    def canonical(message) -> str:
        text = str(message)
        return names.sub(lambda m: f"function_{order[m.group(1)]}", text) if names else text

    del graph.library.function[:]
    digest = hashlib.sha256(canonical(graph).encode())
    for name in sorted(order, key=order.get):
        digest.update(canonical(functions[name]).encode())
    return int.from_bytes(digest.digest()[:8], "big") >> 1


def _call_order(nodes, functions: dict) -> dict[str, int]:
    """{function name: its rank} in the order a walk of `nodes` first calls each (by op or attribute)."""
    order: dict[str, int] = {}

    def visit(name: str) -> None:
        if name in functions and name not in order:
            order[name] = len(order)
            for node in functions[name].node_def:
                visit_node(node)

    def visit_node(node) -> None:
        visit(node.op)
        for key in sorted(node.attr):
            value = node.attr[key]
            for name in ([value.func.name] if value.HasField("func") else []) + [f.name for f in value.list.func]:
                visit(name)

    for node in nodes:
        visit_node(node)
    for name in sorted(functions, key=lambda n: str(functions[n].node_def)):  # never called: by body
        visit(name)
    return order


def check_space(folder: str, paths: Sequence[str]) -> None:
    """DataError when the snapshot's disk has less room than one pass of the files' bytes needs.

    TensorFlow's snapshot writer fails inside its C++ iterator (ResourceExhaustedError, naming
    no folder), so the check happens here, where the fix can be named.
    """
    import shutil

    if fs.is_remote(folder):
        return  # an object store has no free space to ask about
    needed = 0
    for path in paths:
        try:
            needed += fs.stat(path).size if fs.is_remote(path) else os.stat(path).st_size
        except OSError:
            pass  # contents_key names an unreadable file
    probe = folder
    while probe and not os.path.isdir(probe):
        probe = os.path.dirname(probe.rstrip(os.sep)) or "."
    free = shutil.disk_usage(probe or ".").free
    if free < needed:
        raise DataError(f"{folder}: not enough free space for the snapshot: {_size(free)} free, one pass "
                        f"of the files needs about {_size(needed)}; free space, or use "
                        f"cache='snapshot:OTHER_FOLDER' on a larger disk (or cache='memory')")


def contents_key(paths: Sequence[str]) -> str:
    """A key that changes when any of `paths` is added, removed, resized or rewritten (one stat each).

    Raises:
      DataError: a file cannot be read any more, naming it.
    """
    def identity(path: str) -> str:
        try:
            if fs.is_remote(path):  # an object has no inode; a rewrite gets a new modification time
                st = fs.stat(path)
                return f"{path}\0{st.size}\0{st.mtime_ns}\0\n"
            st = os.stat(path)
        except OSError as e:
            raise DataError(f"{path}: cannot read it any more ({e.strerror}); it was listed when the "
                            f"pipeline's files were found") from None
        return f"{path}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ino}\n"

    digest = hashlib.sha256()
    for line in fs.parallel(identity, list(paths)):
        digest.update(line.encode("utf-8", "surrogateescape"))
    return "files-" + digest.hexdigest()[:16]


def _size(n: int) -> str:
    """Bytes as a person reads them: 64 KiB, 1.5 GiB."""
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:,.0f} {unit}" if unit == "bytes" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n} GiB"
