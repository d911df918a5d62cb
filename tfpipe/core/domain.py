"""Domain: what a kind of data (audio, images, ...) plugs into the domain-free core.

A domain is found from file extensions (a folder of .wav files is audio, .jpg/.png
images). It turns a list of files into the cheap per-file table the chain shuffles,
gives the chain its stages (read, decode, features), featurizes offline for shard
writers, and builds the serving signature of an exported model. The core calls only
these methods; a new domain is one new folder under tfpipe/domains/ that registers
an instance with `tfpipe.core.registry.register_domain`. `Domain` and `Offline` are ABCs:
a domain that forgets a method it must have fails when it is instantiated (at import),
not when a user first reaches that method.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any, Mapping, Optional, Sequence

from tfpipe.core.stage import Stage


@dataclasses.dataclass(frozen=True)
class Schema:
    """What one stored example holds: key -> (numpy dtype name, shape). Shapes are fixed."""

    fields: Mapping[str, tuple[str, tuple[int, ...]]]


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
      config_class: the frozen config dataclass of its features (AudioConfig, ImageConfig).
      kind: short name of its file sources (shown by Source.kind, e.g. "wav").
    """

    name: str = ""
    extensions: tuple[str, ...] = ()
    config_class: type = type(None)
    kind: str = ""

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

    @abc.abstractmethod
    def serving_receiver(self, config: Any) -> tuple[dict, dict]:
        """(receiver tensors, features) for a SavedModel's serving signature (graph mode)."""

    def config_from_dict(self, values: Mapping[str, Any]) -> Any:
        """The config a shard index recorded."""
        known = {f.name for f in dataclasses.fields(self.config_class)}
        return self.config_class(**{k: v for k, v in values.items() if k in known})


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
