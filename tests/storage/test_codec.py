"""storage/codec.py: the record schema, inferred and checked; records encoded and decoded (eagerly)."""

import numpy as np
import pytest
import tensorflow as tf

from tfpipe.storage.codec import LENGTHS_PREFIX, RecordCodec
from tfpipe.storage.schema import Field


def test_infer_gives_a_first_dimension_that_varies_none_and_check_names_what_does_not_fit():
    examples = [{"tokens": np.arange(n), "pos": np.zeros((n, 2), np.float32), "id": i, "label": 0}
                for i, n in enumerate([3, 5, 1])]
    codec = RecordCodec.infer(examples)
    assert codec.to_json() == {"tokens": {"dtype": "int64", "shape": [None]},
                               "pos": {"dtype": "float32", "shape": [None, 2]}, "id": {"dtype": "int64", "shape": []}}
    assert codec.variable == ("tokens", "pos") and codec.signature == "id:int64:;pos:float32:?x2;tokens:int64:?"
    codec.check({"tokens": np.arange(9), "pos": np.zeros((9, 2), np.float32), "id": 4, "label": 1}, 3)
    with pytest.raises(ValueError, match=r"example 4, key 'pos': expected float32 \[None, 2\] \(the schema\), "
                                         r"got float32 \[9, 3\]"):
        codec.check({"tokens": np.arange(9), "pos": np.zeros((9, 3), np.float32), "id": 4, "label": 1}, 4)
    fixed = RecordCodec({"tokens": Field("int64", (3,))})
    with pytest.raises(ValueError, match=r"expected int64 \[3\] \(the schema\), got int64 \[5\]; for a first "
                                         r"dimension that varies put None there in the schema: 'tokens': "
                                         r"\('int64', \(None,\)\)"):
        fixed.check({"tokens": np.arange(5), "label": 0}, 1)


def test_reserved_keys_are_refused():
    for key in ("label", "label_name", "_schema", LENGTHS_PREFIX + "x"):
        with pytest.raises(ValueError, match=r"reserved"):
            RecordCodec({key: Field("int64", ())})


def _record(codec, examples, labels):
    return tf.constant(codec.encode(examples, labels, [str(v) for v in labels]))


def test_one_example_records_decode_alone_or_as_a_batch():
    codec = RecordCodec({"x": Field("uint32", (2,)), "w": Field("str", (2,)), "b": Field("bytes", ())})
    examples = [{"x": np.array([1, 2**32 - 1], np.uint32), "w": ["a", "ü"], "b": b"\x00"},
                {"x": np.array([3, 4], np.uint32), "w": ["", "z"], "b": b"yy"}]
    records = tf.stack([_record(codec, [e], [i]) for i, e in enumerate(examples)])
    values, labels = codec.decode(records)
    assert values["x"].numpy().tolist() == [[1, 2**32 - 1], [3, 4]] and labels.numpy().tolist() == [0, 1]
    assert values["w"].numpy().tolist() == [[b"a", "ü".encode()], [b"", b"z"]] and values["b"].numpy()[1] == b"yy"
    one, label = codec.decode(records[1])
    assert one["x"].shape == (2,) and int(label) == 1


def test_a_block_of_variable_length_examples_decodes_to_rows_of_their_own_length():
    examples = [{"t": np.arange(n, dtype=np.int16), "s": [f"w{i}" for i in range(n)], "y": np.float32(n)}
                for n in (2, 0, 3)]
    codec = RecordCodec.infer([{**e, "label": 0} for e in examples])
    values, labels = codec.decode_block(_record(codec, examples, [5, 6, 7]))
    assert isinstance(values["t"], tf.RaggedTensor) and values["t"].to_list() == [[0, 1], [], [0, 1, 2]]
    assert values["s"].to_list() == [[b"w0", b"w1"], [], [b"w0", b"w1", b"w2"]]
    assert values["y"].numpy().tolist() == [2, 0, 3] and labels.numpy().tolist() == [5, 6, 7]
    one, label = codec.decode(_record(codec, examples[2:], [7]))  # one example per record: dense, its own length
    assert one["t"].numpy().tolist() == [0, 1, 2] and one["t"].dtype == tf.int16 and int(label) == 7
    with pytest.raises(ValueError, match=r"vary in length: decode one record at a time"):
        codec.decode(tf.stack([_record(codec, [e], [0]) for e in examples]))


def test_storage_dtype_narrows_floats_only():
    codec = RecordCodec({"f": Field("float32", (None, 4)), "i": Field("int32", ())}).with_storage_dtype("float16")
    assert codec.to_json() == {"f": {"dtype": "float16", "shape": [None, 4]}, "i": {"dtype": "int32", "shape": []}}
    assert RecordCodec.from_json(codec.to_json()).fields == codec.fields
    assert codec.bytes_of({"f": np.zeros((5, 4)), "i": 1}) == 5 * 4 * 2 + 4
