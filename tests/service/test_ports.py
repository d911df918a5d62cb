"""tfpipe.service.ports: a taken port is refused before a server (or TensorFlow) starts."""

import socket

import pytest

from tfpipe.service.ports import check_port_free


def test_a_listening_port_is_refused_with_how_to_find_its_process_and_a_free_one_passes():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        with pytest.raises(ValueError, match=rf"port {port} is already in use on this host .*ss -ltnp 'sport = :{port}'"):
            check_port_free(port)
    check_port_free(port)  # closed: free again (TIME_WAIT does not count, as for gRPC)
    check_port_free(0)  # any free port: nothing to check
