"""core/graph.py: the one walker over a dataset's ops (dataset_ops, the bench's per-op timing, the service check)."""

import tensorflow as tf

from tfpipe.core.graph import dataset_ops, walk


def _chain():
    ds = tf.data.Dataset.range(10).repeat()
    ds = ds.map(lambda x: x * 2, num_parallel_calls=tf.data.AUTOTUNE, name="double")
    ds = ds.map(lambda x: tf.py_function(lambda v: v, [x], tf.int64), name="python")
    return ds.batch(4).prefetch(1)


def test_dataset_ops_lists_what_tf_data_runs_from_source_to_output():
    # map with num_parallel_calls is a ParallelMapDatasetV2 in the graph, not a "map".
    assert dataset_ops(_chain()) == ["RangeDataset", "RepeatDataset", "ParallelMapDatasetV2", "MapDataset",
                                     "BatchDatasetV2", "PrefetchDataset"]


def test_each_node_is_the_prefix_ending_in_its_op_with_its_name():
    nodes = walk(_chain())
    assert [n.name for n in nodes] == ["", "", "double", "python", "", ""]
    double = nodes[2]
    assert list(double.dataset.take(3).as_numpy_iterator()) == [0, 2, 4]  # source .. this op
    assert double.attrs["deterministic"].s == b"default"
    # Each op's Python Dataset is the prefix ending in it.
    assert [dataset_ops(n.dataset) for n in nodes] == [[n.op for n in nodes[:i + 1]] for i in range(len(nodes))]
    assert "EagerPyFunc" in nodes[3].function_ops and "EagerPyFunc" not in double.function_ops
    assert nodes[0].function_ops == frozenset()


def test_branches_visits_every_input_before_the_op_that_reads_it():
    left = tf.data.Dataset.range(3).map(lambda x: x, name="left")
    right = tf.data.Dataset.from_tensor_slices([1, 2, 3]).shuffle(3)
    ds = tf.data.Dataset.zip((left, right)).batch(2)
    assert [n.op for n in walk(ds)] == ["RangeDataset", "MapDataset", "ZipDataset", "BatchDatasetV2"]
    assert [n.op for n in walk(ds, branches=True)] == [
        "RangeDataset", "MapDataset", "TensorSliceDataset", "ShuffleDatasetV3", "ZipDataset", "BatchDatasetV2"]


def _mixture():
    first = tf.data.Dataset.range(3).map(lambda x: x, name="first")
    second = tf.data.Dataset.range(5, 8).map(lambda x: x, name="second")
    return tf.data.Dataset.sample_from_datasets([first, second], [0.5, 0.5], seed=1).batch(2)


def test_a_mixtures_main_chain_is_its_first_member_not_the_member_picker():
    ds = _mixture()
    nodes = walk(ds)
    assert [(n.op, n.name) for n in nodes] == [("RangeDataset", ""), ("MapDataset", "first"),
                                               ("DirectedInterleaveDataset", ""), ("BatchDatasetV2", "")]
    assert sorted(nodes[1].dataset.as_numpy_iterator()) == [0, 1, 2]  # the prefix is the first member
    assert sorted(int(x) for b in nodes[3].dataset.as_numpy_iterator() for x in b) == [0, 1, 2, 5, 6, 7]
    with tf.Graph().as_default():  # an Estimator's input_fn: the same chain from the graph
        assert [n.name for n in walk(_mixture())] == ["", "first", "", ""]
    picked = [n.name for n in walk(ds, branches=True)]
    assert "first" in picked and "second" in picked  # every member with branches


def test_a_wrapper_without_an_op_of_its_own_is_not_listed_twice():
    ds = tf.compat.v1.data.Dataset.range(3).map(lambda x: x)  # DatasetV1Adapter around each dataset
    assert dataset_ops(ds) == ["RangeDataset", "MapDataset"]


def test_a_chain_built_in_graph_mode_is_walked_too():
    # An Estimator calls input_fn in graph mode, where the service check walks the chain.
    with tf.Graph().as_default():
        nodes = walk(_chain(), branches=True)
        assert [n.op for n in nodes] == ["RangeDataset", "RepeatDataset", "ParallelMapDatasetV2", "MapDataset",
                                         "BatchDatasetV2", "PrefetchDataset"]
        assert "EagerPyFunc" in nodes[3].function_ops


def test_an_op_only_the_graph_has_is_listed_without_a_python_dataset():
    # The tf.data service's reader is one Python object but two ops once serialized (read, then uncompress).
    service = tf.data.experimental.service
    dispatcher = service.DispatchServer(service.DispatcherConfig(port=0))
    address = dispatcher.target.split("://")[1]
    worker = service.WorkerServer(service.WorkerConfig(dispatcher_address=address, worker_address="127.0.0.1:%port%"))
    remote = tf.data.Dataset.range(6).batch(2).apply(service.distribute("parallel_epochs", dispatcher.target))
    nodes = walk(remote.prefetch(1))
    assert [n.op for n in nodes] == ["DataServiceDatasetV4", "ParallelMapDatasetV2", "PrefetchDataset"]
    assert nodes[0].dataset is None and nodes[1].dataset is remote and dataset_ops(nodes[2].dataset)[-1] == "PrefetchDataset"
    worker.stop()
    dispatcher.stop()
