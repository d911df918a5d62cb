"""absl flags for every PipelineConfig and AudioConfig field; flags -> configs.

`--pipeline` picks the preset; each field flag left unset keeps the preset's value,
so `--pipeline=naive --prefetch` is the naive chain plus prefetch. Flags are made
from the dataclass fields, so a new config field is a new flag with no edit here.
A flag is named after its field, except where FLAG_NAMES gives it a clearer name.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional, Sequence

from absl import flags

from tfpipe.config import PRESETS, PipelineConfig, field_type
from tfpipe.domains.audio.config import AudioConfig

_CONFIGS = (PipelineConfig, AudioConfig)

# "Config.field" -> flag name, where the field's own name would mislead or clash:
# AudioConfig.output picks the features (log_mel | waveform), while --output is the
# folder `tfpipe synth` and `tfpipe prepare` write to.
FLAG_NAMES = {"AudioConfig.output": "features"}
# flag name -> its old name, kept as an alias wherever the binary does not use that name itself.
ALIASES = {"features": "output"}


def flag_name(config: type, field: str) -> str:
    """The flag that sets `config.field` (the field's name unless FLAG_NAMES renames it)."""
    return FLAG_NAMES.get(f"{config.__name__}.{field}", field)


def define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """Defines --pipeline and one flag per config field (idempotent per FlagValues)."""
    if "pipeline" in flag_values:
        return
    flags.DEFINE_enum("pipeline", "optimized", PRESETS,
                      "Preset the field flags start from: the optimized chain or the seed's naive one. "
                      "A field flag left unset keeps the preset's value (--pipeline=naive --prefetch: "
                      "the naive chain plus prefetch).", flag_values=flag_values)
    for config in _CONFIGS:
        define_config_flags(config, flag_values)
    flags.register_multi_flags_validator(
        [flag_name(c, f.name) for c in _CONFIGS for f in dataclasses.fields(c)] + ["pipeline"],
        _configs_valid, message="invalid tfpipe config", flag_values=flag_values)


def define_config_flags(config: type, flag_values: flags.FlagValues = flags.FLAGS,
                        exclude: Sequence[str] = ()) -> None:
    """Defines one flag per field of `config` (default None: unset), except the fields in `exclude`.

    `exclude` is for binaries that take a config's fields but make another flag play
    one of them (e.g. `tfpipe prepare --store` picks AudioConfig.output there). A
    renamed flag's old name (--output for --features) is added as an alias when the
    binary has not defined that name already, so define the binary's own flags first.
    """
    presets = _presets(config)
    for field in dataclasses.fields(config):
        if field.name in exclude:
            continue
        name = flag_name(config, field.name)
        _define(field, name, config.__name__, presets, flag_values)
        alias = ALIASES.get(name)
        if alias and alias not in flag_values:
            flags.DEFINE_alias(alias, name, flag_values=flag_values)


def _presets(config: type) -> dict[str, Any]:
    """{preset name: instance} for PipelineConfig's presets, {"": the defaults} for other configs."""
    if hasattr(config, "preset"):
        return {name: config.preset(name) for name in PRESETS}
    return {"": config()}


def _show(value: Any) -> str:
    """A default as a user would type it: true/false, 64, 'log_mel'."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return ",".join(map(str, value)) or "none"
    return repr(value) if isinstance(value, str) else str(value)


def _default_text(field: dataclasses.Field, presets: Mapping[str, Any]) -> str:
    """'default: true; naive preset: false': the value an unset flag keeps (its help says what None means)."""
    values = {name: getattr(config, field.name) for name, config in presets.items()}
    first = next(iter(values.values()))
    if all(v is None for v in values.values()):
        return ""
    parts = [f"default: {_show(first)}"]
    parts += [f"{name} preset: {_show(v)}" for name, v in list(values.items())[1:] if v != first]
    return "; ".join(parts) + "; "


def _define(field: dataclasses.Field, name: str, owner: str, presets: Mapping[str, Any],
            flag_values: flags.FlagValues) -> None:
    """One absl flag for one config field, typed and bounded by its metadata."""
    meta = field.metadata
    kind = field_type(field)
    # The absl default stays None, so a flag the user left unset is told apart from one set
    # to the preset's own value; the help shows the value it then keeps.
    help_text = f"{meta['help']} ({_default_text(field, presets)}{owner}.{field.name})"
    kwargs = dict(default=None, help=help_text, flag_values=flag_values)
    if kind is bool:
        flags.DEFINE_boolean(name, **kwargs)
    elif "choices" in meta:
        flags.DEFINE_enum(name, enum_values=list(meta["choices"]), **kwargs)
    elif kind is int:
        flags.DEFINE_integer(name, lower_bound=meta.get("min"), upper_bound=meta.get("max"), **kwargs)
    elif kind is float:
        flags.DEFINE_float(name, lower_bound=meta.get("min"), upper_bound=meta.get("max"), **kwargs)
    elif kind is tuple:
        flags.DEFINE_list(name, **kwargs)
    else:
        flags.DEFINE_string(name, **kwargs)


def set_fields(config: type, flag_values: flags.FlagValues = flags.FLAGS,
               exclude: Sequence[str] = ()) -> dict[str, Any]:
    """{field: value} for the fields of `config` whose flags were set (an unset flag is None).

    Keys are field names (AudioConfig's "output", set by --features); `exclude` names fields.
    """
    return _set_fields(config, _values(flag_values), exclude)


def _set_fields(config: type, values: dict, exclude: Sequence[str] = ()) -> dict:
    """The entries of `values` that are set fields of `config`."""
    return {f.name: values[flag_name(config, f.name)] for f in dataclasses.fields(config)
            if f.name not in exclude and values.get(flag_name(config, f.name)) is not None}


def _configs_valid(values: dict) -> bool:
    """Parse-time check: the flags must make valid configs (raises with the config's message)."""
    try:
        PipelineConfig.preset(values["pipeline"], **_set_fields(PipelineConfig, values))
        AudioConfig(**_set_fields(AudioConfig, values))
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
                   exclude: Sequence[str] = ()) -> AudioConfig:
    """The AudioConfig the parsed flags describe.

    Args:
      flag_values: the parsed flags.
      base: field values to start from (e.g. a shard index's features); flags that were set win.
      exclude: fields whose flags mean something else to the caller (left at base/default).
    """
    return AudioConfig(**{**(base or {}), **set_fields(AudioConfig, flag_values, exclude)})
