"""Reference recipes: what a domain's users write instead of tfpipe, timed beside it as variants.

The bench names no domain. A recipe is a function in the data's domain package (its `recipes`
module) with the signature of `tfpipe.domains.image.recipes.keras_recipe`:

    recipe(data_dir, config, batch_size, seed, *, mode="train", epochs=None) -> tf.data.Dataset

and a variant of the recipe's name times it on any domain whose package has it (the image
domain has both below, the audio domain `keras`). Adding a recipe is one line in RECIPES.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
from typing import Any, Callable


@dataclasses.dataclass(frozen=True)
class Recipe:
    """Where a domain keeps one reference recipe, and what to call it.

    Attributes:
      module: the module inside the domain's package, e.g. "recipes" (tfpipe.domains.image.recipes).
      function: the recipe function's name in it.
      title: who writes it this way, for notes and the chart ("Keras").
    """

    module: str
    function: str
    title: str


# Variant name -> the recipe it times.
RECIPES = {
    "keras": Recipe("recipes", "keras_recipe", "Keras"),
    "tf-models": Recipe("recipes", "tf_models_recipe", "tensorflow/models ResNet"),
}


def location(domain: Any, name: str) -> str:
    """"tfpipe.domains.image.recipes.keras_recipe": where the domain of `domain` keeps recipe `name`."""
    package = type(domain).__module__.rpartition(".")[0]
    return f"{package}.{RECIPES[name].module}.{RECIPES[name].function}"


def find(domain: Any, name: str) -> Callable[..., Any] | None:
    """The domain's recipe `name` (None: the domain has none)."""
    module, _, function = location(domain, name).rpartition(".")
    try:
        if importlib.util.find_spec(module) is None:
            return None
    except ModuleNotFoundError:
        return None
    return getattr(importlib.import_module(module), function, None)


def load(domain: Any, name: str) -> Callable[..., Any]:
    """The domain's recipe `name`.

    Raises:
      ValueError: the domain has no such recipe, naming where it would be.
    """
    recipe = find(domain, name)
    if recipe is None:
        raise ValueError(f"the {name} variant needs the {domain.name} domain's {RECIPES[name].title} recipe "
                         f"({location(domain, name)}), which it lacks; recipes here: "
                         f"{', '.join(n for n in RECIPES if find(domain, n)) or 'none'}")
    return recipe
