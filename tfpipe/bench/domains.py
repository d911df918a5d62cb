"""Which domain a bench run's data belongs to, and what the bench takes from it.

The bench names no domain: the data's source says which one it is, the domain's config
class decides which fields variants and flags may set (and which configs' stages are
measured); its reference recipes are found by `recipes`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional, Sequence

from tfpipe.config import PipelineConfig

_PIPELINE_FIELDS = {f.name for f in dataclasses.fields(PipelineConfig)}

def of_source(source: Any) -> Optional[Any]:
    """The registered Domain of a source (a class folder's, or the one a shard folder was written by), or None."""
    from tfpipe.core.registry import get_domain

    name = getattr(source, "domain", "") or ""
    return get_domain(name) if name else None


def of_config(config: Any) -> Any:
    """The registered Domain whose config class `config` is an instance of.

    Raises:
      ValueError: no registered domain uses this config class.
    """
    from tfpipe.core.registry import domain_of_config

    return domain_of_config(config)


def base_features(inputs: Any, features: Any, overrides: Optional[Mapping[str, Any]]) -> Any:
    """The config every variant starts from, with the overrides' fields applied.

    `features` if given; else the config a shard folder of the run's domain was written with
    (--data or --shards), so its stored settings (clip_seconds, n_mels, image size, ...) need
    no flags; else the domain's default.

    Raises:
      ValueError: `features` or an override belongs to another domain's config, naming the right one.
    """
    domain = inputs.domain
    if domain is None:
        base = features if features is not None else _default_config()
    elif features is None and _stored(inputs) is not None:
        base = _stored(inputs).config(None)
    else:
        base = domain.config(features)  # ValueError: another domain's config
    names = {f.name for f in dataclasses.fields(base)}
    stray = sorted(set(overrides or {}) - names - set(_PIPELINE_FIELDS))
    if stray and domain is not None:
        raise ValueError(f"{', '.join(stray)}: not fields of {type(base).__name__}, the features of the "
                         f"{domain.name} data in {inputs.data or inputs.shards} (nor of PipelineConfig); its "
                         f"fields are {', '.join(sorted(names))}")
    return dataclasses.replace(base, **{k: v for k, v in (overrides or {}).items() if k in names})


def _default_config() -> Any:
    """The default domain's config (no data to say which domain)."""
    from tfpipe.core.registry import default_domain

    return default_domain().config()


def _stored(inputs: Any) -> Optional[Any]:
    """The run's shard folder written by its domain (--data first, then --shards), or None."""
    from tfpipe.storage.source import ShardSource

    for source in (inputs.source, inputs.shard_source):
        if isinstance(source, ShardSource) and of_source(source) is inputs.domain:
            return source
    return None


def stage_configs(domain: Any, readers: Sequence[Any], limit: int) -> list[tuple[str, Any, int]]:
    """(label, config, batch size) of the first `limit` distinct feature configs of `readers`, in order.

    A label names the fields where the configs differ ("backend=librosa"), or the domain when
    one config is measured ("image features").
    """
    first: dict[Any, int] = {}
    for v in readers:
        if v.features not in first and len(first) < limit:
            first[v.features] = v.pipeline.batch_size
    configs = list(first)
    differ = [f.name for f in dataclasses.fields(configs[0]) if len({getattr(c, f.name) for c in configs}) > 1] \
        if configs else []
    out = []
    for config, batch_size in first.items():
        if differ:
            shown = [f"{k}={_show(getattr(config, k))}" for k in differ[:3]]
            label = ", ".join(shown + ["..."] * (len(differ) > 3))
        else:
            label = f"{domain.name} features"
        out.append((label, config, batch_size))
    return out


def _show(value: Any) -> str:
    """A field value as a spec would set it: true/false, 64, librosa."""
    return str(value).lower() if isinstance(value, bool) else str(value)
