"""Starting a Prefect server on a port found free: another process can take the port before the server binds it
(the suite runs servers and clients side by side). The port is chosen outside the range the kernel gives outgoing
connections; a server that exits before it answers is started again on another port, and an error that remains names
why, with the end of the server's log."""

import os
import socket

import pytest

from weakspot.errors import ConfigError


def _taken_port():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock, sock.getsockname()[1]


def test_a_port_taken_before_the_server_binds_it_starts_the_server_on_another(tmp_path):
    import prefect_db

    from tasks.server import healthy, start, stop_session

    home = prefect_db.fresh_home(tmp_path / "home", os.environ)
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    env.pop("PREFECT_API_URL", None)
    sock, port = _taken_port()
    try:
        with pytest.raises(ConfigError, match=r"did not start \(it exited.*\n.*the end of its log"):
            start(env, port, home / "server.log", retries=0)
        proc, url = start(env, port, home / "server.log", retries=1)
        try:
            assert healthy(url) and f":{port}/" not in url
        finally:
            stop_session(proc)
    finally:
        sock.close()


def test_a_free_port_is_chosen_outside_the_ports_of_outgoing_connections():
    from tasks.server import _ephemeral, free_port

    low, high = _ephemeral()
    ports = {free_port(None) for _ in range(20)}
    assert not any(low <= p <= high for p in ports) and len(ports) > 1
    sock, taken = _taken_port()
    try:
        with pytest.raises(ConfigError, match=f"port {taken} is taken"):
            free_port(taken)
    finally:
        sock.close()
