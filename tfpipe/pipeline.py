"""Old import path of the chain: see tfpipe.core.chain (and tfpipe.domains.audio for the wav stages)."""

from tfpipe.core.chain import (AUTOTUNE, EVAL, PREDICT, TRAIN, apply_maps, build_dataset,  # noqa: F401
                               dataset_ops, normalize_mode, shard_for_input_context)
from tfpipe.core.source import Data  # noqa: F401
from tfpipe.core.stage import compose  # noqa: F401
from tfpipe.domains.audio.domain import wav_file_table, wav_stage_fns  # noqa: F401
