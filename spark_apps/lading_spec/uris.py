"""Storage URIs lading accepts: ``s3://bucket/prefix`` and ``file:///abs/path``."""

from __future__ import annotations

from urllib.parse import urlparse

from lading_spec.errors import SpecError

SCHEMES = ("s3", "file")


def check_uri(value: object, field: str, *, allow_glob: bool = False) -> str:
    """Return ``value`` if it is an ``s3://`` or ``file://`` URI, else raise naming ``field``."""
    if not isinstance(value, str) or not value:
        raise SpecError(field, f"expected an s3:// or file:// URI, got {value!r}")
    parsed = urlparse(value)
    if parsed.scheme not in SCHEMES:
        raise SpecError(field, f"unsupported URI {value!r}; use s3://bucket/prefix/ or file:///absolute/path/")
    if parsed.scheme == "s3" and len(parsed.netloc) < 3:
        raise SpecError(field, f"{value!r} has no valid bucket name (s3://bucket/prefix/)")
    if parsed.scheme == "file" and (parsed.netloc or not parsed.path.startswith("/")):
        raise SpecError(field, f"{value!r} must be an absolute file:///path (three slashes)")
    if not allow_glob and any(c in value for c in "*?["):
        raise SpecError(field, f"{value!r} must not contain glob characters here")
    return value
