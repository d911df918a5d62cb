"""reuse_memory: a chain built with it keeps big freed buffers in the process (no page fault per page).

Process-wide settings, so each case runs in a fresh process; page faults are counted
(getrusage), not timed.
"""

import json
import platform
import subprocess
import sys

import pytest

from tests.support import make_corpus

_FAULTS = """
import json, resource, statistics, sys
import tfpipe
import tensorflow as tf
pipe = tfpipe.PipelineConfig.preset(sys.argv[2], batch_size=4)
next(iter(tfpipe.build_dataset(sys.argv[1], "eval", pipe)))   # building the chain applies the setting
images = tf.zeros([64, 224, 224, 3], tf.uint8)   # a batch of images, cast to 38 MiB of float32
faults = []
for _ in range(40):   # eager: on this thread, so in glibc's main arena (BUILD_NOTES "Memory" on thread arenas)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    tf.reduce_sum(tf.cast(images, tf.float32)[:, 0, 0, 0]).numpy()
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(json.dumps(statistics.median(faults[20:])))   # the first batches find the arena fragmented
"""


def _faults_per_batch(data, preset):
    out = subprocess.run([sys.executable, "-c", _FAULTS, str(data), preset], capture_output=True, text=True,
                         check=True, env={"TF_CPP_MIN_LOG_LEVEL": "3", "PATH": ""}).stdout
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the setting is glibc's malloc's")
def test_an_optimized_chain_keeps_big_buffers_and_a_naive_one_leaves_malloc_as_it_is(tmp_path):
    make_corpus(tmp_path / "data", per_class=2)
    pages = 64 * 224 * 224 * 3 * 4 // 4096  # the float32 batch's pages: 9,408
    naive = _faults_per_batch(tmp_path / "data", "naive")
    if naive <= pages / 2:
        # The precondition is this machine's, not tfpipe's: where the kernel backs the mapping with
        # huge pages (transparent_hugepage=always) or the allocator keeps big blocks already, a new
        # batch faults few pages and there is nothing for reuse_memory to save.
        pytest.skip(f"the naive chain faulted {naive:.0f} pages per {pages}-page batch here: this machine "
                    f"already avoids the faults reuse_memory removes")
    assert _faults_per_batch(tmp_path / "data", "optimized") < pages / 20  # the freed buffer, reused


def test_reuse_large_buffers_applies_once_and_says_whether_it_could():
    from tfpipe.core import memory

    first = memory.reuse_large_buffers()
    assert first == (platform.system() == "Linux" and platform.libc_ver()[0] == "glibc")
    assert memory.reuse_large_buffers() is first
