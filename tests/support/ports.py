"""Free TCP ports for the servers the suite starts (moto, PostgreSQL, tansu, etcd, the API
server, the operator's probes, the spark-operator harness's drivers).

A port is free when it is chosen, not necessarily when the server binds it: the socket
is closed in between, and the suite's other servers and clients take ephemeral ports
beside it. ``free_ports(n)`` holds all ``n`` sockets open while choosing, so one call
never returns the same port twice (consecutive ``free_port()`` calls may); a server
whose start must not fail on a port taken meanwhile retries on new ones (the e2e
operator, tests/e2e/conftest.py)."""

from __future__ import annotations

import socket


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """``n`` distinct ports on ``host`` free a moment ago."""
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind((host, 0))
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for s in sockets:
            s.close()


def free_port(host: str = "127.0.0.1") -> int:
    """One port on ``host`` free a moment ago."""
    return free_ports(1, host)[0]
