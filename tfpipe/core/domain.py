"""Domain: what a kind of data (audio, images, ...) plugs into the domain-free core.

A domain is found from file extensions (a folder of .wav files is audio, .jpg/.png
images). It turns a list of files into the cheap per-file table the chain shuffles,
gives the chain its stages (read, decode, features), featurizes offline for shard
writers, and builds the serving signature of an exported model. It also carries what the
tools above ask of it: its config class (whose fields are its flags), the stores shards
may hold, a synthetic corpus (`Corpus`), reference recipes for `tfpipe bench`, and what a
training run and a served model take from it. The core and the tools call only these; a new
domain is one folder under tfpipe/domains/ (or a package on the `tfpipe.plugins` entry
point, see docs/examples/plugin_domain/) that registers an instance with
`tfpipe.core.registry.register_domain`. `Domain` and `Offline` are ABCs: a domain that
forgets a method it must have fails when it is instantiated (at import), not when a user
first reaches that method.

A domain's module imports without TensorFlow (TensorFlow loads in the methods that build
ops): the command line lists the domains, their flags and corpora before any work.
"""

from __future__ import annotations

import abc
import dataclasses
import importlib
import types
from typing import Any, Callable, Mapping, Optional, Sequence

from tfpipe.core.stage import Stage


@dataclasses.dataclass(frozen=True)
class Schema:
    """What one stored example holds: key -> (numpy dtype name, shape). Shapes are fixed."""

    fields: Mapping[str, tuple[str, tuple[int, ...]]]


def load_function(where: str) -> Callable[..., Any]:
    """The function a "module:function" string names (imported now)."""
    module, _, function = where.partition(":")
    return getattr(importlib.import_module(module), function)


@dataclasses.dataclass(frozen=True)
class Corpus:
    """A domain's synthetic corpus: learnable classes of generated files, one subfolder per class.

    Attributes:
      writer: "module:function" of `write(out_dir, *, per_class, seed, progress, **settings) -> out_dir`,
        in a module that imports no TensorFlow (`tfpipe synth` starts in well under a second). The
        same arguments write the same files; a folder that already holds them is left as it is.
      settings: the frozen config dataclass of the writer's own arguments; each field is a
        `tfpipe synth` flag (from its metadata, as for every config). A field named like one of
        the domain config's follows that config where a tool writes a corpus for a pipeline
        (`tfpipe bench` and the demo without data: e.g. the clips' sample rate).
      about: what it holds, in a few words, for `tfpipe synth --help` ("8 learnable classes of wav clips").
    """

    writer: str
    settings: type
    about: str = ""

    def write(self, out_dir: str, *, per_class: int, seed: int = 0, progress: bool = True,
              settings: Any = None) -> str:
        """Writes the corpus (`settings`: an instance of `self.settings`, default its defaults); returns out_dir."""
        values = dataclasses.asdict(settings if settings is not None else self.settings())
        return load_function(self.writer)(out_dir, per_class=per_class, seed=seed, progress=progress, **values)

    def settings_for(self, config: Any) -> Any:
        """The settings whose files `config` reads as they are: fields of one name take the config's value."""
        values = {f.name: getattr(config, f.name) for f in dataclasses.fields(self.settings)
                  if hasattr(config, f.name)}
        return self.settings(**values)


class Offline(abc.ABC):
    """A domain's offline featurizer, used by shard writers in worker processes.

    `load` decodes one file (any format the domain's libraries read) or raises
    DataError naming it; `featurize` turns a list of loaded values into a dict of
    numpy arrays with a leading batch axis, matching `schema`.
    """

    schema: Schema

    @abc.abstractmethod
    def load(self, path: str) -> Any:
        """One file decoded (DataError naming it when it cannot be)."""

    @abc.abstractmethod
    def featurize(self, loaded: Sequence[Any]) -> dict:
        """`load` results -> {key: numpy array with a leading batch axis}, as `schema` declares."""

    def warm_up(self) -> None:
        """Runs once per worker process before timing starts (e.g. traces TF functions)."""

    def notes(self) -> dict:
        """Counts of silent conversions made so far (e.g. {"cropped": 3, "resampled": 2})."""
        return {}


