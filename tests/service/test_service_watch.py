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
