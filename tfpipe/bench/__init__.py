"""`tfpipe bench`: time input pipelines side by side, tfpipe's own or any user's, and name what limits them.

    result = tfpipe.bench.run("data/", ["naive", "optimized"])            # tfpipe's chain over a folder
    result = tfpipe.bench.run("images/", ["naive", "optimized:dtype=uint8", "keras", "tf-models"])  # any domain
    result = tfpipe.bench.run(dataset_fn="my_pipe.py:make_dataset")       # your chain, toggles applied
    result = tfpipe.bench.run(input_fns=["a.py:input_fn", "b.py:input_fn"], ops=True)
    print(result.table())

Modules: `engine` (plans and checks a run, turns its measurements into results), `session`
(the worker processes, phase by phase), `worker` (the per-variant process), `variants` (one
class per kind of variant), `specs` (variant specs parsed), `recipes` (reference recipes a
domain offers: keras, tf-models), `domains` (the data's domain: its config class),
`user_fns` (user functions by spec), `batches` (what batches hold, padding), `ops` (per-op
rates), `stages` (the stage report and its limit), `caveats` (when a run may mislead),
`advice` (what to do about a limit), `report` (table, JSON), `chart` (PNG), `prepare_timing`
(`--prepare`: write_shards timed), `plans` (`--plan`: each variant's chain).
"""

from tfpipe.bench.engine import (MAX_EPOCH_BATCHES, MAX_STAGE_CONFIGS, USER_TURN_BATCHES,  # noqa: F401
                                 RunOptions, run)
from tfpipe.bench.plans import describe_variants  # noqa: F401
from tfpipe.bench.ops import OpRate, OpsReport, measure_ops  # noqa: F401
from tfpipe.bench.prepare_timing import PrepareResult, run_prepare  # noqa: F401
from tfpipe.bench.report import BenchResult, RoundStats, StageReport, Turn, VariantResult, round_stats  # noqa: F401
from tfpipe.bench.specs import (ABLATION_CONFIG_FIELDS, BASES, DEFAULT_VARIANTS, ablation_variants,  # noqa: F401
                                input_fn_variant, parse_value, parse_variant, resolve_variants, spec_fields,
                                split_variants, with_cores)
from tfpipe.bench.user_fns import (FunctionSpecError, UserFunctionError, call_input_fn, fn_spec,  # noqa: F401
                                   load_fn)
from tfpipe.bench.variants import (DatasetFnVariant, Inputs, InputFnVariant, PipelineVariant,  # noqa: F401
                                   RecipeVariant, ShardsVariant, UserVariant, Variant)
from tfpipe.bench.worker import VariantError  # noqa: F401
