"""`tfpipe bench --write_flagfile F`: the winning tfpipe variant as absl flags, ready to train with.

One `--flag=value` per line (booleans as `--flag` / `--noflag`), the flags `tfpipe.flags` makes
from the config fields: `--pipeline=PRESET`, then every PipelineConfig field, then every field
of the data's domain config (its own flags, e.g. --n_mels or --height). Any absl program that
defines tfpipe's flags reads it back to the same configs (`python -m estimator_demo
--flagfile=F`; `tfpipe.flags.pipeline_config()`). Comment lines name the run, the machine
(cores, GPU) and the date, and say so when a reference recipe was faster than tfpipe's best:
the file then holds tfpipe's best, which is what a tfpipe program can run.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any, Optional

from tfpipe.bench import winner
from tfpipe.config import PRESETS, PipelineConfig, field_type


def best_tfpipe(result: Any) -> Any:
    """tfpipe's fastest row, at the run's largest core count (what a training host has most of).

    Raises:
      ValueError: no variant of the run is tfpipe's chain (only recipes or plain input_fns).
    """
    rows = [v for v in result.variants if winner.is_tfpipe(v)]
    if not rows:
        raise ValueError("--write_flagfile: no variant of this run is tfpipe's chain (optimized, naive, shards or a "
                         "--dataset_fn given a PipelineConfig), so there is no PipelineConfig to write; add "
                         "--variants optimized")
    most = max(v.cores or 0 for v in rows)
    return max((v for v in rows if (v.cores or 0) == most), key=lambda v: v.stats.median)


def flag_lines(config: Any, config_class: Optional[type] = None) -> list[str]:
    """Every field of a config as absl flag lines (a None field is left out: unset is None)."""
    from tfpipe.flags import flag_name  # absl: loaded where a flagfile is written, not at `tfpipe bench --help`

    config_class = config_class or type(config)
    lines = []
    for field in dataclasses.fields(config_class):
        value = getattr(config, field.name) if not isinstance(config, dict) else config[field.name]
        name = flag_name(config_class, field.name)
        if value is None:
            continue
        if field_type(field) is bool:
            lines.append(f"--{name}" if value else f"--no{name}")
        elif isinstance(value, (tuple, list)):
            lines.append(f"--{name}={','.join(map(str, value))}")
        else:
            lines.append(f"--{name}={value!r}" if isinstance(value, float) else f"--{name}={value}")
    return lines


def flagfile_text(result: Any, *, path: str = "THIS_FILE", today: Optional[datetime.date] = None) -> str:
    """The flagfile of a bench result: comments, then the best tfpipe variant's flags.

    Args:
      result: a BenchResult.
      path: where it will be written (for the command in its comment).
      today: the date in the comment (default: today).
    """
    best = best_tfpipe(result)
    pipeline = PipelineConfig(**best.config["pipeline"])
    preset = best.name.partition(":")[0] if best.name.partition(":")[0] in PRESETS else "optimized"
    if preset == "optimized" and best.name.startswith("shards:naive"):
        preset = "naive"
    lines = [f"# tfpipe bench --write_flagfile: {best.name}, {best.stats.median:,.0f} examples/s"
             + (f" on {best.cores} core(s)" if best.pinned else "") + f", data {result.settings.get('data')}",
             f"# machine: {_machine(result.machine)}; {(today or datetime.date.today()).isoformat()}"]
    lines += [f"# {line}" for line in _standing_note(result, best)]
    unset = [f.name for f in dataclasses.fields(PipelineConfig)
             if getattr(pipeline, f.name) is None and getattr(PipelineConfig.preset(preset), f.name) is not None]
    lines += [f"# {', '.join(unset)}: None here, the {preset} preset's value when read back"] * bool(unset)
    data = result.settings.get("shards" if best.kind == "shards" else "data")
    lines.append(f"# train with it: python -m estimator_demo --flagfile={path}"
                 + (f" --data {data}" if data and best.kind != "dataset_fn" else ""))
    lines += [f"--pipeline={preset}"] + flag_lines(pipeline)
    features = best.config.get("features")
    if features:
        lines += flag_lines(features, _config_class(result.settings.get("domain"), features))
    return "\n".join(lines) + "\n"


def write_flagfile(result: Any, path: str) -> Any:
    """Writes `flagfile_text(result)` to `path`; returns the variant written."""
    text = flagfile_text(result, path=path)
    with open(path, "w") as f:
        f.write(text)
    return best_tfpipe(result)


def _config_class(domain: Optional[str], features: dict) -> type:
    """The domain config class of the run's data (the registered domain's), for its flag names."""
    from tfpipe.core.registry import get_domain

    if not domain:
        raise ValueError("--write_flagfile: the variant has features but the run names no domain")
    config_class = get_domain(domain).config_class
    if set(features) != {f.name for f in dataclasses.fields(config_class)}:
        raise ValueError(f"--write_flagfile: features {sorted(features)} are not {config_class.__name__}'s fields")
    return config_class


def _machine(machine: Any) -> str:
    """'2 cores (2 usable), no GPU, TF 2.15.1, Linux-...': what the timing depends on."""
    gpus = machine.get("gpu_names") or []
    gpu = ", ".join(gpus) if gpus else ("a GPU" if machine.get("gpu") else "no GPU")
    return (f"{machine.get('cores')} cores ({machine.get('usable_cores')} usable), {gpu}, "
            f"TF {machine.get('tf_version')}, {machine.get('platform')}")


def _standing_note(result: Any, best: Any) -> list[str]:
    """What the winner line said, and a reference recipe that was faster than tfpipe's best."""
    standing = next((s for s in result.standings if best is s.best_tfpipe), None)
    if standing is None:
        return []
    note = [standing.text()]
    top = standing.fastest
    if top is not best and not winner.is_tfpipe(top):
        kind = "your own input_fn" if top.kind == "input_fn" else f"the reference recipe {top.name}"
        how = "tied with" if best in standing.tied else "was faster than"
        note.append(f"{kind} {how} tfpipe's best; these flags are tfpipe's best variant, {best.name}")
    return note
