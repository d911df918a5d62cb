"""Which domain a bench run's data belongs to, and what the bench takes from it.

The bench names no domain: the data's source says which one it is, the domain's config
class decides which fields variants and flags may set (and which configs' stages are
measured), and the domain's package may hold a `keras` module whose
`keras_recipe(data_dir, config, batch_size, seed, *, mode, epochs)` is the `keras` variant
(tfpipe.domains.audio.keras, tfpipe.domains.image.keras).
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
from typing import Any, Callable, Mapping, Optional, Sequence

from tfpipe.config import PipelineConfig
from tfpipe.domains.audio.config import AudioConfig
from tfpipe.errors import DataError

_PIPELINE_FIELDS = {f.name for f in dataclasses.fields(PipelineConfig)}

RECIPE_MODULE = "keras"  # <domain package>.keras
RECIPE_FN = "keras_recipe"


def of_source(source: Any) -> Optional[Any]:
    """The registered Domain of a source (its `domain` name, or the one its shard index records), or None."""
    from tfpipe.core.source import get_domain

    name = getattr(source, "domain", "") or ""
    index = getattr(source, "index", None)
    if not name and isinstance(index, dict):
        recorded = index.get("domain") or ""
        name = recorded.get("name", "") if isinstance(recorded, dict) else recorded
    return get_domain(name) if name else None


def of_config(config: Any) -> Any:
    """The registered Domain whose config class `config` is an instance of.

    Raises:
      ValueError: no registered domain uses this config class.
    """
    from tfpipe.core.source import domains

    for domain in domains().values():
        if isinstance(config, domain.config_class):
            return domain
    raise ValueError(f"{type(config).__name__}: no registered domain has this config class")


def recipe_module(domain: Any) -> str:
    """'tfpipe.domains.image.keras' for the domain defined in tfpipe.domains.image.domain."""
    package = type(domain).__module__.rpartition(".")[0]
    return f"{package}.{RECIPE_MODULE}"


def has_keras_recipe(domain: Any) -> bool:
    """Whether the domain's package has a keras module (found without importing it)."""
    try:
        return importlib.util.find_spec(recipe_module(domain)) is not None
    except ModuleNotFoundError:
        return False


def keras_recipe(domain: Any) -> Callable[..., Any]:
    """The domain's `keras_recipe(data_dir, config, batch_size, seed, *, mode, epochs)`.

    Raises:
      ValueError: the domain has none.
    """
    if not has_keras_recipe(domain):
        raise ValueError(f"the {domain.name} domain has no Keras recipe ({recipe_module(domain)}.{RECIPE_FN}); "
                         f"the keras variant needs one")
    return getattr(importlib.import_module(recipe_module(domain)), RECIPE_FN)


def of_data(source: Any, shards: Any) -> Optional[Any]:
    """The run's domain: the data source's, else the shard folder's (None: unknown, e.g. only user functions)."""
    from tfpipe.core.source import find

    if source is not None:
        return of_source(source)
    if shards is not None:
        try:
            return of_source(find(shards))
        except (ValueError, DataError):
            return None  # the engine says what is wrong with the folder
    return None


def base_features(domain: Any, features: Any, overrides: Optional[Mapping[str, Any]], data: Any) -> Any:
    """The config every variant starts from: `features` (or the domain's default) with the overrides' fields.

    Raises:
      ValueError: `features` or an override belongs to another domain's config, naming the right one.
    """
    if domain is None:
        base = features if features is not None else AudioConfig()
    else:
        base = domain.config(features)  # ValueError: another domain's config
    names = {f.name for f in dataclasses.fields(base)}
    stray = sorted(set(overrides or {}) - names - set(_PIPELINE_FIELDS))
    if stray and domain is not None:
        raise ValueError(f"{', '.join(stray)}: not fields of {type(base).__name__}, the features of the "
                         f"{domain.name} data in {data} (nor of PipelineConfig); its fields are "
                         f"{', '.join(sorted(names))}")
    return dataclasses.replace(base, **{k: v for k, v in (overrides or {}).items() if k in names})


def is_file_source(source: Any) -> bool:
    """One example per file (a class folder, CSV, list), as opposed to a shard folder."""
    return source is not None and getattr(source, "index", None) is None


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
