"""tfpipe.describe: the chain build_dataset would run, one line per step with its arguments and why.

The source is found and its files listed and checked as for build_dataset, and the same plan is
made (`tfpipe.core.chain.planned`); no dataset is built and nothing is read past the files' headers.
"""

from __future__ import annotations

from typing import Any, Optional

from tfpipe.config import PipelineConfig
from tfpipe.core.chain import TRAIN, check_args, planned
from tfpipe.core.plan import describe as describe_steps


def describe(data: Any, mode: str = TRAIN, pipeline: Optional[PipelineConfig] = None, features: Any = None,
             input_context: Any = None, *, read: Any = None, process: Any = None, batch_process: Any = None,
             feature_key: Optional[str] = None, epochs: Optional[int] = None, start_step: Optional[int] = None,
             allow_device_prefetch: bool = True, on_error: str = "raise") -> str:
    """The plan `build_dataset` with these arguments would apply, as text.

    Args:
      data, mode, pipeline, features, input_context, read, process, batch_process, feature_key,
        epochs, start_step, allow_device_prefetch, on_error: as for `tfpipe.build_dataset`.

    Returns:
      A heading line (mode, data, what one epoch holds), then one line per step: its number, the
      step with its arguments, and under it why it is there. Where `pipeline.seed` is unset each
      build draws its own seed; the plan is shown with seed 0 and the heading says so.

    Raises:
      ValueError / tfpipe.DataError: what build_dataset would raise for these arguments.
    """
    pipeline, mode = check_args(pipeline, mode, epochs, start_step, feature_key)
    start = None if start_step is None else start_step * pipeline.batch_size
    steps, inputs = planned(data, mode, pipeline, features, input_context, read=read, process=process,
                            batch_process=batch_process, feature_key=feature_key, epochs=epochs,
                            start_example=start, seed=pipeline.seed or 0,
                            allow_device_prefetch=allow_device_prefetch, on_error=on_error)
    what = data if isinstance(data, str) else type(data).__name__
    seed = "" if pipeline.seed is not None else "; seed unset: each build draws its own, shown as 0"
    heading = (f"{mode} chain over {what}: {inputs.num_files} files, {inputs.num_examples} examples an epoch, "
               f"batch {pipeline.batch_size}{seed}")
    return heading + "\n" + describe_steps(steps, why=True)
