"""bench/user_fns.py: a user's functions by spec; a spec naming nothing and a function that raises, said in one line."""

import pytest

from tfpipe import bench
from tfpipe.bench import user_fns
from tfpipe.bench.user_fns import FunctionSpecError, UserFunctionError
from tfpipe.config import PipelineConfig


def _line(path, text):
    """The 1-based line of `path` holding `text`."""
    with open(path) as f:
        return next(i for i, line in enumerate(f, 1) if text in line)


def test_functions_load_by_spec_and_a_spec_that_names_nothing_is_a_usage_error(user_file):
    assert bench.fn_spec(bench.parse_variant) == "tfpipe.bench.specs:parse_variant"
    assert bench.load_fn("tfpipe.bench.specs:parse_variant") is bench.parse_variant
    assert bench.load_fn(f"{user_file}:dataset_fn").__name__ == "dataset_fn"
    for spec, message in [(lambda pipeline, mode: None, "not a lambda or nested function"),
                          ("my_pipeline.py", "expected MODULE:FUNCTION or FILE.py:FUNCTION")]:
        with pytest.raises(FunctionSpecError, match=message):
            bench.fn_spec(spec)
    with pytest.raises(FunctionSpecError, match=r"no file .*missing\.py"):
        bench.load_fn("missing.py:fn")
    with pytest.raises(FunctionSpecError, match=r"my_pipeline\.py has no 'nothing'"):
        bench.load_fn(f"{user_file}:nothing")
    with pytest.raises(FunctionSpecError, match=r"cannot import 'no_such_module'"):
        bench.load_fn("no_such_module:fn")
    with pytest.raises(FunctionSpecError, match=r"requires pipeline; an Estimator input_fn takes only mode, params"):
        user_fns.check("", [f"{user_file}:dataset_fn"])  # checked in the parent, before any worker starts
    assert issubclass(FunctionSpecError, ValueError)


def test_a_function_that_raises_is_named_with_the_exception_and_its_line(user_file):
    with pytest.raises(UserFunctionError) as raised:
        user_fns.call_dataset_fn(f"{user_file}:broken_fn", PipelineConfig.naive(batch_size=4), "train")
    assert str(raised.value) == (f"dataset_fn {user_file}:broken_fn raised ZeroDivisionError: integer division or "
                                 f"modulo by zero (at {user_file}:{_line(user_file, '// 0')}, in broken_fn)")
    with pytest.raises(ValueError, match=r"returned a tuple of 2 \(dict, .*\), not a tf.data.Dataset; .*"
                                         r"instead of iterator.get_next\(\)"):
        user_fns.call_input_fn(f"{user_file}:input_fn_tensors", 4)


def test_a_file_that_fails_on_import_is_named_with_its_line(tmp_path):
    path = tmp_path / "bad.py"
    path.write_text("import tensorflow as tf\n\nSCALE = 1 / 0\n\n\ndef dataset_fn(pipeline, mode):\n    pass\n")
    with pytest.raises(UserFunctionError, match=rf"importing {path} raised ZeroDivisionError: division by zero "
                                                rf"\(at {path}:3, in <module>\)"):
        bench.load_fn(f"{path}:dataset_fn")
    path.write_text("def dataset_fn(pipeline, mode)\n    pass\n")
    with pytest.raises(UserFunctionError, match=rf"importing {path} raised SyntaxError: .* \(at {path}:1"):
        bench.load_fn(f"{path}:dataset_fn")


MIXTURE = '''
import tfpipe
from tfpipe.domains.audio.config import AudioConfig


def mix_fn(pipeline, mode):  # a wav folder and a shard folder, 3:1, under the toggles bench hands in
    source = tfpipe.mix([({folder!r}, 0.75), ({shards!r}, 0.25)])
    return tfpipe.build_dataset(source, mode, pipeline, features=AudioConfig(clip_seconds=0.25))
'''


def test_a_mixture_is_timed_like_any_pipeline(tiny, tiny_shards, tmp_path):
    path = tmp_path / "my_mixture.py"
    path.write_text(MIXTURE.format(folder=tiny, shards=tiny_shards))
    result = bench.run(dataset_fn=f"{path}:mix_fn", variants=["naive", "optimized"], ops=True, batches=2,
                       repeats=1, warmup=1, overrides={"batch_size": 4}, stage_seconds=0.05, progress=False)
    assert [v.name for v in result.variants] == ["naive", "optimized"]
    assert all(v.turns[0].examples == 8 and v.stats.median > 0 for v in result.variants)
    naive, optimized = ([o.op for o in report.ops] for report in result.ops)
    for chain in naive, optimized:  # both members reach one weighted draw
        assert "DirectedInterleaveDataset" in chain
    assert not any("Parallel" in op for op in naive)  # the naive preset stays sequential inside a mixture
    assert any("Parallel" in op for op in optimized)
