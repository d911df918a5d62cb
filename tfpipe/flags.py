"""absl flags for every PipelineConfig and FeatureConfig field; flags -> configs.

`--pipeline` picks the preset; each field flag left unset keeps the preset's value,
so `--pipeline=naive --prefetch` is the naive chain plus prefetch. Flags are made
from the dataclass fields, so a new config field is a new flag with no edit here.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional, Sequence

from absl import flags

from tfpipe.config import PRESETS, FeatureConfig, PipelineConfig, field_type

_CONFIGS = (PipelineConfig, FeatureConfig)


def define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """Defines --pipeline and one flag per config field (idempotent per FlagValues)."""
    if "pipeline" in flag_values:
        return
    flags.DEFINE_enum("pipeline", "optimized", PRESETS,
                      "Preset the field flags start from: the optimized chain or the seed's naive one.",
                      flag_values=flag_values)
    for config in _CONFIGS:
        define_config_flags(config, flag_values)
    flags.register_multi_flags_validator(
        [f.name for c in _CONFIGS for f in dataclasses.fields(c)] + ["pipeline"],
        _configs_valid, message="invalid tfpipe config", flag_values=flag_values)


def define_config_flags(config: type, flag_values: flags.FlagValues = flags.FLAGS,
                        exclude: Sequence[str] = ()) -> None:
    """Defines one flag per field of `config` (default None: unset), except those in `exclude`.

    For binaries that take a config's fields but give some names another meaning
    (e.g. `tfpipe prepare --output` is a folder, not FeatureConfig.output).
    """
    for field in dataclasses.fields(config):
        if field.name not in exclude:
            _define(field, config.__name__, flag_values)


def _define(field: dataclasses.Field, owner: str, flag_values: flags.FlagValues) -> None:
    """One absl flag for one config field, typed and bounded by its metadata."""
    meta = field.metadata
    kind = field_type(field)
    help_text = f"{meta['help']} ({owner}.{field.name}; unset: the preset's value)"
    kwargs = dict(default=None, help=help_text, flag_values=flag_values)
    if kind is bool:
        flags.DEFINE_boolean(field.name, **kwargs)
    elif "choices" in meta:
        flags.DEFINE_enum(field.name, enum_values=list(meta["choices"]), **kwargs)
    elif kind is int:
        flags.DEFINE_integer(field.name, lower_bound=meta.get("min"), upper_bound=meta.get("max"), **kwargs)
    elif kind is float:
        flags.DEFINE_float(field.name, lower_bound=meta.get("min"), upper_bound=meta.get("max"), **kwargs)
    else:
        flags.DEFINE_string(field.name, **kwargs)


def set_fields(config: type, flag_values: flags.FlagValues = flags.FLAGS,
               exclude: Sequence[str] = ()) -> dict[str, Any]:
    """{field: value} for the fields of `config` whose flags were set (an unset flag is None)."""
    return _set_fields(config, _values(flag_values), exclude)


def _set_fields(config: type, values: dict, exclude: Sequence[str] = ()) -> dict:
    """The entries of `values` that are set fields of `config`."""
    return {f.name: values[f.name] for f in dataclasses.fields(config)
            if f.name not in exclude and values.get(f.name) is not None}


def _configs_valid(values: dict) -> bool:
    """Parse-time check: the flags must make valid configs (raises with the config's message)."""
    try:
        PipelineConfig.preset(values["pipeline"], **_set_fields(PipelineConfig, values))
        FeatureConfig(**_set_fields(FeatureConfig, values))
    except ValueError as e:
        raise flags.ValidationError(str(e)) from e
    return True


def _values(flag_values: flags.FlagValues) -> dict[str, Any]:
    """Every flag's value by name."""
    return {name: flag_values[name].value for name in flag_values}


def pipeline_config(flag_values: flags.FlagValues = flags.FLAGS) -> PipelineConfig:
    """The PipelineConfig the parsed flags describe."""
    return PipelineConfig.preset(flag_values["pipeline"].value, **set_fields(PipelineConfig, flag_values))


def feature_config(flag_values: flags.FlagValues = flags.FLAGS, *, base: Optional[Mapping[str, Any]] = None,
                   exclude: Sequence[str] = ()) -> FeatureConfig:
    """The FeatureConfig the parsed flags describe.

    Args:
      flag_values: the parsed flags.
      base: field values to start from (e.g. a shard index's features); flags that were set win.
      exclude: fields whose flags mean something else to the caller (left at base/default).
    """
    return FeatureConfig(**{**(base or {}), **set_fields(FeatureConfig, flag_values, exclude)})
