"""Quiet TensorFlow's start-up log noise in a user's script and in the `tfpipe` command.

TensorFlow prints its C++ start-up lines (oneDNN, "Unable to register cuDNN factory",
CPU instruction sets, TensorRT) to stderr as it loads, and its Python side warns through
the 'tensorflow' and 'absl' loggers. None of it is about the user's data.
"""

from __future__ import annotations

import logging
import os

_ENV = "TF_CPP_MIN_LOG_LEVEL"  # 0: all C++ logs, 1: no INFO, 2: no WARNING, 3: no ERROR


def quiet(level: int = 3) -> None:
    """Hides TensorFlow's start-up log lines; call it before TensorFlow is imported.

    The C++ lines obey the environment variable TF_CPP_MIN_LOG_LEVEL, which TensorFlow
    reads once, when it loads: call `tfpipe.quiet()` before `import tensorflow` (or
    before the first tfpipe call that loads it), or it cannot hide them. A value the
    user already set wins, so `TF_CPP_MIN_LOG_LEVEL=0 python train.py` shows every
    line again without editing the script. Unless that value is "0", the Python
    'tensorflow' and 'absl' loggers are also lowered to ERROR, which works at any time,
    also after TensorFlow has loaded (it hides warnings logged through absl by your own
    code as well).

    Args:
      level: TF_CPP_MIN_LOG_LEVEL to set when the environment has none: 3 hides
        everything below FATAL (the cuDNN/cuFFT "Unable to register" lines are ERRORs),
        2 keeps C++ errors.

    Raises:
      ValueError: `level` is not 0, 1, 2 or 3.
    """
    if level not in (0, 1, 2, 3):
        raise ValueError(f"quiet(level={level!r}): TF_CPP_MIN_LOG_LEVEL must be 0, 1, 2 or 3")
    os.environ.setdefault(_ENV, str(level))
    if os.environ[_ENV] == "0":
        return  # the user asked to see everything
    from absl import logging as absl_logging  # made by absl itself: a logger made here would lack its class

    logging.getLogger("tensorflow").setLevel(logging.ERROR)
    absl_logging.get_absl_logger().setLevel(logging.ERROR)
