"""A port a tf.data service server is about to listen on, checked without TensorFlow.

`tfpipe serve` checks it before TensorFlow loads, so a taken port is refused at once.
"""

from __future__ import annotations

import errno
import socket


def check_port_free(port: int) -> None:
    """ValueError if something listens on `port`: binds it the way the server will, minus SO_REUSEPORT.

    gRPC servers set SO_REUSEPORT, so a second server on a taken port starts "successfully" and the
    kernel splits connections between the two: consumers then fail with "Dataset id ... not found".
    """
    if port == 0:
        return
    try:  # TensorFlow listens on [::]:PORT, which covers IPv4 too
        probe, address = socket.socket(socket.AF_INET6, socket.SOCK_STREAM), ("::", port)
        probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    except OSError:  # a host without IPv6
        probe, address = socket.socket(socket.AF_INET, socket.SOCK_STREAM), ("0.0.0.0", port)
    with probe:
        # Like gRPC: connections left in TIME_WAIT by a server that just stopped do not count.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                raise ValueError(f"port {port} is already in use on this host (a second server there would "
                                 f"split its connections with the first): pick another --port, or stop the "
                                 f"process using it (`ss -ltnp 'sport = :{port}'` names it)") from None
            raise ValueError(f"port {port}: cannot listen on it ({e.strerror}): pick another --port") from None
