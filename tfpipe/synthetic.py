"""Old import path of the synthetic audio corpus: see tfpipe.domains.audio.synthetic."""

import sys

from tfpipe.domains.audio import synthetic

sys.modules[__name__] = synthetic
