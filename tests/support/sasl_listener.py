"""A tenant's stand-in broker on 127.0.0.1: speaks just enough Kafka to be sent SASL credentials.

It answers ApiVersions (advertising SaslHandshake v0-1 and SaslAuthenticate v0-1) and
SaslHandshake (offering PLAIN and the SCRAM mechanisms), and records every byte it receives and
the API key of every request. A client that would hand it a password does so in a
SaslAuthenticate request (``authenticated``); the password then appears in ``received``.
It answers the authentication with an error and closes, so a client never gets further.
"""

from __future__ import annotations

import socket
import struct
import threading
from types import TracebackType

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _api_versions(version: int) -> bytes:
    apis = ((API_VERSIONS, 0, 3), (SASL_HANDSHAKE, 0, 1), (SASL_AUTHENTICATE, 0, 1))
    if version >= 3:  # flexible: compact array, tagged fields
        body = struct.pack(">h", 0) + _uvarint(len(apis) + 1)
        body += b"".join(struct.pack(">hhh", *a) + _uvarint(0) for a in apis)
        return body + struct.pack(">i", 0) + _uvarint(0)
    body = struct.pack(">hi", 0, len(apis)) + b"".join(struct.pack(">hhh", *a) for a in apis)
    return body + (struct.pack(">i", 0) if version >= 1 else b"")


def _handshake() -> bytes:
    names = b"".join(struct.pack(">h", len(m)) + m.encode() for m in MECHANISMS)
    return struct.pack(">hi", 0, len(MECHANISMS)) + names


def _auth_failed() -> bytes:
    message = b"authentication failed"
    return struct.pack(">hh", 58, len(message)) + message + struct.pack(">i", 0)  # SASL_AUTHENTICATION_FAILED


class SaslListener:
    """``with SaslListener() as broker``: ``broker.address`` is ``127.0.0.1:PORT``."""

    def __init__(self) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(0.2)
        self.address = f"127.0.0.1:{self._server.getsockname()[1]}"
        self.received = bytearray()
        self.api_keys: list[int] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def authenticated(self) -> bool:
        """Whether a client sent a SaslAuthenticate request (its credentials)."""
        with self._lock:
            return SASL_AUTHENTICATE in self.api_keys

    def __enter__(self) -> SaslListener:
        self._thread.start()
        return self

    def __exit__(self, *_: type[BaseException] | BaseException | TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(5)
        self._server.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._client, args=(conn,), daemon=True).start()

    def _read(self, conn: socket.socket, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = conn.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            with self._lock:
                self.received += chunk
            data += chunk
        return data

    def _client(self, conn: socket.socket) -> None:
        conn.settimeout(10)
        with conn:
            try:
                while not self._stop.is_set():
                    size = struct.unpack(">i", self._read(conn, 4))[0]
                    request = self._read(conn, size)
                    key, version, correlation = struct.unpack(">hhi", request[:8])
                    with self._lock:
                        self.api_keys.append(key)
                    if key == API_VERSIONS:
                        body = _api_versions(version)
                    elif key == SASL_HANDSHAKE:
                        body = _handshake()
                    elif key == SASL_AUTHENTICATE:
                        body = _auth_failed()
                    else:
                        return
                    response = struct.pack(">i", correlation) + body
                    conn.sendall(struct.pack(">i", len(response)) + response)
                    if key == SASL_AUTHENTICATE:
                        return
            except (OSError, ConnectionError, struct.error):
                return
