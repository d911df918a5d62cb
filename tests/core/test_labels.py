"""Label ids from ints or names, and pinned to given class_names (tfpipe.core.labels; issues 32, 33 #6)."""

import numpy as np
import pytest

from tfpipe.core.labels import check_class_names, label_ids, pinned_ids, whole_number


def test_pandas_float_labels_are_the_whole_numbers_they_stand_for():
    assert label_ids(["1.0", "2.0", "10.0"]) == ([1, 2, 10], tuple(str(i) for i in range(11)))
    assert label_ids([1.0, 3.0]) == ([1, 3], ("0", "1", "2", "3"))
    assert [whole_number(v) for v in ("7", " 7", "7.", "7.00", np.int64(7), np.float32(7.0), 7.0)] == [7] * 7
    assert [whole_number(v) for v in ("7.5", "1e3", True, "x", 2.5)] == [None] * 5


def test_numbers_and_names_mixed_are_refused_naming_where():
    # One stray name used to turn every number into text: '1', '10', '2', 'x' (10 before 2).
    with pytest.raises(ValueError, match=r"labels mix numbers and names: label 0 \('1'\), label 1 \('10'\), "
                                         r"label 2 \('2'\) are numbers but label 3 \('x'\) are not"):
        label_ids(["1", "10", "2", "x"])
    with pytest.raises(ValueError, match=r"line 5 \('x'\) are not"):
        label_ids(["1", "x"], ["line 2", "line 5"])


def test_pinned_ids_follow_names_keep_numbers_and_refuse_unknown_classes():
    assert pinned_ids(("cat", "eel", "fox"), ("cat", "dog", "eel", "fox"), "eval") == [0, 2, 3]
    assert pinned_ids(("a", "b"), ("a", "b", "c"), "eval") is None  # the same ids; only names are added
    assert pinned_ids(("0", "1", "2"), ("cat", "dog", "eel"), "eval", used=[0, 2]) is None  # ids already
    with pytest.raises(ValueError, match=r"eval: label id 3 but class_names lists 3 classes"):
        pinned_ids(("0", "1", "2", "3"), ("cat", "dog", "eel"), "eval", used=[3])
    with pytest.raises(ValueError, match=r"eval: classes 'gnu' are not in class_names \('cat', 'dog'\)"):
        pinned_ids(("cat", "gnu"), ("cat", "dog"), "eval")


@pytest.mark.parametrize("bad, message", [("cat", "pass a list"), (["a", "a"], "'a' more than once"),
                                          ([], "one non-empty str"), (["a", 3], "one non-empty str")])
def test_class_names_must_be_distinct_strings(bad, message):
    with pytest.raises(ValueError, match=message):
        check_class_names(bad)
