"""An S3 client dials only addresses that were checked, so DNS rebinding cannot reach the metadata service.

A tenant names the S3 endpoint. Its host name is resolved once and every address in
the answer is checked (``lading_spec.uris.metadata_address``: no link-local address,
where every cloud's instance metadata service answers); the checked answer is then
*pinned* for the client's lifetime: each connection the client opens dials one of
those addresses, while the request still carries the name (the Host header and so the
SigV4 signature, the TLS server name and the certificate check), so path-style and
virtual-hosted addressing and TLS work as before. A name that answers a public address
to the check and 169.254.169.254 to the connection (DNS rebinding) is simply never
asked again. Only when no pinned address accepts a connection (an endpoint that moved)
is the name resolved again, and that answer is checked and pinned in turn: no address
is ever dialled unchecked. Any other host the client dials (a virtual-hosted
``bucket.host``, a proxy) is pinned the same way on its first connection.

``pin_connections`` installs this in a boto3 client's connection pools (botocore's
``URLLib3Session`` keeps them in ``_pool_classes_by_scheme``; a botocore without it is
refused rather than left unguarded).
"""

from __future__ import annotations

import socket
import sys
import threading
from typing import Any, cast

from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError
from urllib3.util import connection as urllib3_connection

from lading_spec.uris import metadata_address


class LinkLocalAddress(Exception):
    """A host name resolved to a link-local address (the instance metadata service)."""

    def __init__(self, host: str, address: str) -> None:
        super().__init__(f"{host} resolves to {address}, a link-local address (the cloud's instance "
                         "metadata service), never an S3 server")
        self.host, self.address = host, address


def _key(host: str) -> str:
    return host.strip("[]").rstrip(".").lower()


def checked_addresses(host: str) -> tuple[str, ...]:
    """The addresses ``host`` resolves to (resolver order, each once), every one checked:
    ``LinkLocalAddress`` if any is link-local, ``OSError`` if the name does not resolve."""
    infos = socket.getaddrinfo(host.strip("[]"), None, urllib3_connection.allowed_gai_family(), socket.SOCK_STREAM)
    addresses = tuple(dict.fromkeys(str(info[4][0]) for info in infos))
    bad = next((a for a in addresses if metadata_address(a)), None)
    if bad is not None:
        raise LinkLocalAddress(host, bad)
    if not addresses:
        raise socket.gaierror(f"{host} resolves to no address")
    return addresses


class Pins:
    """The checked addresses of each host one client dials (thread-safe: the pool connects
    from many threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_host: dict[str, tuple[str, ...]] = {}

    def addresses(self, host: str, *, again: bool = False) -> tuple[str, ...]:
        """``host``'s pinned addresses, resolving and checking it first if it has none (or ``again``)."""
        key = _key(host)
        with self._lock:
            if again or key not in self._by_host:
                self._by_host[key] = checked_addresses(host)
            return self._by_host[key]


def _dial(addresses: tuple[str, ...], port: int, timeout: Any, source_address: Any, options: Any) -> socket.socket:
    """A socket connected to the first of ``addresses`` that accepts (the last error otherwise)."""
    error: OSError | None = None
    for address in addresses:
        try:
            return urllib3_connection.create_connection((address, port), timeout, source_address=source_address,
                                                        socket_options=options)
        except OSError as e:
            error = e
    raise error or OSError(f"no address to connect to on port {port}")


class _PinnedConnection:
    """Mixed into botocore's connection classes ahead of urllib3's: ``_new_conn`` dials a
    pinned address instead of resolving ``_dns_host`` again (urllib3 2's ``_new_conn``, with
    the same exceptions, so botocore's retries and messages are unchanged)."""

    pins: Pins
    _dns_host: str
    host: str
    port: int
    timeout: Any
    source_address: Any
    socket_options: Any

    def _new_conn(self) -> socket.socket:
        try:
            sock = self._dial_pinned()
        except LinkLocalAddress as e:
            raise NewConnectionError(self, f"refused to connect: {e}") from e  # type: ignore[arg-type]
        except socket.gaierror as e:
            raise NameResolutionError(self.host, self, e) from e  # type: ignore[arg-type]
        except TimeoutError as e:
            raise ConnectTimeoutError(self, f"Connection to {self.host} timed out. "
                                            f"(connect timeout={self.timeout})") from e
        except OSError as e:
            raise NewConnectionError(self, f"Failed to establish a new connection: {e}") from e  # type: ignore[arg-type]
        sys.audit("http.client.connect", self, self.host, self.port)
        return sock

    def _dial_pinned(self) -> socket.socket:
        addresses = self.pins.addresses(self._dns_host)
        try:
            return _dial(addresses, self.port, self.timeout, self.source_address, self.socket_options)
        except OSError:
            moved = self.pins.addresses(self._dns_host, again=True)  # checked like the first answer
            if moved == addresses:
                raise
            return _dial(moved, self.port, self.timeout, self.source_address, self.socket_options)


def pin_connections(client: Any, pins: Pins) -> None:
    """Make every connection of the boto3 ``client`` dial through ``pins`` (see the module doc)."""
    session = getattr(getattr(client, "_endpoint", None), "http_session", None)
    classes = getattr(session, "_pool_classes_by_scheme", None)
    manager = getattr(session, "_manager", None)
    if not isinstance(classes, dict) or getattr(manager, "pool_classes_by_scheme", None) is not classes:
        raise RuntimeError("this botocore keeps its connection pools where lading cannot pin the S3 endpoint's "
                           "checked addresses (botocore.httpsession.URLLib3Session._pool_classes_by_scheme); "
                           "use the botocore version in requirements.lock")
    pools = cast(dict[str, Any], classes)  # the manager's own dict: proxy managers made later get it too
    for scheme, pool in list(pools.items()):
        conn = type(f"Pinned{pool.ConnectionCls.__name__}", (_PinnedConnection, pool.ConnectionCls), {"pins": pins})
        pools[scheme] = type(f"Pinned{pool.__name__}", (pool,), {"ConnectionCls": conn})
