"""Variant specs (`optimized:fuse_maps=false`, `keras:batch_size=16`, ...) parsed into Variants.

A spec is `NAME[:field=value,...]`. NAME picks the kind (VARIANT_KINDS below); the fields
are PipelineConfig fields and the fields of the data's domain config: the `features` a spec
starts from decides which (the config class of the data's domain; without one, the default
domain's). Parsing only reads dataclass fields; nothing here runs TensorFlow.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional, Sequence, Union

from tfpipe.bench.recipes import RECIPES
from tfpipe.bench.variants import (DatasetFnVariant, InputFnVariant, PipelineVariant, RecipeVariant,
                                   ShardsVariant, Variant)
from tfpipe.config import PRESETS, TOGGLES, PipelineConfig, field_type
from tfpipe.core.registry import default_domain

# Spec name -> the kind of variant it makes.
VARIANT_KINDS: dict[str, type] = {"optimized": PipelineVariant, "naive": PipelineVariant, "shards": ShardsVariant,
                                  **{name: RecipeVariant for name in RECIPES}}
BASES = tuple(VARIANT_KINDS)
DEFAULT_VARIANTS = ("naive", "optimized")
# Domain config fields that pick an implementation of the same features (not other features):
# --ablation flips each one the data's config has, like a toggle.
ABLATION_CONFIG_FIELDS = ("backend",)

_PIPELINE_FIELDS = {f.name: f for f in dataclasses.fields(PipelineConfig)}
_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


def spec_fields(config_class: Optional[type] = None) -> dict[str, dataclasses.Field]:
    """Fields a spec may set: PipelineConfig's, then those of the domain config class (default: the default
    domain's)."""
    config_class = config_class or default_domain().config_class
    return {**_PIPELINE_FIELDS, **{f.name: f for f in dataclasses.fields(config_class)}}


def parse_value(field: str, text: str, config_class: Optional[type] = None) -> Any:
    """Parses `text` as a value of the PipelineConfig or domain config field `field`.

    Args:
      field: the field's name.
      text: the value as typed.
      config_class: the domain config whose fields are allowed (default: the default domain's).

    Raises:
      ValueError: unknown field (naming the allowed ones) or a value of the wrong type.
    """
    fields = spec_fields(config_class)
    if field not in fields:
        raise ValueError(f"unknown field {field!r}; allowed fields: {', '.join(fields)}")
    spec = fields[field]
    kind = field_type(spec)
    text = text.strip()
    if spec.default is None and text.lower() in ("none", ""):
        return None
    if kind is bool:
        if text.lower() in _TRUE + _FALSE:
            return text.lower() in _TRUE
        raise ValueError(f"{field}={text!r}: expected true or false")
    if kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            expected = "an integer" if kind is int else "a number"
            raise ValueError(f"{field}={text!r}: expected {expected}") from None
    choices = spec.metadata.get("choices")
    if choices and text not in choices:
        raise ValueError(f"{field}={text!r}: allowed values are {', '.join(choices)}")
    return text


def _parse_items(items: Sequence[str], spec: str, config_class: type) -> dict[str, Any]:
    """`field=value` items (or absl-style bare `prefetch` / `noprefetch`) -> typed values."""
    fields = spec_fields(config_class)
    values = {}
    for item in items:
        key, eq, text = (part.strip() for part in item.partition("="))
        if not eq:
            bare = key[2:] if key.startswith("no") and key not in fields else key
            if bare in fields and isinstance(fields[bare].default, bool):
                values[bare] = bare == key
                continue
            raise ValueError(f"variant {spec!r}: {item!r} is not field=value (e.g. fuse_maps=false)")
        try:
            values[key] = parse_value(key, text, config_class)
        except ValueError as e:
            raise ValueError(f"variant {spec!r}: {e}") from None
    return values


def parse_variant(spec: str, features: Any = None, overrides: Optional[Mapping[str, Any]] = None, *,
                  dataset_fn: str = "") -> Variant:
    """Parses a variant spec: `NAME[:field=value,...]`.

    NAME is a preset (`optimized`, `naive`), `shards` (the shard folder, optimized preset;
    `shards:naive,...` for the naive one) or a reference recipe (`keras`, `tf-models`: take
    batch_size, seed and the domain config's fields). Fields are PipelineConfig fields and the
    fields of `features`' class, e.g. `optimized:fuse_maps=false`, `naive:backend=librosa`,
    `optimized:batch_size=32,n_mels=40` (AudioConfig), `optimized:dtype=uint8,height=96` (ImageConfig).

    Args:
      spec: the spec.
      features: the domain config the spec's feature fields start from; its class decides
        which feature fields exist. Default: the default domain's config.
      overrides: typed field values applied to every variant before its own.
      dataset_fn: "MODULE:FUNCTION" of a user's dataset_fn: the variant is its PipelineConfig
        handed to that function (presets and PipelineConfig fields only).

    Raises:
      ValueError: unknown name or field, or a bad value, naming the allowed ones.
    """
    features = default_domain().config() if features is None else features
    config_class = type(features)
    feature_names = [f.name for f in dataclasses.fields(config_class)]
    name = spec.strip()
    base, _, rest = (part.strip() for part in name.partition(":"))
    if base not in BASES:
        raise ValueError(f"variant {spec!r}: unknown name {base!r}; allowed: {', '.join(BASES)}, "
                         f"each optionally with :field=value,... "
                         f"(e.g. optimized:fuse_maps=false, naive:backend=librosa)")
    if dataset_fn and base not in PRESETS:
        raise ValueError(f"variant {spec!r}: with dataset_fn={dataset_fn!r} the variants are the presets "
                         f"{', '.join(PRESETS)} (each optionally with :field=value) handed to your function; "
                         f"{base} reads tfpipe's own data and does not apply")
    items = [i.strip() for i in rest.split(",") if i.strip()]
    preset = "naive" if base == "naive" else "optimized"
    if base == "shards" and items and items[0] in PRESETS:
        preset = items.pop(0)
    own = _parse_items(items, name, config_class)
    kind = DatasetFnVariant if dataset_fn else VARIANT_KINDS[base]
    values = {**(overrides or {}), **own}
    unknown = sorted(set(values) - set(spec_fields(config_class)))
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(unknown)}; allowed fields: "
                         f"{', '.join(spec_fields(config_class))}")
    kind.check_fields(name, own, values, config_class)
    try:
        pipeline = PipelineConfig.preset(preset, **{k: v for k, v in values.items() if k in _PIPELINE_FIELDS})
        feats = dataclasses.replace(features, **{k: v for k, v in values.items() if k in feature_names})
    except ValueError as e:
        raise ValueError(f"variant {spec!r}: {e}") from None
    extra = {"fn": dataset_fn} if dataset_fn else {"recipe": base} if kind is RecipeVariant else {}
    return kind(name, pipeline, feats, tuple(own), **extra)


