"""One bench run's worker processes, driven phase by phase: start, build, rounds, stages, ops, stop.

Every variant (per core count) has its own worker; the stage measurement one more. A
`Session` starts them (forked from a TensorFlow-preloaded fork server), watches them (a
watchdog kills them should this process die while they are frozen), sends each phase's
commands in order and records how long each phase took. Leaving the `with` block ends them all.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import sys
import time
from typing import Any, Mapping, Sequence

from tfpipe.bench import worker as bench_worker
from tfpipe.bench.report import StageReport, Turn


def machine(tf_version: str, gpu: bool, gpu_names: Sequence[str] = ()) -> dict[str, Any]:
    """Cores, usable cores, versions, platform and GPU (and the GPUs' names)."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"cores": os.cpu_count(), "usable_cores": usable, "tf_version": tf_version,
            "python": platform.python_version(), "platform": platform.platform(), "gpu": gpu,
            "gpu_names": list(gpu_names)}


def progress_bar(total: int, enabled: bool) -> Any:
    """A single-line tqdm bar on stderr whose description names the current step."""
    from tqdm import tqdm

    return tqdm(total=total, file=sys.stderr, disable=not enabled, leave=False, dynamic_ncols=True,
                bar_format="{desc} {bar:20} {n_fmt}/{total_fmt} [{elapsed}<{remaining}] {postfix}")


def _reason(message: str, key: str) -> str:
    """A worker's error as a skip reason: without the "variant 'NAME': ValueError: " it is raised with."""
    prefix = f"variant {key!r}: "
    message = message[len(prefix):] if message.startswith(prefix) else message
    for kind in ("ValueError: ", "DataError: "):
        message = message[len(kind):] if message.startswith(kind) else message
    return message


class Session:
    """The workers of one run.

    Args:
      runs: the variants, once per core count (each gets a worker).
      common: what every worker's job holds (data and shards paths, sys.path).
      cpus: core count -> the CPUs a variant pinned to that many runs on.
      stages: whether one more worker measures the stages.
      steps: progress steps the whole run will take.
      progress: show the progress bar.
    """

    def __init__(self, runs: Sequence[Any], common: Mapping[str, Any], cpus: Mapping[int, list],
                 stages: bool, steps: int, progress: bool):
        self.runs = list(runs)
        self._jobs = [(v.key, {**common, "variant": v, "cpus": cpus.get(v.cores)}) for v in self.runs]
        self._jobs += [("stages", {**common, "variant": None})] * stages
        self._bar = progress_bar(steps, progress)
        self._started = time.perf_counter()
        self.phases: dict[str, float] = {}
        self.workers: list[bench_worker.Worker] = []
        self.ready: list[dict] = []
        self.skipped: dict[str, str] = {}  # variant name -> why it could not be built

    def __enter__(self) -> "Session":
        self._watchdog = bench_worker.Watchdog()
        self._bar.set_description_str(f"bench: starting {len(self.runs)} workers")
        ctx = bench_worker.context()
        for name, job in self._jobs:
            self.workers.append(bench_worker.Worker(ctx, name, job))
            self._watchdog.watch(self.workers[-1].process.pid)
        self.ready = [w.receive() for w in self.workers]
        self._phase("start")
        return self

    def __exit__(self, *exc: Any) -> None:
        self._bar.close()
        for w in self.workers:
            w.close()
        self._watchdog.close()

    def _phase(self, name: str) -> None:
        """Records the seconds since the previous phase ended."""
        self.phases[name] = time.perf_counter() - self._started - sum(self.phases.values())

    def _step(self, text: str) -> None:
        self._bar.set_description_str(f"bench: {text}")

    def build(self, warmup: int) -> list[dict]:
        """Builds every variant's dataset: first batch timed, `warmup` batches untimed.

        A skippable variant (a reference recipe) whose build fails is dropped from the session,
        its reason kept in `skipped` (by variant name); the builds of the others are returned.
        """
        builds, failed = [], {}
        for v, w in zip(self.runs, self.workers):
            self._step(f"build {w.name}")
            try:
                builds.append(w.call("build", warmup=warmup))
            except (ValueError, bench_worker.VariantError) as e:  # DataError is a ValueError
                if not v.skippable:
                    raise
                failed.setdefault(v.name, _reason(str(e), v.key))
                builds.append(None)
            self._bar.update()
        self._phase("build")
        if failed:
            keep = [i for i, v in enumerate(self.runs) if v.name not in failed]
            for i, w in enumerate(self.workers[:len(self.runs)]):
                if i not in keep:
                    w.close()
            stages = self.workers[len(self.runs):]
            self.workers = [self.workers[i] for i in keep] + stages
            self.ready = [self.ready[i] for i in keep] + self.ready[len(self.runs):]
            self.runs = [self.runs[i] for i in keep]
            builds = [builds[i] for i in keep]
            self.skipped.update(failed)
        return builds

    def rounds(self, repeats: int, turn_batches: Mapping[str, int], step_ms: float,
               min_turn_s: float) -> dict[str, list[Turn]]:
        """`repeats` rounds, each variant one turn per round in order (the others frozen)."""
        turns: dict[str, list[Turn]] = {v.key: [] for v in self.runs}
        for r in range(repeats):
            for v, w in zip(self.runs, self.workers):
                self._step(f"round {r + 1}/{repeats} {w.name}")
                turn = w.call("time", batches=turn_batches[v.name], step_s=step_ms / 1000, min_s=min_turn_s)
                turns[v.key].append(Turn(**turn))
                self._bar.update()
        self._phase("rounds")
        return turns

    def stages(self, staged: Sequence[tuple], budget_s: float) -> list[StageReport]:
        """Stage rates per (label, config, batch size), in the stage worker (none without one)."""
        reports = []
        if len(self.workers) > len(self.runs):
            self._step("stages")
            measured = self.workers[-1].call("stages", configs=list(staged), budget_s=budget_s)
            reports = [StageReport(cores=self.ready[-1]["usable_cores"], features=dataclasses.asdict(config), **r)
                       for (_, config, _), r in zip(staged, measured)]
            self._bar.update()
        self._phase("stages")
        return reports

    def ops(self, chosen: Sequence[Any], budget_s: float) -> list[Any]:
        """Per-op rates of each variant's chain, in its run with the most cores.

        The op rates are single-thread; the cores only credit its parallel ops.
        """
        reports = []
        for v in chosen:
            i = max((i for i, r in enumerate(self.runs) if r.name == v.name),
                    key=lambda i: self.ready[i]["usable_cores"])
            self._step(f"ops of {v.name}")
            reports.append(self.workers[i].call("ops", budget_s=budget_s, cores=self.ready[i]["usable_cores"]))
            self._bar.update()
        self._phase("ops")
        return reports

    def stop(self) -> list[dict]:
        """Stops the variants' workers; each reports its peak memory."""
        peaks = [w.call("stop") for w in self.workers[:len(self.runs)]]
        self._phase("stop")
        return peaks
