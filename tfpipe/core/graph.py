"""The one walker over a dataset's op graph: its ops from source to output, as tf.data will run them.

Every tool that looks inside a chain uses it: `dataset_ops` (the op names a test or a user
checks), the bench's per-op timing (each op's Python Dataset is the prefix "source .. this op",
timed on its own) and the tf.data service's check for ops a remote worker cannot run.

The ops are read from the dataset's graph (serialized once per walk; in graph mode, the graph it
was built in), so they are what tf.data runs: a `ds.map` with `num_parallel_calls` is a
`ParallelMapDatasetV2`, and an op that exists only there (the tf.data service's uncompress map)
is listed too. Along the main chain each op is paired with the Python Dataset ending in it.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Mapping, Optional

import tensorflow as tf
from tensorflow.core.framework import dataset_metadata_pb2

_AUTO_NAME = re.compile(r"^\w+:\d+$")  # "MapDataset:3": the name tf.data gives an op the user did not name


@dataclasses.dataclass(frozen=True)
class Node:
    """One op of a dataset chain.

    Attributes:
      op: the op type tf.data runs, e.g. "ParallelMapDatasetV2".
      name: the name given with `name=` (e.g. `ds.map(fn, name="decode")`), "" if none.
      attrs: the op's attributes (AttrValue protos by name), e.g. "deterministic", "output_shapes".
      function_ops: op types in the op's own functions (a map's, a filter's) and those they call.
      dataset: the Python Dataset that ends in this op (iterating it runs source .. this op); main
        chain only, and None for an op with no Python object of its own (the service's uncompress).
    """

    op: str
    name: str
    attrs: Mapping[str, Any] = dataclasses.field(repr=False)
    function_ops: frozenset = dataclasses.field(repr=False)
    dataset: Optional[tf.data.Dataset] = dataclasses.field(default=None, repr=False, compare=False)


def walk(ds: tf.data.Dataset, *, branches: bool = False) -> list[Node]:
    """The chain's ops from source to output.

    Args:
      ds: any tf.data.Dataset, built eagerly or in graph mode (an Estimator's input_fn).
      branches: also walk every other input of an op with several (zip, concatenate, a mixture's
        datasets and its selector), each before the op that reads it; by default only the main
        input (the first; a mixture's first member), i.e. the main chain (what `dataset_ops`
        lists and the bench times prefix by prefix).

    Returns:
      The nodes, sources first, the output last.
    """
    graph, output = _graph(ds)
    nodes = {n.name: n for n in graph.node}
    functions = {f.signature.name: f for f in graph.library.function}
    order = _post_order(nodes, output, branches)
    datasets = _pair(ds, [n.name for n in _post_order(nodes, output, False)])
    return [Node(n.op, _name(n), dict(n.attr), _function_ops(n, functions), datasets.get(n.name)) for n in order]


def dataset_ops(ds: tf.data.Dataset) -> list[str]:
    """The chain's dataset ops from source to output, e.g. ['TensorSliceDataset', ..., 'PrefetchDataset'].

    Read from the dataset's graph, so it shows what tf.data will run, not what was asked.
    """
    return [node.op for node in walk(ds)]


def _in_graph(ds: tf.data.Dataset) -> bool:
    """Built in graph mode: its variant tensor has an op (an eager tensor has none)."""
    return hasattr(ds._variant_tensor, "op")  # pylint: disable=protected-access


def _graph(ds: tf.data.Dataset) -> tuple[Any, str]:
    """The GraphDef holding the dataset's ops, and the name of its output op."""
    if _in_graph(ds):
        variant = ds._variant_tensor  # pylint: disable=protected-access
        return variant.graph.as_graph_def(), variant.op.name
    graph = tf.compat.v1.GraphDef()
    graph.ParseFromString(ds._as_serialized_graph().numpy())  # pylint: disable=protected-access
    output = next((n.input[0].split(":")[0] for n in graph.node if n.op == "_Retval"), graph.node[-1].name)
    return graph, output


# Ops whose first input is not the data: a mixture's (sample_from_datasets) first input picks the
# member of each element; its main chain is the first member's.
_MAIN_INPUT = {"DirectedInterleaveDataset": 1, "ExperimentalDirectedInterleaveDataset": 1}
_MAIN_PY_INPUT = {"_DirectedInterleaveDataset": 1}  # the Python class of the same op


def _dataset_inputs(node: Any, nodes: Mapping[str, Any]) -> list[Any]:
    """The ops whose datasets `node` reads, in input order (control inputs and tensors left out)."""
    names = [i.split(":")[0] for i in node.input if not i.startswith("^")]
    return [nodes[n] for n in names if n in nodes and "Dataset" in nodes[n].op]


def _post_order(nodes: Mapping[str, Any], output: str, branches: bool) -> list[Any]:
    """Dataset ops reachable from `output`, each after its inputs (first inputs only unless `branches`)."""
    out, seen, todo = [], set(), [(nodes[output], False)]
    while todo:
        node, expanded = todo.pop()
        inputs = _dataset_inputs(node, nodes)
        if not branches:
            main = _MAIN_INPUT.get(node.op, 0)
            inputs = inputs[main:main + 1] or inputs[:1]
        if expanded or not inputs:
            if node.name not in seen:
                seen.add(node.name)
                out.append(node)
            continue
        todo.append((node, True))
        todo.extend((i, False) for i in reversed(inputs))
    return out


def _python_chain(ds: tf.data.Dataset) -> list[tf.data.Dataset]:
    """The Python Datasets of the main chain, source first, wrappers without an op of their own left out."""
    chain = []
    while True:
        inputs = ds._inputs()  # pylint: disable=protected-access
        if not (len(inputs) == 1 and inputs[0]._variant_tensor is ds._variant_tensor):  # pylint: disable=protected-access
            chain.append(ds)
        if not inputs:
            return chain[::-1]
        ds = inputs[min(_MAIN_PY_INPUT.get(type(ds).__name__, 0), len(inputs) - 1)]


def _pair(ds: tf.data.Dataset, chain: list[str]) -> dict[str, tf.data.Dataset]:
    """Op name -> the Python Dataset ending in it, along the main chain (`chain`: op names, source first)."""
    prefixes = _python_chain(ds)
    if _in_graph(ds):
        return {p._variant_tensor.op.name: p for p in prefixes}  # pylint: disable=protected-access
    if len(prefixes) == len(chain):
        return dict(zip(chain, prefixes))
    # Python and graph disagree (an op tf.data adds on serializing): each prefix's own graph says
    # how many ops of the chain it ends at.
    paired = {}
    for prefix in prefixes:
        graph, output = _graph(prefix)
        length = len(_post_order({n.name: n for n in graph.node}, output, False))
        paired[chain[length - 1]] = prefix
    return paired


def _name(node: Any) -> str:
    """The name given with `name=`; "" for tf.data's own ("MapDataset:3")."""
    if "metadata" not in node.attr:
        return ""
    metadata = dataset_metadata_pb2.Metadata()
    metadata.ParseFromString(node.attr["metadata"].s)
    name = metadata.name.decode() if isinstance(metadata.name, bytes) else metadata.name
    return "" if _AUTO_NAME.match(name) else name


def _function_ops(node: Any, functions: Mapping[str, Any]) -> frozenset:
    """Op types in the functions `node` runs (its func attributes), and in the functions they call."""
    todo = [f for attr in node.attr.values() for f in _funcs(attr)]
    ops, seen = set(), set()
    while todo:
        name = todo.pop()
        if name in seen or name not in functions:
            continue
        seen.add(name)
        for inner in functions[name].node_def:
            ops.add(inner.op)
            todo.append(inner.op)  # a call of a library function by name
            todo.extend(f for attr in inner.attr.values() for f in _funcs(attr))
    return frozenset(ops)


def _funcs(attr: Any) -> list[str]:
    """Function names an AttrValue refers to (a func, or a list of them)."""
    if attr.HasField("func"):
        return [attr.func.name]
    return [f.name for f in attr.list.func] if attr.HasField("list") else []