def input_fn_variant(spec: str, batch_size: int) -> Variant:
    """A user's plain Estimator input_fn ("MODULE:FN" or "FILE.py:FN"), named by its spec."""
    spec = spec.strip()
    if ":" not in spec:
        raise ValueError(f"input_fn {spec!r}: expected MODULE:FUNCTION or FILE.py:FUNCTION")
    return InputFnVariant(spec, PipelineConfig.optimized(batch_size=batch_size), default_domain().config(), fn=spec)


def split_variants(text: str) -> list[str]:
    """Splits a comma-separated variant list, keeping each variant's overrides with it.

    'naive,optimized:fuse_maps=false,n_mels=40,keras' ->
    ['naive', 'optimized:fuse_maps=false,n_mels=40', 'keras'].

    A comma starts a new variant only before a name (the part before ':' is one of
    BASES); anything else continues the previous variant's overrides.
    """
    specs: list[str] = []
    for token in (t.strip() for t in text.split(",")):
        if token.partition(":")[0].strip() in BASES or not specs:
            specs.append(token)
        elif token:
            specs[-1] += ("," if ":" in specs[-1] else ":") + token
    return [s for s in specs if s]


def _config_flips(config: Any) -> list[str]:
    """`field=other` for each ABLATION_CONFIG_FIELDS field of `config` with two choices."""
    flips = []
    for f in dataclasses.fields(config):
        choices = f.metadata.get("choices", ())
        if f.name in ABLATION_CONFIG_FIELDS and len(choices) == 2:
            flips.append(f"{f.name}={next(c for c in choices if c != getattr(config, f.name))}")
    return flips


def ablation_variants(features: Any = None,
                      overrides: Optional[Mapping[str, Any]] = None, *, dataset_fn: str = "") -> list[Variant]:
    """optimized and naive, then each TOGGLE flipped alone in each, then the other feature backend.

    From optimized, flipping a toggle gives its naive value (prefetch_to_device, off in
    both presets, is switched on); from naive, it switches the optimization on. The
    domain config's implementation switches (ABLATION_CONFIG_FIELDS, e.g. AudioConfig's
    backend) are flipped too, where it has them. With a dataset_fn the toggles are
    flipped in the PipelineConfig handed to it (no config fields).
    """
    out = []
    for preset in PRESETS:
        base = parse_variant(preset, features, overrides, dataset_fn=dataset_fn)
        out.append(base)
        flips = [f"{t}={str(not getattr(base.pipeline, t)).lower()}" for t in TOGGLES]
        if not dataset_fn:
            flips += _config_flips(base.features)
        out += [dataclasses.replace(parse_variant(f"{preset}:{flip}", features, overrides, dataset_fn=dataset_fn),
                                    reference=preset)
                for flip in flips]
    return out


def resolve_variants(variants: Sequence[Union[str, Variant]], features: Any = None,
                     overrides: Optional[Mapping[str, Any]] = None, ablation: bool = False,
                     baseline: Optional[str] = None, *, dataset_fn: str = "",
                     input_fns: Sequence[str] = ()) -> list[Variant]:
    """The variants to run, each with its reference set: specs parsed, ablation added, duplicates dropped.

    input_fns come after the other variants, each named by its spec.
    """
    chosen = [v if isinstance(v, Variant) else parse_variant(v, features, overrides, dataset_fn=dataset_fn)
              for v in variants]
    chosen += ablation_variants(features, overrides, dataset_fn=dataset_fn) if ablation else []
    if input_fns:
        batch_size = (overrides or {}).get("batch_size", PipelineConfig().batch_size)
        chosen += [input_fn_variant(spec, batch_size) for spec in input_fns]
    first: dict[str, Variant] = {}
    for v in chosen:
        first.setdefault(v.name, v)  # a user's own spec wins over the same one from the ablation
    unique = list(first.values())
    if not unique:
        raise ValueError("no variants to run; name some, e.g. --variants naive,optimized")
    names = [v.name for v in unique]
    baseline = baseline or names[0]
    if baseline not in names:
        raise ValueError(f"baseline {baseline!r} is not one of the variants: {', '.join(names)}")
    return [dataclasses.replace(v, reference=baseline if v.name == baseline else v.reference or baseline)
            for v in unique]


def with_cores(variants: Sequence[Variant], cores: Optional[Sequence[int]]) -> list[Variant]:
    """Each variant once per core count (variant-major: A@1, A@2, B@1, B@2); unchanged if no counts."""
    if not cores:
        return list(variants)
    return [dataclasses.replace(v, cores=c) for v in variants for c in cores]
