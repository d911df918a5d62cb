"""`tfpipe bench` on the command line (real subprocesses): flags reach each variant's worker; a user's
function that is missing or raises is one line (exit 2 and 1)."""

import json
import os
import subprocess
import sys

import pytest

from tests.bench.conftest import USER_PIPELINE
from tests.support import make_corpus
from tfpipe.domains.image import synthetic

TFPIPE = os.path.join(os.path.dirname(sys.executable), "tfpipe")  # the installed console script


@pytest.fixture(scope="module")
def user_file(tmp_path_factory):
    """The seed question's pipeline functions over 18 tiny clips, in a user's my_pipeline.py."""
    tiny = make_corpus(tmp_path_factory.mktemp("cli_bench") / "corpus", per_class=6)
    path = tmp_path_factory.mktemp("user") / "my_pipeline.py"
    path.write_text(USER_PIPELINE.format(data=tiny))
    return str(path)


def _bench(*args, ok=True):
    done = subprocess.run([TFPIPE, "bench", "--noprogress", *args], capture_output=True, text=True, timeout=240)
    if ok:
        assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_help_explains_every_flag():
    out = _bench("--help").stdout
    for text in ("--variants", "optimized:fuse_maps=false", "naive:backend=librosa", "keras", "tf-models",
                 "--[no]ablation", "--step_ms", "--batches", "--turn_seconds", "--repeats", "--warmup", "--json",
                 "--plot", "--shards", "--[no]prepare", "--workers", "--batch_size", "--n_mels", "--dataset_fn",
                 "--input_fn", "--[no]ops", "--cores", "--[no]stages", "--stage_seconds"):
        assert text in out, text


def test_a_dataset_fn_from_a_file_gets_each_variants_toggles(user_file, tmp_path):
    out = _bench("--dataset_fn", f"{user_file}:dataset_fn", "--variants", "naive,optimized", "--batch_size", "4",
                 "--batches", "2", "--repeats", "2", "--warmup", "1", "--ops", "--stage_seconds", "0.05",
                 "--json", str(tmp_path / "b.json")).stdout
    assert f"dataset_fn {user_file}:dataset_fn" in out.splitlines()[0]
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith(("naive ", "optimized "))}
    assert set(rows) == {"naive", "optimized"} and "x naive" in rows["optimized"]
    data = json.loads((tmp_path / "b.json").read_text())
    assert data["settings"]["data"] is None and data["settings"]["dataset_fn"] == f"{user_file}:dataset_fn"
    naive, optimized = data["variants"]
    for v in (naive, optimized):
        assert v["kind"] == "dataset_fn" and v["examples_per_s"]["median"] > 0
        assert [t["examples"] for t in v["turns"]] == [8, 8] and v["config"]["pipeline"]["batch_size"] == 4
    assert (naive["config"]["pipeline"]["fuse_maps"], optimized["config"]["pipeline"]["fuse_maps"]) == (False, True)
    # The toggles reached the user's chain: its ops are the ones each PipelineConfig asks for.
    ops = {o["variant"]: [(op["op"], op["name"]) for op in o["ops"]] for o in data["ops"]}
    assert ("MapDataset", "read") in ops["naive"] and ("MapDataset", "post") in ops["naive"]
    assert ops["naive"][-1] == ("RepeatDataset", "")  # the seed's order: batch, then repeat
    assert ("ParallelMapDatasetV2", "read_and_post") in ops["optimized"]
    assert ops["optimized"][1] == ("RepeatDataset", "") and ops["optimized"][-1] == ("PrefetchDataset", "")
    assert all(op["examples_per_s"] > 0 for o in data["ops"] for op in o["ops"])
    assert all(o["advice"] for o in data["ops"]) and "what to do:" in out
    assert "ParallelMapDatasetV2  read_and_post" in out


