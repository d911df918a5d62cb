"""bench/variants.py: each kind of variant knows what it reads, how it builds its dataset and what cannot matter."""

import os

import pytest

from tests.bench.conftest import FEAT
from tfpipe import bench
from tfpipe.bench.variants import Inputs
from tfpipe.core.graph import dataset_ops, walk
from tfpipe.core.registry import get_domain
from tfpipe.core.source import find


def _inputs(data=None, shards=None):
    source = find(data) if data else None
    shard_source = find(shards) if shards else None
    domain = get_domain((source or shard_source).domain) if (source or shard_source) else None
    return Inputs(data, source, shards, shard_source, domain)


def test_notes_say_why_a_changed_field_cannot_matter_here(tiny, tiny_shards):
    by_name = {v.name: v for v in bench.ablation_variants(FEAT)}
    wavs, shards = _inputs(tiny), _inputs(tiny_shards)
    assert by_name["optimized:prefetch_to_device=false"].notes(wavs, gpu=False) == ["no-op: no GPU visible"]
    assert by_name["optimized:prefetch_to_device=false"].notes(wavs, gpu=True) == []
    assert by_name["naive:parallel_reads=true"].notes(wavs, gpu=False) == [
        "no-op: wav source (parallel_reads interleaves shard files)"]
    assert by_name["naive:parallel_reads=true"].notes(shards, gpu=False) == []
    assert by_name["optimized:shuffle_blocks=false"].notes(wavs, gpu=False) == [
        "no-op: wav source (shuffle_blocks shuffles blocks of v2 shards)"]
    assert by_name["optimized:shuffle_blocks=false"].notes(shards, gpu=False) == []  # v2 blocks: it matters
    assert by_name["naive:deterministic=false"].notes(wavs, gpu=False) == ["no-op: maps are sequential"]
    assert by_name["optimized:fuse_maps=false"].notes(wavs, gpu=False) == []
    assert bench.parse_variant("keras").notes(wavs, gpu=False) == ["Keras recipe"]


def test_each_kind_says_what_it_reads_or_what_to_pass(tiny, tiny_shards, tmp_path):
    wavs = _inputs(tiny, tiny_shards)
    assert bench.parse_variant("optimized").reads(wavs) == (tiny, 18)
    assert bench.parse_variant("shards").reads(wavs) == (tiny_shards, 18)
    assert bench.parse_variant("keras").reads(wavs) == (tiny, 18)
    assert bench.parse_variant("naive", dataset_fn="x.py:f").reads(Inputs()) is None  # its chain decides
    with pytest.raises(ValueError, match=r"variant 'naive' reads data: pass data="):
        bench.parse_variant("naive").reads(Inputs())
    with pytest.raises(ValueError, match=r"the shards variants read a shard folder: pass --shards DIR"):
        bench.parse_variant("shards").reads(_inputs(tiny))
    with pytest.raises(ValueError, match=r"the keras variant reads a folder with one subfolder per class"):
        bench.parse_variant("keras").reads(_inputs(tiny_shards))
    # The audio domain has a Keras recipe but no tensorflow/models one: the variant says where it would be.
    with pytest.raises(ValueError, match=r"the tf-models variant needs the audio domain's tensorflow/models ResNet "
                                         r"recipe \(Domain\.recipes\['tf-models'\]\), which it "
                                         r"lacks; recipes here: keras"):
        bench.parse_variant("tf-models").reads(wavs)
    manifest = tmp_path / "clips.csv"
    paths = sorted(os.path.join(d, f) for d, _, fs in os.walk(tiny) for f in fs if f.endswith(".wav"))
    manifest.write_text("path,label\n" + "".join(f"{p},{os.path.basename(os.path.dirname(p))}\n" for p in paths))
    with pytest.raises(ValueError, match=r"clips\.csv: the keras variant reads a folder with one subfolder"):
        bench.parse_variant("keras").reads(_inputs(str(manifest)))


def test_each_kind_builds_its_own_train_dataset(tiny, tiny_shards, user_file):
    naive = bench.parse_variant("naive:batch_size=4", FEAT)
    assert dataset_ops(naive.dataset(tiny, None))[-2:] == ["RepeatDataset", "OptionsDataset"]  # batch, then repeat
    shards = bench.parse_variant("shards:batch_size=4", FEAT)
    read = walk(shards.dataset(tiny, tiny_shards))  # reads the shards (inside the order's flat_map)
    assert any("ParallelInterleaveDatasetV4" in n.function_ops for n in read)
    # A user's chain gets the options tfpipe's own chain sets from the toggles: naive is really sequential.
    user = bench.parse_variant("naive:batch_size=4", dataset_fn=f"{user_file}:dataset_fn").dataset(None, None)
    optimization = user.options().experimental_optimization
    assert (optimization.map_parallelization, optimization.inject_prefetch) == (False, False)
    plain = bench.input_fn_variant(f"{user_file}:input_fn_a", 4)
    assert (plain.kind, plain.config()["params"]) == ("input_fn", {"batch_size": 4})
    assert plain.dataset(None, None).options().experimental_optimization.map_parallelization is None  # as written
