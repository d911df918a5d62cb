"""What `tfpipe bench` times: one small class per kind of variant.

Each kind knows what it reads (and refuses a run that lacks it), how it builds its train
dataset in its worker process, its configuration for the JSON and why a changed field
cannot matter for it. The kinds: tfpipe's chain over --data (`PipelineVariant`), over the
--shards folder (`ShardsVariant`), a domain's reference recipe (`RecipeVariant`: keras,
tf-models), a user's dataset_fn handed the variant's PipelineConfig (`DatasetFnVariant`)
and a user's plain Estimator input_fn (`InputFnVariant`), both `UserVariant`s. Specs are parsed in `specs`.

Nothing here imports TensorFlow at module level: the parent parses and checks, the workers build.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
from typing import Any, ClassVar, Collection, Optional

from tfpipe.bench import recipes
from tfpipe.config import PipelineConfig


@dataclasses.dataclass(frozen=True)
class Inputs:
    """What a run reads, found once in the parent.

    Attributes:
      data: the --data path (absolute), or None.
      source: `tfpipe.find(data)`: a FileSource (a class folder, CSV) or ShardSource, or None.
      shards: the --shards folder (absolute), or None.
      shard_source: its ShardSource, or None.
      domain: the data's registered Domain (or the shard folder's), or None.
    """

    data: Optional[str] = None
    source: Any = None
    shards: Optional[str] = None
    shard_source: Any = None
    domain: Any = None

    @property
    def data_kind(self) -> str:
        """What --data is: "wav", "image", "shards", ... ("" without data)."""
        return self.source.kind if self.source is not None else ""


def _blocked(source: Any) -> bool:
    """A shard folder of v2 blocks (what shuffle_blocks works on)."""
    from tfpipe.storage.formats import get_format
    from tfpipe.storage.source import ShardSource

    return isinstance(source, ShardSource) and get_format(source.index["format"]).blocked


@dataclasses.dataclass(frozen=True)
class Variant:
    """One input pipeline to time.

    Attributes:
      name: the spec it was parsed from, e.g. "optimized:fuse_maps=false" (an input_fn: its spec).
      pipeline: its PipelineConfig (a recipe uses only batch_size and seed, an input_fn only batch_size).
      features: its domain config, e.g. AudioConfig or ImageConfig (unused by a user's functions).
      changed: the fields its spec set.
      reference: the variant its ratio compares to ("": the run's baseline).
      cores: CPU cores its process is pinned to (None: not pinned, all usable cores).
    """

    name: str
    pipeline: PipelineConfig
    features: Any
    changed: tuple[str, ...] = ()
    reference: str = ""
    cores: Optional[int] = None

    KIND: ClassVar[str] = ""
    reads_data: ClassVar[bool] = False  # runs the data's domain stages over --data (the stage report applies)
    own_epoch: ClassVar[bool] = False  # its chain tells its epoch (a user's); tfpipe's are known from the data
    # Skipped, with its reason in the report, where it cannot read the data (a reference recipe that
    # refuses PNGs or a CSV); tfpipe's own chains and a user's functions fail the run instead.
    skippable: ClassVar[bool] = False

    @classmethod
    def check_fields(cls, spec: str, own: Collection[str], values: Collection[str], config_class: type) -> None:
        """ValueError when a spec sets fields this kind does not take (`own`: its own, `values`: with the common ones)."""

    @property
    def kind(self) -> str:
        """The kind, for the JSON and table: "pipeline", "shards", "keras", "dataset_fn", ..."""
        return self.KIND

    @property
    def key(self) -> str:
        """Unique within a run: the name, plus "@cores" when pinned (e.g. "optimized@2")."""
        return self.name if self.cores is None else f"{self.name}@{self.cores}"

    def config(self) -> dict[str, Any]:
        """The full configuration, as plain dicts for JSON."""
        return {"pipeline": dataclasses.asdict(self.pipeline), "features": dataclasses.asdict(self.features)}

    def reads(self, inputs: Inputs) -> Optional[tuple[str, int]]:
        """(what it reads, examples in one epoch of it); None where its own chain decides.

        Raises:
          ValueError: the run lacks its input, saying what to pass.
        """
        raise NotImplementedError

    def dataset(self, data: Optional[str], shards: Optional[str]) -> Any:
        """Its train dataset (in its worker process)."""
        raise NotImplementedError

    def notes(self, inputs: Inputs, gpu: bool) -> list[str]:
        """Why a field its spec changed cannot matter here, so a flat bar is not read as a finding."""
        return ["no-op: no GPU visible"] if "prefetch_to_device" in self.changed and not gpu else []

    def plan(self, inputs: Inputs) -> str:
        """The chain it times, one line per step (`tfpipe bench --plan`)."""
        raise NotImplementedError


def _data(inputs: Inputs, variant: Variant) -> tuple[str, int]:
    if inputs.source is None:
        raise ValueError(f"variant {variant.name!r} reads data: pass data= (--data: a class folder, CSV or shard "
                         f"folder), or time your own pipeline with dataset_fn= / input_fns=")
    return inputs.data, inputs.source.num_examples


@dataclasses.dataclass(frozen=True)
class PipelineVariant(Variant):
    """tfpipe's chain (`build_dataset`) over --data, with the variant's PipelineConfig and features."""

    KIND: ClassVar[str] = "pipeline"
    reads_data: ClassVar[bool] = True

    def reads(self, inputs: Inputs) -> tuple[str, int]:
        return _data(inputs, self)

    def dataset(self, data: Optional[str], shards: Optional[str]) -> Any:
        from tfpipe.core.chain import build_dataset

        return build_dataset(data, "train", self.pipeline, self.features)

    def plan(self, inputs: Inputs) -> str:
        from tfpipe.core.describe import describe

        return describe(inputs.data, "train", self.pipeline, self.features)

    def notes(self, inputs: Inputs, gpu: bool) -> list[str]:
        return super().notes(inputs, gpu) + _toggle_notes(self, inputs.source, inputs.data_kind)


@dataclasses.dataclass(frozen=True)
class ShardsVariant(Variant):
    """tfpipe's chain over the --shards folder (`shards`, or `shards:naive` for the naive preset)."""

    KIND: ClassVar[str] = "shards"

    def reads(self, inputs: Inputs) -> tuple[str, int]:
        if inputs.shards is None:
            raise ValueError("the shards variants read a shard folder: pass --shards DIR "
                             "(write one with `tfpipe prepare`)")
        return inputs.shards, inputs.shard_source.num_examples

    def dataset(self, data: Optional[str], shards: Optional[str]) -> Any:
        from tfpipe.core.chain import build_dataset

        return build_dataset(shards, "train", self.pipeline, self.features)

    def plan(self, inputs: Inputs) -> str:
        from tfpipe.core.describe import describe

        return describe(inputs.shards, "train", self.pipeline, self.features)

    def notes(self, inputs: Inputs, gpu: bool) -> list[str]:
        return super().notes(inputs, gpu) + _toggle_notes(self, inputs.shard_source, "shards")


def _toggle_notes(v: Variant, source: Any, source_kind: str) -> list[str]:
    """The toggles a tfpipe chain over `source` ignores."""
    notes = []
    if "parallel_reads" in v.changed and source_kind not in ("", "shards"):
        notes.append(f"no-op: {source_kind} source (parallel_reads interleaves shard files)")
    if "shuffle_blocks" in v.changed and source is not None and not _blocked(source):
        notes.append(f"no-op: {source_kind} source (shuffle_blocks shuffles blocks of v2 shards)")
    interleaved = v.pipeline.parallel_reads and source_kind == "shards"  # a parallel interleave keeps order or not
    if "deterministic" in v.changed and not v.pipeline.parallel_map and not interleaved:
        notes.append("no-op: maps are sequential")
    return notes


@dataclasses.dataclass(frozen=True)
class RecipeVariant(Variant):
    """A domain's reference recipe over the --data folder (e.g. keras, tf-models; see `recipes`).

    Attributes:
      recipe: its name in `recipes.RECIPES`.
    """

    recipe: str = "keras"
    reads_data: ClassVar[bool] = True
    skippable: ClassVar[bool] = True

    @classmethod
    def check_fields(cls, spec: str, own: Collection[str], values: Collection[str], config_class: type) -> None:
        allowed = {"batch_size", "seed", *(f.name for f in dataclasses.fields(config_class))}
        if set(own) - allowed:
            raise ValueError(f"variant {spec!r}: {spec.partition(':')[0]} takes only batch_size, seed and "
                             f"{config_class.__name__} fields, not {', '.join(sorted(set(own) - allowed))}")

    @property
    def kind(self) -> str:
        return self.recipe

    def config(self) -> dict[str, Any]:
        from tfpipe.bench.domains import of_config

        where = recipes.location(of_config(self.features), self.recipe)
        return {"pipeline": {"recipe": f"{where}(data, {type(self.features).__name__}, batch_size, seed, "
                                       f"mode='train'), repeated",
                             "batch_size": self.pipeline.batch_size, "seed": self.pipeline.seed},
                "features": dataclasses.asdict(self.features)}

    def reads(self, inputs: Inputs) -> tuple[str, int]:
        data, examples = _data(inputs, self)
        from tfpipe.core.files import FileSource

        if inputs.domain is None or not isinstance(inputs.source, FileSource) or not os.path.isdir(data):
            raise ValueError(f"{data}: the {self.recipe} variant reads a folder with one subfolder per class (the "
                             f"domain's {recipes.RECIPES[self.recipe].title} recipe), not a CSV or shard folder")
        recipes.load(inputs.domain, self.recipe)  # ValueError: the domain has none
        return data, examples

    def dataset(self, data: Optional[str], shards: Optional[str]) -> Any:
        from tfpipe.bench.domains import of_config

        recipe = recipes.load(of_config(self.features), self.recipe)
        with contextlib.redirect_stdout(io.StringIO()):  # Keras prints "Found N files belonging to K classes."
            return recipe(data, self.features, self.pipeline.batch_size, self.pipeline.seed, mode="train")

    def notes(self, inputs: Inputs, gpu: bool) -> list[str]:
        return super().notes(inputs, gpu) + [f"{recipes.RECIPES[self.recipe].title} recipe"]

    def plan(self, inputs: Inputs) -> str:
        return (f"the {recipes.RECIPES[self.recipe].title} recipe, as its users write it (not planned by tfpipe): "
                f"{self.config()['pipeline']['recipe']}")


@dataclasses.dataclass(frozen=True)
class UserVariant(Variant):
    """A user's own function builds the dataset: it reads what it likes, and its chain tells its epoch.

    Attributes:
      fn: "MODULE:FUNCTION" or "FILE.py:FUNCTION".
    """

    fn: str = ""
    own_epoch: ClassVar[bool] = True

    def reads(self, inputs: Inputs) -> None:
        return None

    def plan(self, inputs: Inputs) -> str:
        return (f"{self.fn} builds its own chain ({self.KIND}; --ops times its ops); where it calls "
                f"tfpipe.build_dataset, print(tfpipe.describe(...)) with the same arguments shows that plan")


@dataclasses.dataclass(frozen=True)
class DatasetFnVariant(UserVariant):
    """A user's `dataset_fn(pipeline, mode)`, handed the variant's PipelineConfig."""

    KIND: ClassVar[str] = "dataset_fn"

    @classmethod
    def check_fields(cls, spec: str, own: Collection[str], values: Collection[str], config_class: type) -> None:
        pipeline_fields = [f.name for f in dataclasses.fields(PipelineConfig)]
        feature_fields = sorted(set(values) - set(pipeline_fields))
        if feature_fields:
            raise ValueError(f"variant {spec!r}: {', '.join(feature_fields)}: {config_class.__name__} field(s) do "
                             f"not reach a dataset_fn, which builds its own features; only PipelineConfig fields "
                             f"apply ({', '.join(pipeline_fields)})")

    def config(self) -> dict[str, Any]:
        return {"pipeline": dataclasses.asdict(self.pipeline), "features": None, "dataset_fn": self.fn}

    def dataset(self, data: Optional[str], shards: Optional[str]) -> Any:
        from tfpipe.bench import user_fns
        from tfpipe.core import memory
        from tfpipe.core.chain import chain_options

        # tfpipe's own chain sets these from the toggles; so does a user's, so "off" is off there too.
        if self.pipeline.reuse_memory:
            memory.reuse_large_buffers()
        return user_fns.call_dataset_fn(self.fn, self.pipeline, "train").with_options(
            chain_options("train", self.pipeline))


@dataclasses.dataclass(frozen=True)
class InputFnVariant(UserVariant):
    """A user's plain Estimator input_fn, given params={"batch_size": pipeline.batch_size}."""

    KIND: ClassVar[str] = "input_fn"

    def config(self) -> dict[str, Any]:
        return {"pipeline": None, "features": None, "input_fn": self.fn,
                "params": {"batch_size": self.pipeline.batch_size}}

    def dataset(self, data: Optional[str], shards: Optional[str]) -> Any:
        from tfpipe.bench import user_fns

        return user_fns.call_input_fn(self.fn, self.pipeline.batch_size, "train")
