"""The one registry of what plugs into the core: domains, folder and files readers, the data-service distributor.

Each plug-in module registers what it defines when imported (a domain with `register_domain`,
a folder reader with `register_folder_reader`, the data service with `register_distributor`);
`tfpipe.core.plugins` imports those modules on the first lookup here, so the core never names
them. A name registered twice is refused with a KeyError unless `replace=True` (as
big_vision's `pp/registry.py` does): two plug-ins claiming one name is a mistake to say, not
to settle silently by import order.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, TypeVar

from tfpipe.core import plugins
from tfpipe.core.domain import Domain

T = TypeVar("T")
DISTRIBUTOR = "distributor"  # the data service's one slot
_DOMAINS: dict[str, Domain] = {}
_FOLDER_READERS: dict[str, Callable[[str], Optional[Any]]] = {}
_FILES_READERS: dict[str, Callable[[str, Any], Optional[Any]]] = {}
_DISTRIBUTOR: dict[str, Callable[[Any, Any], Any]] = {}


def _add(table: dict[str, T], what: str, name: str, value: T, replace: bool) -> T:
    """table[name] = value, or a KeyError naming `name` if it is taken and `replace` is False."""
    if name in table and not replace:
        raise KeyError(f"the {what} {name!r} was already registered (by {table[name]!r}); "
                       f"pass replace=True to replace it")
    table[name] = value
    return value


def register_domain(domain: Domain, *, replace: bool = False) -> Domain:
    """Makes `domain` findable by its name and file extensions.

    Raises:
      KeyError: a domain of that name is registered already and `replace` is False.
    """
    return _add(_DOMAINS, "domain", domain.name, domain, replace)


def register_folder_reader(reader: Callable[[str], Optional[Any]], *, name: Optional[str] = None,
                           replace: bool = False) -> Callable[[str], Optional[Any]]:
    """`reader(folder)` returns a Source for folders it recognizes (e.g. a shard index), else None.

    Args:
      reader: the function; readers are asked in the order they were registered.
      name: its name in the registry (default: "module.function").
      replace: replace a reader registered under the same name.

    Raises:
      KeyError: `name` is registered already and `replace` is False.
    """
    name = name or f"{reader.__module__}.{reader.__qualname__}"
    return _add(_FOLDER_READERS, "folder reader", name, reader, replace)


def register_files_reader(reader: Callable[[str, Any], Optional[Any]], *, name: Optional[str] = None,
                          replace: bool = False) -> Callable[[str, Any], Optional[Any]]:
    """`reader(what, paths)` returns a Source for files no domain reads that it recognizes (e.g.
    TFRecord files matched by a glob, named by `what`), else None.

    Args:
      reader: the function; asked in the order registered, for a glob or a single file whose
        files no domain's extensions match.
      name: its name in the registry (default: "module.function").
      replace: replace a reader registered under the same name.

    Raises:
      KeyError: `name` is registered already and `replace` is False.
    """
    name = name or f"{reader.__module__}.{reader.__qualname__}"
    return _add(_FILES_READERS, "files reader", name, reader, replace)


def register_distributor(fn: Callable[[Any, Any], Any], *, replace: bool = False) -> Callable[[Any, Any], Any]:
    """`fn(dataset, pipeline) -> dataset` runs a chain on the tf.data service (PipelineConfig.data_service).

    Raises:
      KeyError: a distributor is registered already and `replace` is False.
    """
    return _add(_DISTRIBUTOR, "data-service", DISTRIBUTOR, fn, replace)


def domains() -> dict[str, Domain]:
    """Every registered domain by name, in the order they registered (built-in ones first).

    Loads the domain plug-ins only: no TensorFlow, so the command line can ask before its work.
    """
    plugins.load(domains_only=True)
    return dict(_DOMAINS)


def get_domain(name: str) -> Domain:
    """The domain called `name` ("audio", "image")."""
    found = domains()
    if name not in found:
        raise ValueError(f"domain {name!r}: known domains are {', '.join(sorted(found))}")
    return found[name]


def default_domain() -> Domain:
    """The domain a command uses when no data says which (a bench without --data, a config-less
    serving signature): the registered domain that declares `default = True`, else the first."""
    found = list(domains().values())
    if not found:
        raise ValueError("no domain is registered (tfpipe declares its built-in ones when imported)")
    return next((d for d in found if d.default), found[0])


def domain_of_config(config: Any) -> Domain:
    """The domain whose config class `config` is an instance of; None: the default domain.

    Raises:
      ValueError: no registered domain has this config class.
    """
    if config is None:
        return default_domain()
    for domain in domains().values():
        if isinstance(config, domain.config_class):
            return domain
    raise ValueError(f"{type(config).__name__}: no registered domain has this config class "
                     f"(domains: {', '.join(domains())})")


def domain_of(path: str) -> Optional[Domain]:
    """The domain whose extensions `path` has, or None."""
    lower = path.lower()
    return next((d for d in domains().values() if lower.endswith(d.extensions)), None)


def known_extensions() -> str:
    """Every registered domain's file extensions, for messages (".jpeg, .jpg, .png, .wav")."""
    return ", ".join(sorted(e for d in domains().values() for e in d.extensions))


def folder_readers() -> list[Callable[[str], Optional[Any]]]:
    """The registered folder readers, in the order they were registered."""
    plugins.load()
    return list(_FOLDER_READERS.values())


def files_readers() -> list[Callable[[str, Any], Optional[Any]]]:
    """The registered files readers, in the order they were registered."""
    plugins.load()
    return list(_FILES_READERS.values())


def distributor() -> Optional[Callable[[Any, Any], Any]]:
    """The registered data-service step, or None."""
    plugins.load()
    return _DISTRIBUTOR.get(DISTRIBUTOR)
