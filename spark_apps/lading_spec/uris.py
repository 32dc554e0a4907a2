"""Storage URIs lading accepts (``s3://bucket/prefix``, ``file:///abs/path``) and S3 endpoints (``http(s)://host[:port]``)."""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlparse, urlsplit

from lading_spec.errors import SpecError
from lading_spec.templates import FILLED_ONLY_IN_TO_FILES

SCHEMES = ("s3", "file")
# The clouds' instance metadata services by name (the addresses are link-local, see
# metadata_address): an S3 request there answers with the node's credentials.
METADATA_HOSTS = frozenset({"metadata.google.internal", "metadata.goog", "metadata", "instance-data",
                            "instance-data.ec2.internal"})
_AWS_IMDS_V6 = ipaddress.ip_address("fd00:ec2::254")


def metadata_address(address: str) -> bool:
    """Whether ``address`` (an IP literal in any form ``inet_aton`` reads, e.g. ``2852039166``)
    is link-local (169.254.0.0/16, fe80::/10: where every cloud's instance metadata service
    answers) or AWS's IPv6 metadata address; ``False`` for a name."""
    try:
        ip: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.ip_address(address.strip("[]").split("%")[0])
    except ValueError:
        try:
            ip = ipaddress.IPv4Address(socket.inet_aton(address))
        except OSError:
            return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_link_local or ip == _AWS_IMDS_V6


def check_uri(value: object, field: str, *, allow_glob: bool = False, template: bool = False) -> str:
    """Return ``value`` if it is an ``s3://`` or ``file://`` URI, else raise naming ``field``.

    Only a destination ``template`` (``to.files``) has its placeholders filled; anywhere
    else ``{namespace}`` would be a literal directory every namespace shares (and the
    user meant their own), so a placeholder there is refused."""
    if not isinstance(value, str) or not value:
        raise SpecError(field, f"expected an s3:// or file:// URI, got {value!r}")
    parsed = urlparse(value)
    if parsed.scheme not in SCHEMES:
        raise SpecError(field, f"unsupported URI {value!r}; use s3://bucket/prefix/ or file:///absolute/path/")
    if parsed.scheme == "s3" and len(parsed.netloc) < 3:
        raise SpecError(field, f"{value!r} has no valid bucket name (s3://bucket/prefix/)")
    if parsed.scheme == "file" and (parsed.netloc or not parsed.path.startswith("/")):
        raise SpecError(field, f"{value!r} must be an absolute file:///path (three slashes)")
    if not template and (m := FILLED_ONLY_IN_TO_FILES.search(value)):
        raise SpecError(field, f"{value!r} holds the placeholder {m.group(0)}, which lading fills only in "
                               "to.files; write this URI out in full")
    if not allow_glob and any(c in value for c in "*?["):
        raise SpecError(field, f"{value!r} must not contain glob characters here")
    return value


def check_endpoint(value: object, field: str) -> str:
    """Return ``value`` if it is a plain ``http(s)://host[:port][/path]`` S3 endpoint, else raise naming ``field``.

    Refused: user information (``http://user:pass@host``), which botocore would
    send on to the server and lading would print in messages; backslashes,
    whitespace and control characters, which URL parsers disagree about (one
    reads ``http://a\\@b`` as host ``a``, another as ``b``); a query or fragment.
    Credentials belong in the Secret named by ``connection.secretRef``.
    """
    if not isinstance(value, str) or not value.startswith(("http://", "https://")):
        raise SpecError(field, f"expected an http:// or https:// URL such as http://minio:9000, got {value!r}")
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 or c == "\\" for c in value):
        raise SpecError(field, "must not contain whitespace, control characters or backslashes")
    parsed = urlsplit(value)
    if "@" in value:
        raise SpecError(field, "must not carry credentials (user:password@host); put them in the Secret "
                               "named by connection.secretRef, as AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
    if parsed.query or parsed.fragment or "?" in value or "#" in value:
        raise SpecError(field, "must not have a query or fragment; an endpoint is scheme://host[:port][/path]")
    try:
        port = parsed.port
    except ValueError:
        port = -1
    if not parsed.hostname or port == -1:
        raise SpecError(field, f"{value!r} has no valid host[:port]; expected e.g. http://minio:9000")
    if parsed.hostname.rstrip(".") in METADATA_HOSTS or metadata_address(parsed.hostname):
        raise SpecError(field, f"{value!r} is the cloud's instance metadata service (a link-local address), "
                               "never an S3 endpoint: name the S3 server, e.g. http://minio:9000")
    return value
