"""absl flags for every PipelineConfig field and every registered domain's config fields; flags -> configs.

`--pipeline` picks the preset; each field flag left unset keeps the preset's value,
so `--pipeline=naive --prefetch` is the naive chain plus prefetch. Flags are made
from the dataclass fields, so a new config field is a new flag with no edit here, and
a new domain's config (a plug-in registered with tfpipe.core.registry) brings its flags
with it: this module names no domain. A flag is named after its field, unless the
field's metadata names it (`flag="features"`, keeping its old name as an alias: `old_flag=`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional, Sequence

from absl import flags

from tfpipe.config import PRESETS, PipelineConfig, field_type


def domain_configs() -> tuple[type, ...]:
    """Every registered domain's config class, the default domain's first."""
    # The domains register with the core (their modules import without TensorFlow): asked, not named.
    from tfpipe.core import registry

    default = registry.default_domain().config_class
    return tuple(dict.fromkeys([default] + [d.config_class for d in registry.domains().values()]))


def _configs() -> tuple[type, ...]:
    return (PipelineConfig, *domain_configs())


def aliases(configs: Optional[Sequence[type]] = None) -> dict[str, str]:
    """flag name -> its old name, for the fields of `configs` (default: PipelineConfig and every domain's)."""
    return {flag_name(c, f.name): f.metadata["old_flag"] for c in (configs or _configs())
            for f in dataclasses.fields(c) if "old_flag" in f.metadata}


def flag_name(config: type, field: str) -> str:
    """The flag that sets `config.field` (the field's name unless its metadata names another: `flag=`)."""
    return next((f.metadata.get("flag", field) for f in dataclasses.fields(config) if f.name == field), field)


def define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """Defines --pipeline and one flag per config field (idempotent per FlagValues)."""
    if "pipeline" in flag_values:
        return
    flags.DEFINE_enum("pipeline", "optimized", PRESETS,
                      "Preset the field flags start from: the optimized chain or the seed's naive one. "
                      "A field flag left unset keeps the preset's value (--pipeline=naive --prefetch: "
                      "the naive chain plus prefetch).", flag_values=flag_values)
    configs = _configs()
    for config in configs:
        define_config_flags(config, flag_values)
    names = dict.fromkeys(flag_name(c, f.name) for c in configs for f in dataclasses.fields(c))
    flags.register_multi_flags_validator(list(names) + ["pipeline"], lambda values: _configs_valid(values, configs),
                                         message="invalid tfpipe config", flag_values=flag_values)


def define_config_flags(config: type, flag_values: flags.FlagValues = flags.FLAGS,
                        exclude: Sequence[str] = ()) -> None:
    """Defines one flag per field of `config` (default None: unset), except the fields in `exclude`.

    `exclude` is for binaries that take a config's fields but make another flag play
    one of them (e.g. `tfpipe prepare --store` picks what shards hold, not --features). A
    renamed flag's old name (--output for --features) is added as an alias when the
    binary has not defined that name already, so define the binary's own flags first.
    A field whose flag another config defined here already (two domains' `sample_rate`)
    shares that flag; a binary's own flag of that name is a clash (absl's DuplicateFlagError).
    """
    presets = _presets(config)
    for field in dataclasses.fields(config):
        name = flag_name(config, field.name)
        if field.name in exclude or (name in flag_values and flag_values.find_module_defining_flag(name) == __name__):
            continue
        _define(field, name, config.__name__, presets, flag_values)
        alias = field.metadata.get("old_flag")
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

    Keys are field names (a field named by its metadata's `flag=` is still its field name); `exclude`
    names fields.
    """
    return _set_fields(config, _values(flag_values), exclude)


def _set_fields(config: type, values: dict, exclude: Sequence[str] = ()) -> dict:
    """The entries of `values` that are set fields of `config`."""
    return {f.name: values[flag_name(config, f.name)] for f in dataclasses.fields(config)
            if f.name not in exclude and values.get(flag_name(config, f.name)) is not None}


def _configs_valid(values: dict, configs: Sequence[type]) -> bool:
    """Parse-time check: the flags must make valid configs (raises with the config's message)."""
    try:
        PipelineConfig.preset(values["pipeline"], **_set_fields(PipelineConfig, values))
        for config in configs:
            if config is not PipelineConfig:
                config(**_set_fields(config, values))
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
                   exclude: Sequence[str] = (), config_class: Optional[type] = None) -> Any:
    """The domain config the parsed flags describe.

    Args:
      flag_values: the parsed flags.
      base: field values to start from (e.g. a shard index's features); flags that were set win.
      exclude: fields whose flags mean something else to the caller (left at base/default).
      config_class: the domain's config class (default: the default domain's, see
        tfpipe.core.registry.default_domain).
    """
    config_class = config_class or domain_configs()[0]
    known = {f.name for f in dataclasses.fields(config_class)}
    base = {k: v for k, v in (base or {}).items() if k in known}
    return config_class(**{**base, **set_fields(config_class, flag_values, exclude)})
