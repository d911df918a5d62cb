"""`tfpipe bench --prepare`: write_shards wall time per worker count, and its table and JSON."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import statistics
import tempfile
import time
from typing import Any, Mapping, Optional, Sequence, Union

from tfpipe.bench.report import SCHEMA, SCHEMA_VERSION
from tfpipe.bench.text import align_table
from tfpipe.bench import session
from tfpipe.bench.session import progress_bar


@dataclasses.dataclass(frozen=True)
class PrepareResult:
    """`tfpipe bench --prepare`: write_shards wall time per worker count.

    Attributes:
      settings: data, num_shards, store, repeats, num_examples.
      machine: as in BenchResult.
      seconds: worker count -> wall seconds of each timed run.
      writing_seconds: worker count -> seconds of each run after its workers were ready
        (start-up excluded: the part more workers can speed up).
    """

    settings: Mapping[str, Any]
    machine: Mapping[str, Any]
    seconds: Mapping[int, tuple[float, ...]]
    writing_seconds: Mapping[int, tuple[float, ...]]

    def median(self, workers: int, writing: bool = False) -> float:
        """Median wall (or, with `writing`, after-start-up) seconds of the runs with `workers` workers."""
        return statistics.median((self.writing_seconds if writing else self.seconds)[workers])

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON, one entry per worker count with its speedup over the first."""
        first = next(iter(self.seconds))
        return {"format": SCHEMA + "-prepare", "version": SCHEMA_VERSION, "settings": dict(self.settings),
                "machine": dict(self.machine),
                "workers": [{"num_workers": w, "seconds": list(s), "median_s": self.median(w),
                             "examples_per_s": self.settings["num_examples"] / self.median(w),
                             "speedup": self.median(first) / self.median(w),
                             "writing_seconds": list(self.writing_seconds[w]),
                             "writing_examples_per_s": self.settings["num_examples"] / self.median(w, True),
                             "writing_speedup": self.median(first, True) / self.median(w, True)}
                            for w, s in self.seconds.items()]}

    def to_json(self, indent: Optional[int] = 2) -> str:
        """The whole result as JSON text."""
        return json.dumps(self.to_dict(), indent=indent)

    def table(self) -> str:
        """Aligned table: one row per worker count."""
        s = self.settings
        rows = [["workers", "median s", "min-max s", "examples/s", "speedup", "after start-up: examples/s",
                 "speedup"]]
        for row in self.to_dict()["workers"]:
            secs = row["seconds"]
            rows.append([str(row["num_workers"]), f"{row['median_s']:.2f}",
                         f"{min(secs):.2f}-{max(secs):.2f}", f"{row['examples_per_s']:,.0f}",
                         f"{row['speedup']:.2f}x", f"{row['writing_examples_per_s']:,.0f}",
                         f"{row['writing_speedup']:.2f}x"])
        return "\n".join([f"tfpipe bench --prepare: write_shards of {s['num_examples']} examples in "
                          f"{s['data']} into {s['num_shards']} shards (store={s['store']}), "
                          f"median of {s['repeats']} "
                          f"alternating runs, {self.machine['usable_cores']} usable cores"]
                         + align_table(rows, right=range(1, len(rows[0]))))


def _domain_of(data: Any, features: Any) -> Any:
    """The domain of the data's files (of `features` when they name none)."""
    from tfpipe.core.registry import domain_of_config, get_domain
    from tfpipe.core.source import find

    name = getattr(find(os.fspath(data)), "domain", "")
    return get_domain(name) if name else domain_of_config(features)


def run_prepare(data: Union[str, os.PathLike], workers: Sequence[int] = (1, 2), *, repeats: int = 3,
                num_shards: int = 8, features: Any = None, store: Optional[str] = None,
                progress: bool = True) -> PrepareResult:
    """Times `tfpipe.write_shards` for each worker count, alternating, after one untimed run.

    Each run writes to a fresh folder (removed after), so no run resumes another's shards.

    Args:
      data: wav folder or CSV manifest.
      workers: worker counts to compare (0: in this process); the first is the speedup's reference.
      repeats: timed runs per worker count.
      num_shards: shards written each run.
      features: the data's domain config for write_shards (default: that domain's default).
      store: what the shards store, one of the data's domain's stores (default: its first).
      progress: show a progress line on stderr.

    Returns:
      PrepareResult (`.table()`, `.to_json()`).
    """
    from tfpipe.storage.writer import write_shards_with_stats

    workers = tuple(dict.fromkeys(int(w) for w in workers))
    if not workers or min(workers) < 0 or repeats < 1:
        raise ValueError(f"workers={list(workers)}, repeats={repeats}: need worker counts >= 0 "
                         f"(0: in this process) and repeats >= 1")
    domain = _domain_of(data, features)
    features, store = domain.config(features), store or domain.stores()[0]
    seconds: dict[int, list[float]] = {w: [] for w in workers}
    writing: dict[int, list[float]] = {w: [] for w in workers}
    bar = progress_bar(1 + repeats * len(workers), progress)
    with tempfile.TemporaryDirectory(prefix="tfpipe-bench-prepare-") as tmp:

        def write(num_workers: int) -> tuple[float, float, dict]:
            out = os.path.join(tmp, "shards")
            bar.set_description_str(f"bench --prepare: {num_workers} workers")
            start = time.perf_counter()
            index, stats = write_shards_with_stats(
                data, out, num_shards=num_shards, num_workers=num_workers, features=features, store=store,
                progress=False)
            elapsed = time.perf_counter() - start
            shutil.rmtree(out)
            bar.update()
            return elapsed, stats.writing_seconds, index

        index = write(workers[0])[2]  # untimed: fills the page cache, so the first timed run is not favoured
        for _ in range(repeats):
            for w in workers:
                elapsed, after_startup, _ = write(w)
                seconds[w].append(elapsed)
                writing[w].append(after_startup)
    bar.close()
    import tensorflow as tf

    machine = session.machine(tf.__version__, bool(tf.config.list_physical_devices("GPU")))
    settings = {"data": os.path.abspath(data), "num_shards": num_shards, "store": store, "repeats": repeats,
                "num_examples": index["num_examples"], "rejected": len(index.get("rejected", [])),
                "features": dataclasses.asdict(features)}
    return PrepareResult(settings, machine, {w: tuple(s) for w, s in seconds.items()},
                         {w: tuple(s) for w, s in writing.items()})
