"""Old import path of the audio ops: see tfpipe.domains.audio.ops."""

import sys

from tfpipe.domains.audio import ops

sys.modules[__name__] = ops