def test_plan_prints_each_variants_chain_and_times_nothing(user_file, tmp_path):
    data = make_corpus(tmp_path / "wavs", per_class=3)
    out = _bench("--data", data, "--variants", "naive,optimized:prefetch=false", "--batch_size", "4", "--plan").stdout
    naive, optimized = out.split("\n\n")
    assert naive.startswith("naive:\n") and f"train chain over {data}: 9 files" in naive
    assert "shuffle_examples(buffer=9" in naive and "examples/s" not in out
    assert optimized.startswith("optimized:prefetch=false:\n") and "order(" in optimized
    assert "prefetch\n" not in optimized and "batch(size=4" in optimized
    own = _bench("--dataset_fn", f"{user_file}:dataset_fn", "--plan").stdout
    assert own.startswith("naive:\n") and f"{user_file}:dataset_fn builds its own chain" in own
    assert _bench("--plan", "--json", str(tmp_path / "x.json"), ok=False).returncode == 2


def test_two_plain_input_fns_ab(user_file, tmp_path):
    specs = [f"{user_file}:input_fn_a", f"{user_file}:input_fn_b"]
    out = _bench("--input_fn", ",".join(specs), "--batch_size", "4", "--batches", "2", "--repeats", "2",
                 "--warmup", "0", "--json", str(tmp_path / "ab.json")).stdout
    data = json.loads((tmp_path / "ab.json").read_text())
    a, b = data["variants"]
    assert [a["name"], b["name"]] == specs and {a["kind"], b["kind"]} == {"input_fn"}
    assert [t["examples"] for t in a["turns"]] == [8, 8]  # params={"batch_size": 4} reached input_fn_a
    assert [t["examples"] for t in b["turns"]] == [6, 6]  # input_fn_b batches by 3, whatever params say
    assert b["note"] == "finite dataset: repeated" and a["note"] == ""
    assert b["reference"] == specs[0] and b["ratio"] > 0 and a["examples_per_s"]["median"] > 0
    assert f"x {specs[0]}" in next(line for line in out.splitlines() if line.startswith(specs[1]))


def test_a_function_that_is_missing_or_raises_is_one_line(user_file):
    missing = _bench("--dataset_fn", f"{user_file}:nothing", ok=False)
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    (line,) = missing.stderr.strip().splitlines()
    assert line.startswith("tfpipe bench: error: ") and "my_pipeline.py has no 'nothing'" in line
    raised = _bench("--dataset_fn", f"{user_file}:broken_fn", "--variants", "naive", "--batches", "1",
                    "--repeats", "1", "--warmup", "0", ok=False)
    assert raised.returncode == 1 and "Traceback" not in raised.stderr
    (line,) = raised.stderr.strip().splitlines()
    assert line.startswith(f"tfpipe bench: error: variant 'naive': dataset_fn {user_file}:broken_fn raised "
                           f"ZeroDivisionError: ") and f"(at {user_file}:" in line and line.endswith("in broken_fn)")


def test_image_fields_reach_each_variants_worker(tmp_path):
    # --height/--width apply to every variant; optimized:dtype=uint8 only to its own; two configs, two stage reports.
    images = synthetic.write_corpus(tmp_path / "images", per_class=2, size=(32, 48), progress=False).root
    out = tmp_path / "b.json"
    done = _bench("--data", images, "--variants", "optimized:dtype=uint8,keras", "--height", "32", "--width", "40",
                  "--batch_size", "4", "--batches", "1", "--repeats", "1", "--warmup", "0",
                  "--stage_seconds", "0.05", "--json", str(out))
    data = json.loads(out.read_text())
    uint8, keras = data["variants"]
    assert uint8["batch_spec"] == "({'image': uint8[4, 32, 40, 3]}, int64[4])"
    assert keras["batch_spec"] == "({'image': float32[4, 32, 40, 3]}, int64[4])"
    assert (uint8["config"]["features"]["dtype"], keras["config"]["features"]["dtype"]) == ("uint8", "float32")
    assert [s["label"] for s in data["stages"]] == ["dtype=uint8", "dtype=float32"]
    assert "stages (dtype=uint8, one thread" in done.stdout and "Found" not in done.stdout  # Keras' print hidden
