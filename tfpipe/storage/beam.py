"""The shard plan executed by Apache Beam: when one machine is not enough.

    jobs (one per shard) -> beam.Create -> ParDo(write one shard) -> manifests

Each Beam worker runs the same per-shard function as the local writer
(`tfpipe.storage.shard_job.write_shard`: temp name, fsync, rename, manifest), so the same
seed gives byte-identical shards. The launching process planned the shards and checked
every input before the pipeline starts, and writes tfpipe.json after it has finished from
the manifests the workers left in the folder's work subfolder: a failed run leaves no
index (nothing a reader takes), and a rerun keeps the shards that are complete.

On a cluster the shard folder must be a path every worker and the launcher see (a bucket:
gs://, s3://; or an NFS or other shared mount), and the workers need tfpipe and its domain's libraries installed
(e.g. `--setup_file ./setup.py`, or a container image with tfpipe installed).
"""

from __future__ import annotations

import json
import shlex
from typing import Any, Sequence, Union

import apache_beam as beam  # this module is loaded only for runner="beam"

from tfpipe.core import filesystem as fs
from tfpipe.errors import DataError
from tfpipe.storage.shard_job import ShardJob, write_shard

# Without options: Beam's DirectRunner on this machine, shards written by 2 worker processes.
DEFAULT_OPTIONS = ("--runner=DirectRunner", "--direct_running_mode=multi_processing", "--direct_num_workers=2")


def pipeline_options(beam_options: Union[None, str, Sequence[str], Any]):
    """PipelineOptions from a command-line string, a list of flags, or PipelineOptions (None: DirectRunner)."""
    from apache_beam.options.pipeline_options import PipelineOptions

    if isinstance(beam_options, PipelineOptions):
        return beam_options
    flags = shlex.split(beam_options) if isinstance(beam_options, str) else list(beam_options or ())
    if not any(f.startswith("--runner") for f in flags):
        flags = list(DEFAULT_OPTIONS) + flags
    try:
        options = PipelineOptions(flags)
        options.get_all_options(retain_unknown_options=False)
    except (SystemExit, ValueError) as e:
        raise ValueError(f"beam_options={beam_options!r}: not valid Beam pipeline options ({e})") from None
    return options


def run_beam(jobs: Sequence[ShardJob], beam_options: Any = None) -> list[dict]:
    """Writes every job's shard with Apache Beam; returns the manifests in job order.

    Raises:
      DataError: a worker could not write a shard (the message names the file and why).
    """
    options = pipeline_options(beam_options)
    try:
        with beam.Pipeline(options=options) as pipeline:
            _ = (pipeline
                 | "shard jobs" >> beam.Create(list(jobs), reshuffle=True)  # reshuffle: spread over workers
                 | "write shards" >> beam.ParDo(WriteShard()))
    except DataError:
        raise
    except Exception as e:  # Beam wraps worker errors in its own types; keep the worker's message
        text = str(e)
        marker = "DataError: "
        if marker in text:
            message = text[text.rindex(marker) + len(marker):].strip().splitlines()[0]
            raise DataError(f"{message} (in a Beam worker)") from None
        raise
    return [_manifest(job) for job in jobs]


def _manifest(job: ShardJob) -> dict:
    """The manifest a worker left for `job` (it wrote the shard, then this file)."""
    path = fs.join(job.work_dir, job.spec.file + ".json")
    try:
        with fs.open(path, "rb") as f:
            manifest = json.loads(f.read())
    except (OSError, ValueError) as e:
        raise DataError(f"{path}: the Beam pipeline finished but this shard's manifest is missing ({e}); the "
                        f"shard folder must be a path every Beam worker and this process share") from None
    if manifest.get("key") != job.key:
        raise DataError(f"{path}: a manifest of other inputs or settings; rerun the same command")
    return {**manifest, "resumed": False}


class WriteShard(beam.DoFn):
    """Writes one shard (the local writer's function) per element and yields its manifest."""

    def process(self, job: ShardJob):
        yield write_shard(job)
