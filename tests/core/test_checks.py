"""check_files: every file checked, every refused one named once with its reason, one limit, the fix last."""

import os

import pytest

from tfpipe.core.checks import FileProblem, check_files
from tfpipe.errors import DataError


def _size(path):
    size = os.path.getsize(path)  # OSError for a missing file: reported as unreadable
    if size == 0:
        raise FileProblem(path, "empty")
    return size


def test_results_come_back_in_order_when_every_file_is_good(tmp_path):
    paths = [str(tmp_path / f"{i}") for i in range(3)]
    for i, p in enumerate(paths):
        open(p, "wb").write(b"x" * (i + 1))
    assert check_files(paths, _size, what="files are bad", fix=lambda bad: "none") == [1, 2, 3]
    assert check_files([], _size, what="files are bad", fix=lambda bad: "none") == []


def test_every_bad_file_is_named_with_its_reason_then_the_fix(tmp_path):
    paths = [str(tmp_path / f"{i:02d}") for i in range(14)]
    for p in paths[:12]:
        open(p, "wb").close()  # 12 empty, 2 missing
    seen = []

    def fix(bad):
        seen.extend(bad)
        return "remove them"

    with pytest.raises(DataError) as error:
        check_files(paths, _size, what="files cannot be used", fix=fix)
    message = str(error.value)
    assert message.startswith("14 of 14 files cannot be used:\n  ")
    assert message.count(": empty") == 10 and "\n  ... and 4 more" in message  # one limit: errors.listed's
    assert message.endswith("\nFix: remove them")
    assert len(seen) == 14 and {type(e) for e in seen} == {FileProblem}
    assert seen[-1].path == paths[-1] and seen[-1].reason == "unreadable (No such file or directory)"
