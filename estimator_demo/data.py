"""The demo's data: the synthetic corpus or the user's, a stable held-out split, shards.

A class folder or CSV is sharded (`tfpipe.write_shards`) into <work_dir>/shards/{train,eval}
before training where its domain asks for that (`Domain.shards_for_training`: the offline
path reads files the online chain refuses, e.g. any wav, resampled and mixed to mono); complete
shards are reused by the next run. Other domains' files are read online by default (the same
tfpipe chain), or sharded with shards=True.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from typing import Any, Optional, Sequence, Union

import tfpipe
from tfpipe.core import filesystem as fs
from tfpipe.core.files import FileSource
from tfpipe.core.registry import domain_of_config
from tfpipe.core.source import find


@dataclasses.dataclass(frozen=True)
class DemoData:
    """Train and eval data as the Estimator reads them.

    Attributes:
      train: shard folder, or any data build_dataset reads (a Source read online), for training.
      eval: the same for evaluation.
      class_names: label id -> name, shared by both.
      eval_files: held-out files (path, label) to predict at the end; empty when
        eval data is a shard folder (shards hold features, not the files).
      description: one line on where the data came from.
    """

    train: Any
    eval: Any
    class_names: tuple[str, ...]
    eval_files: tuple[tuple[str, int], ...]
    description: str


def prepare_data(data: Union[None, str, FileSource], eval_data: Optional[str], eval_fraction: float,
                 work_dir: str, features: Any, *, store: str = "waveform", num_shards: int = 16,
                 shard_workers: int = 0, on_error: str = "fail", per_class: int = 250,
                 corpus_seed: int = 0, shards: bool = True,
                 class_names: Optional[Sequence[str]] = None) -> DemoData:
    """Finds or generates the data, holds out eval, shards both sides into work_dir/shards.

    Args:
      data: class folder, CSV manifest, shard folder or its Source; None writes the synthetic
        corpus of `features`' domain into work_dir/corpus (the default domain) or
        work_dir/NAME_corpus (the domain NAME).
      eval_data: held-out data in the same forms; None holds out `eval_fraction` of
        `data` by a hash of each file's path (the same files on every run).
      eval_fraction: share held out when eval_data is None.
      work_dir: where the corpus and shards/{train,eval} go (complete shards are reused).
      features: the domain's config (e.g. sample rate, clip length and log-mel; image size).
      store: what the shards hold, one of the domain's stores (e.g. "waveform", "jpeg").
      num_shards: training shards; eval gets a quarter as many.
      shard_workers: shard-writing processes (0: this process).
      on_error: "fail" or "skip" an unreadable file (skipped files are listed and counted).
      per_class: synthetic corpus size per class.
      corpus_seed: synthetic corpus seed.
      shards: write shards; False reads the files online (train and eval are then Sources).
      class_names: number the classes by these names, in train and eval; default: the
        training data's own, which eval data then takes (an eval folder lacking a class keeps
        the training ids; an eval class the training data lacks is refused, naming it).

    Returns:
      DemoData: the shard folders (or Sources) to train and evaluate on, class names, held-out files.

    Raises:
      ValueError / tfpipe.DataError: unusable data, naming the file and the fix.
    """
    if data is None:
        domain = domain_of_config(features)
        if domain.corpus is None:
            raise ValueError(f"the {domain.name} domain has no synthetic corpus: pass --data")
        # Written by the domain's own writer (soundfile, PIL) to a local folder, beside a remote work_dir.
        local_dir = work_dir if not fs.is_remote(work_dir) else os.path.join(tempfile.gettempdir(), "tfpipe-demo")
        corpus_dir = os.path.join(local_dir, "corpus" if domain.default else f"{domain.name}_corpus")
        print(f"[data] synthetic {domain.name} corpus: {per_class} files per class in {corpus_dir}")
        source = find(domain.corpus.write(corpus_dir, per_class=per_class, seed=corpus_seed,
                                          settings=domain.corpus.settings_for(features)))
        origin = f"synthetic {domain.name} corpus ({corpus_dir})"
    else:
        source = find(data)
        origin = source.root
    source = find(source, class_names)
    if eval_data is not None:
        train_src = source
        try:
            eval_src = find(eval_data, tuple(train_src.class_names))
        except ValueError as e:
            raise type(e)(f"{e} (eval data is numbered by the training data's classes; --class_names can list "
                          f"every class)") from None
    elif source.kind == "shards":
        raise ValueError(f"{source.root}: a shard folder cannot be split into train and eval after it is "
                         f"written; pass --eval_data with a held-out shard folder (or give --data the folder "
                         f"of files)")
    else:
        train_src, eval_src = source.split(eval_fraction)
    if shards:
        train, train_count = _sharded(train_src, fs.join(work_dir, "shards", "train"), "train", features,
                                      store, num_shards, shard_workers, on_error)
        held, held_count = _sharded(eval_src, fs.join(work_dir, "shards", "eval"), "eval", features, store,
                                    max(1, num_shards // 4), shard_workers, on_error)
    else:  # read online: the chain checks every file when it is built
        train, train_count = train_src, train_src.num_examples
        held, held_count = eval_src, eval_src.num_examples
    served = isinstance(eval_src, FileSource) and eval_src.domain  # a domain's files: the SavedModel takes them
    eval_files = tuple(zip(eval_src.paths, eval_src.labels)) if served else ()
    description = (f"{origin}: {train_count} train / {held_count} eval examples, "
                   f"{len(train_src.class_names)} classes")
    return DemoData(train, held, tuple(train_src.class_names), eval_files, description)


def _sharded(source: FileSource, out_dir: str, split: str, features: Any, store: str,
             num_shards: int, workers: int, on_error: str) -> tuple[str, int]:
    """The shard folder for `source` (written, or finished if a run was interrupted), and its size."""
    if source.kind == "shards":
        return source.root, source.num_examples
    num_shards = min(num_shards, len(source.paths))
    print(f"[data] sharding {len(source.paths)} {split} files into {out_dir} "
          f"({num_shards} shards, store={store})")
    index = tfpipe.write_shards(source, out_dir, num_shards=num_shards, num_workers=workers,
                                features=features, store=store, split=split, on_error=on_error,
                                overwrite=True)  # the demo's own work folder: other settings replace it
    converted = {k: v for k, v in (index.get("notes") or {}).items() if v}
    if converted:  # cropped / padded / resampled / mixed to mono: said, never silent
        print(f"[data] {split}: " + ", ".join(f"{v:,} {k.replace('_', ' ')}" for k, v in converted.items()))
    if index["rejected"]:
        first = index["rejected"][0]
        print(f"[data] {len(index['rejected'])} of {len(source.paths)} {split} files rejected (each listed "
              f"with its reason in {fs.join(out_dir, 'tfpipe.json')}), e.g. {first['path']}: "
              f"{first['reason']}")
    return out_dir, index["num_examples"]


def pick_files(files: Sequence[tuple[str, int]], n: int) -> list[tuple[str, int]]:
    """Up to n files, taking classes in turn so every class shows up (deterministic)."""
    by_class: dict[int, list] = {}
    for path, label in files:
        by_class.setdefault(label, []).append((path, label))
    picked, queues = [], [iter(v) for _, v in sorted(by_class.items())]
    while len(picked) < n and queues:
        for queue in list(queues):
            item = next(queue, None)
            if item is None:
                queues.remove(queue)
            elif len(picked) < n:
                picked.append(item)
    return picked
