"""The S3 client dials only the endpoint addresses it checked (issue 28, item 8: DNS rebinding).

A rebinding name answers a harmless address to the metadata-service check and the metadata
service's to the connection that follows. This machine has no DNS server a test can control
and no 169.254.169.254, so the system resolver (``socket.getaddrinfo``, for the one test name
only) is stood in for by a double that answers differently on successive calls, and a
listener on 127.0.0.1 stands for the metadata service: the double's later answers point at it.
The S3 server is the tests' real one (moto on 127.0.0.1).
"""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from lading_jobs import pinning
from lading_jobs.storage import S3Settings, S3Storage, StorageError

NAME = "minio.tenant-a.svc.cluster.local"  # path-style to moto, as an in-cluster MinIO


class Listener:
    """An HTTP server on 127.0.0.1 that records every request (method, path, Host) and answers 404."""

    def __init__(self) -> None:
        seen: list[tuple[str, str, str]] = []

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                seen.append((self.command, self.path, self.headers.get("Host", "")))
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_PUT = do_HEAD = do_POST = do_DELETE = _answer

            def log_message(self, *args: Any) -> None:
                pass

        self.requests = seen
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Listener:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.fixture
def credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keys for a client that talks only to a listener (SigV4 needs some)."""
    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing")):
        monkeypatch.setenv(name, value)


@pytest.fixture
def metadata_stand_in() -> Iterator[Listener]:
    with Listener() as listener:
        yield listener


class Resolver:
    """``socket.getaddrinfo`` for NAME: the i-th lookup gets ``answers[min(i, len - 1)]``, each
    an (address, port) whose port None means the port asked for; other names go to the real one."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *answers: tuple[str, int | None]) -> None:
        self.answers, self.lookups = answers, 0
        self.real = socket.getaddrinfo
        monkeypatch.setattr(socket, "getaddrinfo", self.getaddrinfo)

    def getaddrinfo(self, host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host != NAME:
            return self.real(host, port, *args, **kwargs)
        address, answer_port = self.answers[min(self.lookups, len(self.answers) - 1)]
        self.lookups += 1
        port = answer_port if answer_port is not None else int(port or 0)
        if ":" in address:
            return [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", (address, port, 0, 0))]
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]


def storage_at(s3_endpoint: str) -> S3Storage:
    """An S3 client whose endpoint is the tests' S3 server, named by NAME."""
    return S3Storage(S3Settings(endpoint=f"http://{NAME}:{urlsplit(s3_endpoint).port}"))


def test_a_name_that_rebinds_after_the_check_is_never_asked_again(
        monkeypatch: pytest.MonkeyPatch, s3_endpoint: str, bucket: str, metadata_stand_in: Listener) -> None:
    """The check sees the S3 server; every later answer points at the metadata stand-in. The
    client keeps dialling the checked address: the writes and reads reach S3, the stand-in
    receives nothing, and the name was looked up once (before: once per connection)."""
    resolver = Resolver(monkeypatch, ("127.0.0.1", None), ("127.0.0.1", metadata_stand_in.port))
    storage = storage_at(s3_endpoint)
    for i in range(3):
        storage.put(f"s3://{bucket}/k{i}", b"data %d" % i)
    assert [storage.read(f"s3://{bucket}/k{i}") for i in range(3)] == [b"data 0", b"data 1", b"data 2"]
    assert metadata_stand_in.requests == []
    assert resolver.lookups == 1


@pytest.mark.usefixtures("credentials")
def test_requests_to_a_pinned_address_keep_the_endpoints_name(
        monkeypatch: pytest.MonkeyPatch, metadata_stand_in: Listener) -> None:
    """The Host header (which SigV4 signs, and virtual hosts route by) is the endpoint's name,
    not the pinned address; the request is path-style."""
    Resolver(monkeypatch, ("127.0.0.1", None))
    storage = S3Storage(S3Settings(endpoint=f"http://{NAME}:{metadata_stand_in.port}"))
    assert storage.head("s3://bkt/some/key") is None
    assert metadata_stand_in.requests[0] == ("HEAD", "/bkt/some/key", f"{NAME}:{metadata_stand_in.port}")


def self_signed(directory: Path, name: str) -> tuple[Path, Path]:
    """A certificate for ``name`` only (no IP address in it) and its key, as PEM files."""
    import datetime as dt

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


@pytest.mark.usefixtures("credentials")
def test_tls_to_a_pinned_address_verifies_the_certificate_against_the_endpoints_name(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Over https the client sends the name as the TLS server name and checks the certificate
    against it (the certificate names no address), while it dials the pinned 127.0.0.1."""
    cert, key = self_signed(tmp_path, NAME)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server_names: list[str | None] = []
    context.sni_callback = lambda sock, server_name, ctx: server_names.append(server_name)  # type: ignore[assignment,func-returns-value]
    with Listener() as listener:
        listener.server.socket = context.wrap_socket(listener.server.socket, server_side=True)
        monkeypatch.setenv("AWS_CA_BUNDLE", str(cert))
        resolver = Resolver(monkeypatch, ("127.0.0.1", None))
        storage = S3Storage(S3Settings(endpoint=f"https://{NAME}:{listener.port}"))
        assert storage.head("s3://bkt/key") is None
        assert listener.requests[0] == ("HEAD", "/bkt/key", f"{NAME}:{listener.port}")
    assert server_names and set(server_names) == {NAME}
    assert resolver.lookups == 1


def test_an_endpoint_that_moved_is_resolved_again_and_checked(
        monkeypatch: pytest.MonkeyPatch, s3_endpoint: str, bucket: str) -> None:
    """Nothing answers at the pinned address (127.0.0.2: the S3 server listens on 127.0.0.1
    only): the name is resolved again, that answer is checked and pinned, and the client goes on."""
    resolver = Resolver(monkeypatch, ("127.0.0.2", None), ("127.0.0.1", None))
    storage = storage_at(s3_endpoint)
    storage.put(f"s3://{bucket}/moved", b"x")
    assert storage.read(f"s3://{bucket}/moved") == b"x"
    assert resolver.lookups == 2


def test_a_second_answer_that_is_link_local_is_refused_not_dialled(
        monkeypatch: pytest.MonkeyPatch, s3_endpoint: str, bucket: str) -> None:
    """The pinned address stops answering and the name now resolves to a link-local address:
    the client fails naming the endpoint and never dials it (fe80::1 without a scope would fail
    at once if it were dialled; the lookups show each retry was refused at the check)."""
    resolver = Resolver(monkeypatch, ("127.0.0.2", None), ("fe80::1", None))
    storage = storage_at(s3_endpoint)
    with pytest.raises(StorageError, match=f"cannot reach S3 at http://{NAME}:"):
        storage.put(f"s3://{bucket}/never", b"x")
    assert resolver.lookups > 1
    with pytest.raises(pinning.LinkLocalAddress, match="fe80::1, a link-local address"):
        pinning.checked_addresses(NAME)


def test_the_client_refuses_a_botocore_without_the_pools_it_pins() -> None:
    class Bare:
        pass

    with pytest.raises(RuntimeError, match="cannot pin"):
        pinning.pin_connections(Bare(), pinning.Pins())
