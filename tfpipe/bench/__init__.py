"""`tfpipe bench`: time input pipelines side by side, tfpipe's own or any user's, and name what limits them.

    result = tfpipe.bench.run("data/", ["naive", "optimized"])            # tfpipe's chain over a folder
    result = tfpipe.bench.run("images/", ["naive", "optimized:dtype=uint8", "keras"])  # any domain
    result = tfpipe.bench.run(dataset_fn="my_pipe.py:make_dataset")       # your chain, toggles applied
    result = tfpipe.bench.run(input_fns=["a.py:input_fn", "b.py:input_fn"], ops=True)
    print(result.table())

Modules: `engine` (rounds, SIGSTOP fairness, --cores pinning), `worker` (the per-variant
process), `variants` (specs), `domains` (the data's domain: its config class and Keras
recipe), `user_fns` (user functions by spec), `ops` (per-op rates), `stages` (the stage
report), `report` (table, JSON), `chart` (PNG).
"""

from tfpipe.bench.engine import (MAX_EPOCH_BATCHES, MAX_STAGE_CONFIGS, USER_TURN_BATCHES,  # noqa: F401
                                 _check_sources, _machine, _note, run, run_prepare)
from tfpipe.bench.ops import OpRate, OpsReport, measure_ops  # noqa: F401
from tfpipe.bench.report import (BenchResult, PrepareResult, RoundStats, StageReport, Turn,  # noqa: F401
                                 VariantResult, round_stats)
from tfpipe.bench.user_fns import call_input_fn, fn_spec, load_fn  # noqa: F401
from tfpipe.bench.variants import (ABLATION_CONFIG_FIELDS, BASES, DEFAULT_VARIANTS, Variant,  # noqa: F401
                                   ablation_variants, input_fn_variant, parse_value, parse_variant,
                                   resolve_variants, spec_fields, split_variants, with_cores)