class Domain(abc.ABC):
    """Base class of the built-in domains; see the module docstring.

    Attributes:
      name: "audio", "image", ...; recorded in shard indexes.
      extensions: lower-case file suffixes that identify the domain's files.
      config_class: the frozen config dataclass of its features (AudioConfig, ImageConfig); its
        fields are the domain's flags (`tfpipe.flags`, from each field's metadata).
      kind: short name of its file sources (shown by Source.kind, e.g. "wav").
      default: the domain a command uses when no data says which (`tfpipe bench` without --data,
        the demo's default --domain); one built-in domain declares it.
      corpus: its synthetic corpus (`tfpipe synth --domain NAME`), or None.
      recipes: reference recipes `tfpipe bench` times beside tfpipe's chains: variant name ->
        "module:function" of `recipe(data_dir, config, batch_size, seed, *, mode="train",
        epochs=None) -> tf.data.Dataset` (see tfpipe.bench.recipes).
      training_store: what shards written for training store by default ("": the first of `stores()`).
      shards_for_training: a training run shards the files first unless told otherwise (the
        offline path reads files the online chain refuses, e.g. any wav, resampled).
      serving_sends: what a client sends the serving signature, in words ("raw waveforms").
    """

    name: str = ""
    extensions: tuple[str, ...] = ()
    config_class: type = type(None)
    kind: str = ""
    default: bool = False
    corpus: Optional[Corpus] = None
    recipes: Mapping[str, str] = types.MappingProxyType({})
    training_store: str = ""
    shards_for_training: bool = False
    serving_sends: str = "files"

    def config(self, features: Optional[Any] = None) -> Any:
        """`features` checked to be this domain's config, or the default one."""
        if features is None:
            return self.config_class()
        if not isinstance(features, self.config_class):
            raise ValueError(f"features={type(features).__name__}(...) but the data is {self.name} "
                             f"({', '.join(self.extensions)} files): pass a {self.config_class.__name__}")
        return features

    def file_table(self, paths: Sequence[str], config: Any) -> Any:
        """Per-file values the stages start from (a nested structure of equal-length lists).

        Checks every file up front; raises DataError listing every unusable one.
        """
        return list(paths)

    def reading(self, paths: Sequence[str], config: Any, mode: str) -> tuple[Any, list[Stage]]:
        """(file_table, stages) for these files: a domain may specialize its stages to what its
        up-front check found (e.g. no per-file branch when no file needs it)."""
        return self.file_table(paths, config), self.stages(config, mode)

    @abc.abstractmethod
    def stages(self, config: Any, mode: str) -> list[Stage]:
        """The map stages from one (file_table element, label) to (features dict, label).

        The first stage reads a file (deterministic: a cache may keep its output); stages
        that draw random numbers (train crops, flips) are marked `random=True`.
        """

    @abc.abstractmethod
    def offline(self, config: Any, store: str) -> Offline:
        """The featurizer shard writers run; `store` picks what is stored (e.g. log_mel, waveform)."""

    @abc.abstractmethod
    def stores(self) -> tuple[str, ...]:
        """Values `offline(store=...)` accepts; the first is the default."""

    def stored_stages(self, stored: Mapping[str, Any], config: Any, mode: str = "eval") -> list[Stage]:
        """Stages after a shard's records are parsed, turning stored values into `config`'s features.

        Args:
          stored: the shard index's domain entry (its config dict and store).
          config: the features the pipeline asks for.
          mode: "train" | "eval" | "predict": images crop at random in train, centrally otherwise.

        Raises:
          DataError: the shards cannot give these features (other settings), naming each field.
        """
        return []

    def record_stages(self, config: Any, mode: str, key: str) -> list[Stage]:
        """Stages over (features dict, label) that replace `features[key]`, an encoded value parsed from
        a record (e.g. an image file's bytes), by this domain's features, per example, as its own
        chain makes them from files (tfpipe.records(..., encoded_key=key, features=config)).

        Raises:
          ValueError: the domain does not decode values inside records.
        """
        raise ValueError(f"the {self.name} domain does not decode values inside records (Domain.record_stages); "
                         f"parse them with your own process=")

    @abc.abstractmethod
    def serving_receiver(self, config: Any) -> tuple[dict, dict]:
        """(receiver tensors, features) for a SavedModel's serving signature (graph mode)."""

    def config_from_dict(self, values: Mapping[str, Any]) -> Any:
        """The config a shard index recorded."""
        known = {f.name for f in dataclasses.fields(self.config_class)}
        return self.config_class(**{k: v for k, v in values.items() if k in known})

    def recipe(self, name: str) -> Optional[Callable[..., Any]]:
        """The reference recipe `name` (imported now), or None when the domain has none of that name."""
        return load_function(self.recipes[name]) if name in self.recipes else None

    def serving_inputs(self, paths: Sequence[str], config: Any) -> dict:
        """What a client sends `serving_receiver`'s signature for these files: {key: numpy array}
        (the demo predicts held-out files through its reloaded SavedModel with it)."""
        raise NotImplementedError(f"the {self.name} domain does not say what a client sends its serving "
                                  f"signature (Domain.serving_inputs)")

    def model_input(self, features: Mapping[str, Any], config: Any) -> Any:
        """The features as one float32 [batch, height, width, channels] tensor, normalized per
        example, for a small convolutional model (the demo's): its one feature, cast, a channel
        axis added when it has none, standardized. A domain whose features need more (images
        normalized by ImageNet's statistics, log-mel computed from waveforms) says so here.
        """
        import tensorflow as tf  # the domain module imports without TensorFlow (see the module doc)

        if len(features) != 1:
            raise ValueError(f"the {self.name} domain's features {sorted(features)}: model_input takes one "
                             f"feature; override Domain.model_input to combine them")
        (x,) = features.values()
        x = tf.cast(x, tf.float32)
        x = x[..., tf.newaxis] if x.shape.rank == 3 else x
        mean, variance = tf.nn.moments(x, axes=list(range(1, x.shape.rank)), keepdims=True)
        return (x - mean) * tf.math.rsqrt(variance + 1e-3)


def check_stored_fields(stored_config: Mapping[str, Any], config: Any, fields: Sequence[str], where: str) -> None:
    """DataError naming each of `fields` where the stored config differs from the requested one.

    Raises:
      DataError: with both values of every differing field, and the flags that match the shards.
    """
    from tfpipe.errors import DataError

    differ = [(k, stored_config.get(k), getattr(config, k)) for k in fields
              if stored_config.get(k) != getattr(config, k)]
    if differ:
        listed = ", ".join(f"{k}={h!r} (pipeline asks for {w!r})" for k, h, w in differ)
        flags = " ".join(f"--{k} {h}" for k, h, _ in differ)
        raise DataError(f"{where}: the shards were written with {listed}; rerun tfpipe prepare with the "
                        f"pipeline's values, or pass the shards' values to the pipeline ({flags})")
