"""The npy domain: .npy files of one float32 array each, in class folders -> {"array": float32 [*array_shape]}.

A complete tfpipe domain outside tfpipe. Importing this module registers it (the `tfpipe.plugins`
entry point names it); the module imports without TensorFlow or numpy, which load in the methods
that need them, so tfpipe's command line lists the domain, its flags and its corpus at once.

Online, every file's header is read once up front (its dtype, order, shape and where its data
starts, and that the file is as long as that says), so the chain reads each file with
`tf.io.read_file` and decodes it with `tf.io.decode_raw` after the header, on whole batches.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

from tfpipe.core import lazy
from tfpipe.core.checks import FileProblem, check_files
from tfpipe.core.domain import Corpus, Domain
from tfpipe.core.registry import register_domain
from tfpipe.core.stage import Stage
from tfpipe.errors import DataError

from tfpipe_npy.config import STORES, NpyConfig, NpyCorpusConfig

tf = lazy.module("tensorflow")  # loaded when a chain, shards or a signature are built


def header_offset(path: str, config: NpyConfig) -> int:
    """Where the array's data starts in `path`; FileProblem unless it holds one C-order float32 array
    of the config's shape and is exactly as long as that."""
    import numpy as np

    with open(path, "rb") as f:
        try:
            version = np.lib.format.read_magic(f)
            if version not in ((1, 0), (2, 0)):
                raise ValueError(f"format version {version[0]}.{version[1]}; numpy.save writes 1.0")
            read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
                np.lib.format.read_array_header_2_0
            shape, fortran, dtype = read_header(f)
        except ValueError as e:
            raise FileProblem(path, f"not a .npy file this reads ({e})") from None
        offset = f.tell()
    if dtype != np.dtype("<f4") or fortran or tuple(shape) != config.array_shape:
        raise FileProblem(path, f"holds {dtype} {tuple(shape)}{' in Fortran order' if fortran else ''}; the "
                                f"pipeline reads little-endian float32 {config.array_shape} in C order")
    size = os.path.getsize(path)
    if size != offset + config.num_bytes:
        raise FileProblem(path, f"{size} bytes, but its header promises {offset + config.num_bytes}: truncated "
                                f"or appended to")
    return offset


def _fix(problems: Sequence[FileProblem]) -> str:
    return ("save each array with numpy.save(path, array.astype('float32')) in the shape --array_shape gives "
            "(or set --array_shape to the files' shape), or remove the files named")


class NpyDomain(Domain):
    """.npy arrays: headers checked up front, data decoded in the graph; numpy offline."""

    name = "npy"
    extensions = (".npy",)
    config_class = NpyConfig
    kind = "npy"
    corpus = Corpus("tfpipe_npy.synthetic:write_files", NpyCorpusConfig, "4 learnable classes of float32 arrays")
    serving_sends = "float32 arrays"

    def file_table(self, paths: Sequence[str], config: NpyConfig) -> Any:
        offsets = check_files(paths, lambda p: header_offset(p, config), what="files are not the arrays the "
                              "pipeline reads", fix=_fix)
        return ([os.fsencode(p) for p in paths], tf.constant(offsets, tf.int64))

    def stages(self, config: NpyConfig, mode: str) -> list[Stage]:
        shape, num_bytes = list(config.array_shape), config.num_bytes

        def read(file, label):
            path, offset = file
            return (tf.io.read_file(path), offset), label

        def decode(file, label):  # one file or a whole batch of them
            contents, offset = file
            length = tf.fill(tf.shape(offset), tf.constant(num_bytes, tf.int64))
            flat = tf.io.decode_raw(tf.strings.substr(contents, offset, length), tf.float32)
            return {config.feature_key: tf.reshape(flat, tf.concat([tf.shape(flat)[:-1], shape], 0))}, label

        return [Stage("read", read), Stage("decode", decode, batchable=True)]

    def offline(self, config: NpyConfig, store: str):
        from tfpipe_npy.offline import NpyOffline  # numpy loads here only

        return NpyOffline(config, store)

    def stores(self) -> tuple[str, ...]:
        return STORES

    def stored_stages(self, stored: Mapping[str, Any], config: NpyConfig, mode: str = "eval") -> list[Stage]:
        written = tuple(stored["config"].get("array_shape", ()))
        if written != config.array_shape:
            raise DataError(f"the shard index: the shards hold arrays of shape {written}, the pipeline asks for "
                            f"{config.array_shape}; pass --array_shape {','.join(map(str, written))}")
        return []  # stored as the features are: {"array": float32}

    def serving_receiver(self, config: NpyConfig) -> tuple[dict, dict]:
        arrays = tf.compat.v1.placeholder(tf.float32, [None, *config.array_shape], name=config.feature_key)
        return {config.feature_key: arrays}, {config.feature_key: arrays}

    def serving_inputs(self, paths: Sequence[str], config: NpyConfig) -> dict:
        import numpy as np

        return {config.feature_key: np.stack([np.load(p).astype(np.float32) for p in paths])}


DOMAIN = register_domain(NpyDomain())
