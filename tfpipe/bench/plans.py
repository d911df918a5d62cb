"""`tfpipe bench --plan`: the chain each variant would time, one line per step, before any timing."""

from __future__ import annotations

import textwrap
from typing import Any, Callable, Mapping, Optional, Sequence, Union

from tfpipe.bench.engine import RunOptions, plan_run


def describe_variants(data: Optional[str] = None, variants: Optional[Sequence[Any]] = None, *,
                      dataset_fn: Optional[Union[str, Callable]] = None, input_fns: Sequence[Any] = (),
                      shards: Optional[str] = None, ablation: bool = False, baseline: Optional[str] = None,
                      features: Any = None, overrides: Optional[Mapping[str, Any]] = None) -> str:
    """Each variant `tfpipe.bench.run` would time with these arguments, and its plan.

    The variants are resolved and checked as `run` does (no worker starts, nothing is timed):
    tfpipe's chains show `tfpipe.describe` of their train chain; a reference recipe or a user's
    function says what builds it; a variant that cannot read the data says why it is skipped.

    Returns:
      One paragraph per variant, its name first.

    Raises:
      ValueError / DataError: what `run` would raise before timing.
    """
    run = plan_run(data, variants, dataset_fn, input_fns, shards, ablation, baseline, features, overrides,
                   RunOptions(stages=False))
    parts = [f"{v.name}:\n" + textwrap.indent(v.plan(run.inputs), "  ") for v in run.chosen]
    parts += [f"{name}: skipped: {why}" for name, why in run.skipped.items()]
    return "\n\n".join(parts)
