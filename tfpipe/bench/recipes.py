"""Reference recipes: what a domain's users write instead of tfpipe, timed beside it as variants.

The bench names no domain. A domain lists its recipes (`Domain.recipes`: variant name ->
"module:function"), each with the signature

    recipe(data_dir, config, batch_size, seed, *, mode="train", epochs=None) -> tf.data.Dataset

and a variant of the recipe's name times it on any domain that lists it. RECIPES names the
kinds of recipe the bench knows (a variant name, and who writes it that way); a new kind is
one line here and one entry in the domains that have it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable


@dataclasses.dataclass(frozen=True)
class Recipe:
    """A kind of reference recipe.

    Attributes:
      title: who writes it this way, for notes and the chart ("Keras").
    """

    title: str


# Variant name -> the kind of recipe it times.
RECIPES = {
    "keras": Recipe("Keras"),
    "tf-models": Recipe("tensorflow/models ResNet"),
}


def location(domain: Any, name: str) -> str:
    """"package.module.function": where `domain` keeps recipe `name` ("" when it has none)."""
    return domain.recipes.get(name, "").replace(":", ".")


def find(domain: Any, name: str) -> Callable[..., Any] | None:
    """The domain's recipe `name` (None: the domain has none)."""
    return domain.recipe(name)


def load(domain: Any, name: str) -> Callable[..., Any]:
    """The domain's recipe `name`.

    Raises:
      ValueError: the domain has no such recipe, naming the ones it has.
    """
    recipe = find(domain, name)
    if recipe is None:
        raise ValueError(f"the {name} variant needs the {domain.name} domain's {RECIPES[name].title} recipe "
                         f"(Domain.recipes[{name!r}]), which it lacks; recipes here: "
                         f"{', '.join(n for n in RECIPES if n in domain.recipes) or 'none'}")
    return recipe
