"""storage/schema.py: what a value is (dtype, shape), and which shapes a schema allows."""

import numpy as np
import pytest

from tfpipe.storage.schema import Field, castable, field_of, widen_varying


@pytest.mark.parametrize("value, field", [
    (3, Field("int64", ())), (2.5, Field("float32", ())), (True, Field("bool", ())),
    (b"\x00\xff", Field("bytes", ())), ("ü", Field("str", ())), ([1, 2, 3], Field("int64", (3,))),
    (np.zeros((2, 3), np.float16), Field("float16", (2, 3))), (np.uint64(7), Field("uint64", ())),
    (np.array(["a", "bc"], dtype=object), Field("str", (2,))),
    (np.array([b"a", b""], dtype=object), Field("bytes", (2,))),
])
def test_field_of_a_value(value, field):
    assert field_of(value) == field


def test_field_refuses_none_anywhere_but_first_and_unknown_dtypes():
    assert Field("int64", (None, 3)).variable and Field("int64", (None, 3)).row == (3,)
    with pytest.raises(ValueError, match=r"None only for the first dimension"):
        Field("int64", (3, None))
    with pytest.raises(ValueError, match=r"dtype 'complex64': supported dtypes are"):
        Field("complex64", ())
    with pytest.raises(ValueError, match=r"store numpy arrays, bytes, str, int, float or bool"):
        field_of(object())


def test_a_first_dimension_that_differs_becomes_none_and_python_numbers_take_the_schemas_dtype():
    fields = {"t": Field("int64", (3,)), "m": Field("float32", (2, 2)), "s": Field("int64", ())}
    examples = [{"t": np.arange(3), "m": np.zeros((2, 2), np.float32)}, {"t": np.arange(5), "m": np.zeros((2, 3))}]
    assert widen_varying(fields, examples) == {**fields, "t": Field("int64", (None,))}  # m differs elsewhere: kept
    assert castable(field_of([1, 2]), Field("int32", (None,))) and castable(field_of(2), Field("float64", ()))
    assert not castable(field_of([1.5]), Field("int32", (1,))) and not castable(field_of(1), Field("bool", ()))
