"""Label ids: from labels given as ints or names, and pinned to the class names of another source.

`label_ids` makes ids of a list of labels (a CSV's column, a user's list). `pinned_ids` maps a
source's own ids to the ids of a given `class_names` (Keras' name): an eval folder or CSV that
lacks a class then numbers the others as the training data does. Pure Python: TensorFlow only
inside the renumbering stage's function.
"""

from __future__ import annotations

import re
from typing import Any, Optional, Sequence

from tfpipe.core.stage import Stage

_MAX_LISTED = 5
_WHOLE_FLOAT = re.compile(r"^\s*-?\d+\.0*\s*$")  # "1.0", "10.", " 2.00 ": pandas' float labels


def label_ids(labels: Sequence[Any], where: Optional[Sequence[str]] = None) -> tuple[list[int], tuple[str, ...]]:
    """(id per label, class names by id) for labels given as ints, digit strings, or names.

    Whole numbers (7, "7", "7.0", 7.0) are their own ids, so a train and an eval list agree even
    when one lacks a class ("8" is 8 in both; sorting them as text would make "10" come before
    "2"). Other names are sorted, so the same set of names always gets the same ids. Numbers and
    names mixed in one list are refused: a single stray name would otherwise turn every number
    into a name sorted as text ('1', '10', '2', 'x').

    Args:
      labels: one label per example.
      where: how to name each label's position in messages (e.g. "line 7"); default "label i".

    Raises:
      ValueError: a missing label (None, NaN, ""), a negative id, or numbers and names mixed,
        naming their positions.
    """
    where = list(where) if where is not None else [f"label {i}" for i in range(len(labels))]
    for i, label in enumerate(labels):
        if label is None or (isinstance(label, float) and label != label) or (isinstance(label, str) and
                                                                                not label.strip()):
            raise ValueError(f"{where[i]} is {label!r}: every example needs a label (an int id or a class name)")
    numbers = [whole_number(label) for label in labels]
    if all(n is not None for n in numbers):
        if min(numbers) < 0:
            i = numbers.index(min(numbers))
            raise ValueError(f"{where[i]}: label {labels[i]!r}: label ids must be >= 0")
        return numbers, tuple(str(i) for i in range(max(numbers) + 1))
    if any(n is not None for n in numbers):
        names = [i for i, n in enumerate(numbers) if n is None]
        ids = [i for i, n in enumerate(numbers) if n is not None]
        raise ValueError(f"labels mix numbers and names: {_some(where, labels, ids)} are numbers but "
                         f"{_some(where, labels, names)} are not; give every example an int id, or every "
                         f"example a class name")
    names = tuple(sorted({str(label) for label in labels}))
    position = {name: i for i, name in enumerate(names)}
    return [position[str(label)] for label in labels], names


def _some(where: Sequence[str], labels: Sequence[Any], positions: Sequence[int]) -> str:
    shown = ", ".join(f"{where[i]} ({labels[i]!r})" for i in positions[:_MAX_LISTED])
    return shown + (f" and {len(positions) - _MAX_LISTED} more" if len(positions) > _MAX_LISTED else "")


def whole_number(label: Any) -> Optional[int]:
    """The int a label stands for (3, np.int64(3), "3", " 3", "3.0", 3.0), else None."""
    if isinstance(label, bool):
        return None
    kind = getattr(getattr(label, "dtype", None), "kind", "")
    if isinstance(label, int) or kind in ("i", "u"):
        return int(label)
    if isinstance(label, float) or kind == "f":
        return int(label) if float(label).is_integer() else None
    if isinstance(label, str):
        text = label.strip()
        if text.lstrip("-").isdigit():
            return int(text)
        if _WHOLE_FLOAT.match(text):
            return int(float(text))
    return None


def check_class_names(class_names: Any) -> tuple[str, ...]:
    """`class_names` as a tuple of distinct str, or a ValueError saying what is wrong."""
    if isinstance(class_names, (str, bytes)) or not hasattr(class_names, "__iter__"):
        raise ValueError(f"class_names={class_names!r}: pass a list of class names, e.g. "
                         f"class_names=train_source.class_names")
    names = tuple(n.decode() if isinstance(n, bytes) else n for n in class_names)
    if not names or not all(isinstance(n, str) and n for n in names):
        raise ValueError(f"class_names={list(names)!r}: pass one non-empty str per class")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"class_names lists {', '.join(map(repr, twice))} more than once: one id per class name")
    return names


def numbered(names: Sequence[str]) -> bool:
    """The names are plain ids ("0", "1", ...): labels that were given as numbers."""
    return tuple(names) == tuple(str(i) for i in range(len(names)))


def pinned_ids(own: Sequence[str], class_names: Sequence[str], where: str,
               used: Optional[Sequence[int]] = None) -> Optional[list[int]]:
    """The id in `class_names` of each of a source's own class ids (None: the ids stay as they are).

    Classes match by name. Labels given as numbers (own names "0", "1", ...) that are not all
    names in `class_names` are ids already: they keep them, and must be below len(class_names).

    Args:
      own: the source's class names, by its own ids.
      class_names: the class names to number by (e.g. the training data's).
      where: the source, for messages.
      used: the own ids that examples carry, where known (numbered labels: the largest is checked).

    Raises:
      ValueError: a class of the source that `class_names` does not list, naming it.
    """
    class_names = tuple(class_names)
    if numbered(own) and not set(own) <= set(class_names):
        largest = max(used) if used else len(own) - 1
        if largest >= len(class_names):
            raise ValueError(f"{where}: label id {largest} but class_names lists {len(class_names)} classes "
                             f"({_names(class_names)}); ids must be below that")
        return None
    unknown = [n for n in own if n not in class_names]
    if unknown:
        raise ValueError(f"{where}: classes {_names(unknown)} are not in class_names ({_names(class_names)}); "
                         f"add them to class_names, or leave their files out")
    ids = [class_names.index(n) for n in own]
    return None if ids == list(range(len(own))) else ids


def class_ids_stage(ids: Sequence[int]) -> Stage:
    """A batchable stage that renumbers labels: label -> ids[label] (one gather, fused into the map)."""
    ids = [int(i) for i in ids]

    def class_ids(features, labels):
        import tensorflow as tf  # traced inside a tf.data map: TensorFlow is loaded by then

        return features, tf.gather(tf.constant(ids, tf.int64), labels)

    return Stage("class_ids", class_ids, batchable=True)


def _names(names: Sequence[str]) -> str:
    shown = ", ".join(map(repr, names[:12]))
    return shown + (f" and {len(names) - 12} more" if len(names) > 12 else "")
