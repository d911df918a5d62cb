"""Stage: one named map step of a chain; compose() fuses steps; user_stages() makes a user's functions stages.

A chain is a list of stages. Which of them run before or after `batch`, fused or not,
parallel or not, is the chain's decision (tfpipe.core.chain), taken from the toggles;
a stage only says what it computes and whether it also works on a whole batch.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable, Sequence


@dataclasses.dataclass(frozen=True)
class Stage:
    """One map step.

    Attributes:
      name: shown in `dataset_ops`-style listings and as the tf.data op's name.
      fn: `fn(*element) -> element`; an element is a tuple, usually (features, label).
      batchable: fn gives the same result on a batch as on each example of it, so with
        `vectorize` it can run once per batch after `batch` (decode, parse, spectrogram).
      python: fn runs Python under the GIL (python_fn / numpy_function); it cannot run
        on the tf.data service and does not scale with threads.
      random: fn draws random numbers (a random crop, a flip): a cache must sit before it,
        or every epoch would repeat the first epoch's draws.
      fixed_shape: fn gives every example the same shapes (a decoded image once resized, a file's
        bytes as one string), so several examples can be handled in one call and stacked.
      example_bytes: about how many bytes fn gives per example (0: not known). Stacking a group
        copies them once more, so only small examples are grouped (tfpipe.core.plan).
    """

    name: str
    fn: Callable[..., Any]
    batchable: bool = False
    python: bool = False
    random: bool = False
    fixed_shape: bool = False
    example_bytes: int = 0


def compose(*fns: Callable[..., Any]) -> Callable[..., Any]:
    """One map function that runs `fns` in order (each gets the previous one's output, unpacked)."""

    def composed(*element):
        for fn in fns:
            element = fn(*element)
            if not isinstance(element, tuple):
                element = (element,)
        return element[0] if len(element) == 1 else element

    return composed


def fuse(stages: Sequence[Stage]) -> Stage:
    """The stages as one Stage (names joined with '+'), batchable only if all are."""
    if len(stages) == 1:
        return stages[0]
    return Stage("+".join(s.name for s in stages), compose(*(s.fn for s in stages)),
                 batchable=all(s.batchable for s in stages), python=any(s.python for s in stages),
                 random=any(s.random for s in stages), fixed_shape=all(s.fixed_shape for s in stages),
                 example_bytes=stages[-1].example_bytes)


def grouped(stage: Stage, size: int) -> Stage:
    """The stage over a group of `size` examples (every value with a leading axis of `size`): the
    examples are split apart, the stage runs on each, unrolled in one graph, and the results are
    stacked again. One call per group instead of per example."""

    def per_group(*group):
        import tensorflow as tf  # traced inside a tf.data map: TensorFlow is loaded by then

        columns = [tf.unstack(t, num=size) for t in tf.nest.flatten(group)]
        outputs = []
        for i in range(size):
            element = tf.nest.pack_sequence_as(group, [column[i] for column in columns])
            outputs.append(stage.fn(*element))
        return tf.nest.map_structure(lambda *values: tf.stack(values), *outputs)

    return dataclasses.replace(stage, name=f"{stage.name}[x{size}]", fn=per_group)


def as_stage(fn: Any, name: str, batchable: bool = False, random: bool = False) -> Stage:
    """A user's function (plain callable, python_fn result or Stage) as a Stage.

    Its ops run under the name scope "NAME.FUNCTION" (e.g. "process.parse_wav"), so an error
    raised inside it by TensorFlow names the function: `{{node process.parse_wav/...}}`.
    """
    if isinstance(fn, Stage):
        return fn
    if not callable(fn):
        raise ValueError(f"{name}={fn!r}: expected a function (or tfpipe.python_fn(fn, output_signature))")
    return Stage(name, scoped(fn, f"{name}.{getattr(fn, '__name__', 'fn')}"), batchable=batchable,
                 python=bool(getattr(fn, "tfpipe_python", False)), random=random)


def scoped(fn: Callable[..., Any], scope: str) -> Callable[..., Any]:
    """fn with its ops under the name scope `scope` (made a valid TF scope name)."""
    scope = re.sub(r"[^A-Za-z0-9_.\-]", "_", scope).lstrip("_.-") or "fn"

    def in_scope(*element):
        import tensorflow as tf  # traced inside a tf.data map: TensorFlow is loaded by then

        with tf.name_scope(scope):
            return fn(*element)

    # __name__ stays "in_scope": AutoGraph finds a function's source by it, and converts fn inside.
    in_scope.tfpipe_python = getattr(fn, "tfpipe_python", False)
    return in_scope


def user_stages(read: Any = None, process: Any = None, batch_process: Any = None) -> list[Stage]:
    """A user's functions as stages: read and process per example, batch_process batchable.

    `read` is taken to be deterministic (the same bytes for the same file) and the others
    possibly random (augmentation), so a cache keeps what `read` returns and runs the rest
    each epoch; pass a `Stage(..., random=False)` to let a cache keep its output too.
    """
    return [as_stage(fn, name, batchable, random=name != "read") for fn, name, batchable in
            ((read, "read", False), (process, "process", False), (batch_process, "batch_process", True))
            if fn is not None]
