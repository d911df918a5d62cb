"""Old import path: `tfpipe.bench_worker` is `tfpipe.bench.worker`."""

import sys

from tfpipe.bench import worker as _worker

sys.modules[__name__] = _worker
