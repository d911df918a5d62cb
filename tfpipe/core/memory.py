"""Big tensors without a page fault per page: glibc's malloc keeps freed large buffers for reuse.

TensorFlow's CPU allocator is malloc. glibc gives a block above its mmap threshold (dynamic,
at most 32 MiB) its own mapping and unmaps it when freed, and a thread's arena hands freed
memory above its trim threshold (128 KiB) back to the kernel: the next batch then faults
every page of its buffers in again. On this project's VM a float32 batch of 64 224x224 images
(38 MiB, 9,409 pages) took 27 ms to cast from uint8 on one core, 4.1 ms with the buffers kept
(`docs/examples/page_faults.py`); the photo chain read 1.38x, the wav chain 1.43x faster
(BUILD_NOTES "Memory"). TensorFlow's performance guide reaches the same with tcmalloc
(LD_PRELOAD), which a pip install cannot bring.

The main arena keeps such blocks; TensorFlow's pool threads use thread arenas, whose heaps
are at most 64 MiB, and a block that does not fit its arena's heap still gets (and loses) a
heap of its own: about half of 38 MiB batches cast in a tf.function were still faulted in.

The setting is the process's (every allocation after it, any library's), cannot be undone
per pipeline, and keeps the process's peak of freed memory mapped: its resident size stays
near its high-water mark instead of shrinking between batches.
"""

from __future__ import annotations

import ctypes
import logging
import platform

_M_TRIM_THRESHOLD = -1  # mallopt parameters, from glibc's malloc.h
_M_MMAP_THRESHOLD = -3
# Blocks up to this size come from the arenas and stay there when freed (a thread arena's heap is
# at most 64 MiB: bigger blocks are mapped whatever the threshold says).
KEEP_BYTES = 1 << 30  # 1 GiB

_log = logging.getLogger("tfpipe")
_applied: bool | None = None


def reuse_large_buffers() -> bool:
    """Asks glibc to keep freed large blocks for the next allocation (once per process).

    Returns:
      True where it applies (glibc), False elsewhere (musl, macOS, Windows: their allocators
      decide for themselves; nothing is changed).
    """
    global _applied
    if _applied is None:
        _applied = _mallopt({_M_MMAP_THRESHOLD: KEEP_BYTES, _M_TRIM_THRESHOLD: KEEP_BYTES})
        if _applied:
            _log.info("tfpipe: reuse_memory: this process's glibc malloc now keeps freed blocks up to %d MiB for "
                      "reuse, so its resident memory stays near its peak (PipelineConfig(reuse_memory=False) / "
                      "--noreuse_memory leaves malloc as it is)", KEEP_BYTES >> 20)
    return _applied


def _mallopt(settings: dict[int, int]) -> bool:
    """glibc's mallopt for each (parameter, value); False where the C library is not glibc."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL(None)
        return all(libc.mallopt(ctypes.c_int(k), ctypes.c_int(v)) == 1 for k, v in settings.items())
    except (OSError, AttributeError):
        return False
