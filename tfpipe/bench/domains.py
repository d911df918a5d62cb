"""Which domain a bench run's data belongs to, and the domain's hooks the bench uses.

The bench names no domain: the data's source says which one it is, the domain's config
class decides which fields variants and flags may set, and the domain's package may hold
a `keras` module whose `keras_recipe(data_dir, config, batch_size, seed, *, mode, epochs)`
is the `keras` variant (tfpipe.domains.audio.keras, tfpipe.domains.image.keras).
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any, Callable, Optional

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
