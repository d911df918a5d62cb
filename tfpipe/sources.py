"""Old import path of sources: see tfpipe.core.source (and tfpipe.domains.audio.scan for wavs)."""

from tfpipe.core.source import INDEX_NAME, FileSource, folder  # noqa: F401
from tfpipe.core.source import find as find_examples  # noqa: F401
from tfpipe.domains.audio.scan import WavLayout, scan_wavs  # noqa: F401

Source = FileSource
