"""service/watch.py: the consumer's watch over a tf.data service's workers (real servers on localhost)."""

from tfpipe.service import servers
from tfpipe.service import watch as service_watch


def test_the_worker_watch_names_a_worker_that_stops_and_comes_back():
    dispatcher = servers.start_dispatcher()
    workers = [servers.start_worker(dispatcher.target) for _ in range(2)]
    try:
        host, port = dispatcher.target.split("://")[1].rsplit(":", 1)
        watch = service_watch.WorkerWatch(host, int(port))
        addresses = service_watch.dispatcher_workers(host, int(port))
        assert len(addresses) == 2 and watch.look() == []  # the baseline: both answer
        gone = next(a for a in addresses if a.endswith(f":{workers[1]._server.bound_port()}"))
        workers[1].stop()
        said = watch.look()
        assert len(said) == 1 and said[0].startswith(f"tfpipe: tf.data service worker {gone} stopped answering")
        assert watch.look() == []  # said once
        workers[1] = servers.start_worker(dispatcher.target, int(gone.rsplit(":", 1)[1]))
        assert watch.look() == [f"tfpipe: tf.data service worker {gone} answers again"]
    finally:
        for server in workers + [dispatcher]:
            server.stop()


def test_protobuf_fields_of_a_get_workers_response_are_read():
    raw = b"\n\x11\n\x0flocalhost:33655\n\x0b\n\thost:5051"
    assert [service_watch._fields(w)[1] for w in service_watch._fields(raw, repeated=1)] == [b"localhost:33655",
                                                                                            b"host:5051"]


def test_a_finite_dataset_looks_at_its_workers_once_more_when_it_ends():
    # An eval epoch can end between two of the watcher's looks: the last look is at its end.
    import tensorflow as tf

    from tfpipe.service.watch import at_end

    calls = []
    ds = at_end(tf.data.Dataset.range(5).map(lambda i: ({"x": tf.fill([2], i)}, i)), lambda: calls.append(1))
    seen = [int(i) for _, i in ds]
    assert seen == [0, 1, 2, 3, 4] and calls == [1]
    with tf.Graph().as_default():  # an Estimator's eval reads it in a graph of its own
        ends = at_end(tf.data.Dataset.range(3), lambda: calls.append(2))
        element = tf.compat.v1.data.make_one_shot_iterator(ends).get_next()
        with tf.compat.v1.Session() as session:
            got = []
            try:
                while True:
                    got.append(session.run(element))
            except tf.errors.OutOfRangeError:
                pass
    assert got == [0, 1, 2] and calls == [1, 2]
