"""The dataset graph tf.data will run: its ops from source to output, read from the serialized graph."""

from __future__ import annotations

import tensorflow as tf


def dataset_ops(ds: tf.data.Dataset) -> list[str]:
    """The chain's dataset ops from source to output, e.g. ['TensorSliceDataset', ..., 'PrefetchDataset'].

    Read from the dataset's graph, so it shows what tf.data will run, not what was asked.
    """
    graph = tf.compat.v1.GraphDef()
    graph.ParseFromString(ds._as_serialized_graph().numpy())  # pylint: disable=protected-access
    nodes = {n.name: n for n in graph.node}
    ops, name = [], _output_node(graph)
    while name in nodes:
        node = nodes[name]
        if "Dataset" in node.op:
            ops.append(node.op)
        dataset_inputs = [i.split(":")[0].lstrip("^") for i in node.input]
        name = next((i for i in dataset_inputs if "Dataset" in nodes.get(i, node).op), None)
    return ops[::-1]


def _output_node(graph: tf.compat.v1.GraphDef) -> str:
    for node in graph.node:
        if node.op == "_Retval":
            return node.input[0].split(":")[0]
    return graph.node[-1].name
