"""Where tenants may make lading read and write: an allow-list of URI prefixes.

The cluster admin sets ``policy.allowedPrefixes`` in the Helm values; the chart
mounts it as a YAML file and points ``LADING_POLICY_FILE`` at it::

    allowedPrefixes:
      default: ["s3://shared-exports/{namespace}/"]   # every namespace not listed
      namespaces:
        analytics: ["s3://analytics-lake/", "s3://shared-exports/analytics/"]

Rules (pure, in :func:`check_uris`):

- no policy file: everything is allowed (the policy is opt-in);
- a namespace listed under ``namespaces`` gets exactly its list (it replaces
  ``default``, it does not add to it); any other namespace gets ``default``;
  a missing ``default`` is the empty list: nothing is allowed;
- ``{namespace}`` in a prefix (or in a URI) stands for the resource's namespace,
  so one ``default`` entry gives every tenant its own prefix;
- a URI is allowed when a prefix matches it on a path boundary:
  ``s3://b/team`` allows ``s3://b/team`` and ``s3://b/team/x`` but never
  ``s3://b/team-evil/``; scheme and bucket compare case-insensitively;
- only the fixed part of a URI counts: a destination template
  (``{run_time:...}``, ``{run_id}``) or a glob (``*``, ``?``, ``[``) is cut off
  first, so whatever it expands to stays under the fixed part;
- a URI with a ``.`` or ``..`` path segment (also percent-encoded) is never
  allowed: it could climb out of its prefix on file:// storage.

Errors name the field, the URI and the allowed prefixes, so the user can fix the
spec (or ask for the prefix) without reading the policy file.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import yaml

_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_CUT = re.compile(r"[{*?\[]")


class PolicyError(ValueError):
    """The policy file is unreadable or malformed; the message names the field."""


@dataclass(frozen=True)
class Policy:
    """An allow-list; ``enabled=False`` (no policy file) allows everything."""

    enabled: bool = False
    default: tuple[str, ...] = ()
    namespaces: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def prefixes_for(self, namespace: str) -> tuple[str, ...]:
        """The prefixes ``namespace`` may use, with ``{namespace}`` filled in."""
        raw = self.namespaces.get(namespace, self.default)
        return tuple(p.replace("{namespace}", namespace) for p in raw)


def parse_policy(document: Any, source: str = "policy") -> Policy:
    """Build a :class:`Policy` from a parsed YAML document; raise naming the bad field."""
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise PolicyError(f"{source}: expected a mapping with key allowedPrefixes")
    unknown = set(document) - {"allowedPrefixes"}
    if unknown:
        raise PolicyError(f"{source}: unknown key(s) {sorted(unknown)}; the only key is allowedPrefixes")
    allowed = document.get("allowedPrefixes") or {}
    if not isinstance(allowed, dict):
        raise PolicyError(f"{source}: allowedPrefixes must be a mapping with default and namespaces")
    unknown = set(allowed) - {"default", "namespaces"}
    if unknown:
        raise PolicyError(
            f"{source}: allowedPrefixes has unknown key(s) {sorted(unknown)}; use default and namespaces"
        )
    default = _prefix_list(allowed.get("default"), f"{source}: allowedPrefixes.default")
    namespaces_doc = allowed.get("namespaces") or {}
    if not isinstance(namespaces_doc, dict):
        raise PolicyError(f"{source}: allowedPrefixes.namespaces must map a namespace to a list of prefixes")
    namespaces = {
        str(ns): _prefix_list(prefixes, f"{source}: allowedPrefixes.namespaces.{ns}")
        for ns, prefixes in namespaces_doc.items()
    }
    return Policy(enabled=True, default=default, namespaces=namespaces)


def _prefix_list(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise PolicyError(f"{where} must be a list of URI prefixes such as s3://bucket/prefix/")
    out = []
    for i, item in enumerate(value):
        if not isinstance(item, str) or "://" not in item:
            raise PolicyError(f"{where}[{i}]: {item!r} is not a URI prefix such as s3://bucket/prefix/")
        scheme = item.split("://", 1)[0].lower()
        if scheme not in ("s3", "file"):
            raise PolicyError(f"{where}[{i}]: {item!r} must start with s3:// or file://")
        if _CUT.search(item.replace("{namespace}", "")):
            raise PolicyError(
                f"{where}[{i}]: {item!r} may contain {{namespace}} but no other placeholder or glob"
            )
        if _has_dot_segment(item):
            raise PolicyError(f"{where}[{i}]: {item!r} must not contain . or .. path segments")
        out.append(item)
    return tuple(out)


def load_policy(path: str | None) -> Policy:
    """Read the policy file at ``path``; ``None`` or ``""`` means no policy (allow all).

    A path that is set but unreadable or malformed raises :class:`PolicyError`:
    the operator must not start with a policy it cannot enforce.
    """
    if not path:
        return Policy()
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise PolicyError(f"LADING_POLICY_FILE={path}: cannot read the policy file ({e.strerror})") from e
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise PolicyError(f"LADING_POLICY_FILE={path}: not valid YAML ({e})") from e
    return parse_policy(document, source=f"LADING_POLICY_FILE={path}")


def check_uris(policy: Policy, namespace: str, uris: list[tuple[str, str]]) -> str | None:
    """Return an error for the first (field, URI) the policy forbids in ``namespace``, else None."""
    if not policy.enabled:
        return None
    prefixes = policy.prefixes_for(namespace)
    for field_path, uri in uris:
        if not uri_allowed(uri, prefixes, namespace):
            if prefixes:
                allowed = ", ".join(prefixes)
                fix = f"allowed prefixes in namespace {namespace!r}: {allowed}"
            else:
                fix = f"no prefix is allowed in namespace {namespace!r}; ask the cluster admin to add one to policy.allowedPrefixes"
            return f"{field_path}: {uri!r} is outside the allowed storage ({fix})"
    return None


def uri_allowed(uri: str, prefixes: tuple[str, ...], namespace: str = "") -> bool:
    """True when the fixed part of ``uri`` lies under one of ``prefixes`` (pure)."""
    if not isinstance(uri, str) or "://" not in uri:
        return False
    uri = uri.replace("{namespace}", namespace)
    if _has_dot_segment(_expand_sample(uri)):
        return False
    fixed = _CUT.split(uri, maxsplit=1)[0]
    candidate = _normalise(fixed)
    for prefix in prefixes:
        if _under(candidate, _normalise(prefix), fixed_is_whole=fixed == uri):
            return True
    return False


def _under(uri: str, prefix: str, *, fixed_is_whole: bool) -> bool:
    if prefix.endswith("/"):
        if uri.startswith(prefix):
            return True
        # s3://b/team names the same place as s3://b/team/, but only when the
        # URI ends there (a template cut at s3://b/team could continue "-evil/").
        return fixed_is_whole and uri + "/" == prefix
    if uri == prefix:
        return fixed_is_whole
    return uri.startswith(prefix + "/")


def _normalise(uri: str) -> str:
    """Lower-case scheme and bucket; the key part keeps its case (S3 keys are case-sensitive)."""
    scheme, _, rest = uri.partition("://")
    bucket, slash, key = rest.partition("/")
    return f"{scheme.lower()}://{bucket.lower()}{slash}{key}"


def _expand_sample(uri: str) -> str:
    """Fill placeholders with sample values: literal dots in a format stay dots."""

    def fill(match: re.Match[str]) -> str:
        key, _, fmt = match.group(1).partition(":")
        if key == "run_time" and fmt:
            try:
                return dt.datetime(2000, 1, 1, tzinfo=dt.UTC).strftime(fmt)
            except ValueError:
                return fmt
        return "x"

    return _PLACEHOLDER.sub(fill, uri)


def _has_dot_segment(uri: str) -> bool:
    path = urlsplit(uri.replace("?", "%3F").replace("#", "%23")).path
    return any(seg in (".", "..") for text in (path, unquote(path)) for seg in text.split("/"))
