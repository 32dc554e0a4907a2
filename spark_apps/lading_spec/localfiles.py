"""Where a ``file://`` URI may point when a job runs in a pod: only under a prefix the cluster admin
listed, and never where the pod keeps its kernel views, devices or credentials.

A Spark pod can read files no tenant may see: ``/proc/1/environ`` holds the
connection Secret's keys, ``/var/run/secrets/kubernetes.io/serviceaccount/token``
the pod's ServiceAccount token, ``/etc/lading/kafka`` the mounted Kafka Secret. A
load that names one as its input (``format: json``, ``onError: continue``) would copy
it into ``rejectedRows``. So, checked on both sides:

- **the operator** (``lading_operator.policy``) refuses a policy whose ``file://``
  prefix lies under, or contains, a :data:`FORBIDDEN` directory (at start-up), and a
  spec naming such a path (naming the field), whatever the policy says;
- **the job** (``lading_jobs.storage``) opens ``file://`` URIs only under the
  prefixes the operator renders into :data:`PREFIXES_ENV` (the namespace's
  ``file://`` entries of the policy). In a pod (``KUBERNETES_SERVICE_HOST`` set) without
  that variable it opens none; outside a pod (``lading run`` on a laptop: no tenants)
  it opens any. The variable is the operator's: a tenant can set no ``LADING_*``
  variable (``lading_spec.envvars``), and leaving it out only takes ``file://`` away.

Paths compare after collapsing repeated slashes (``file:////proc`` opens ``/proc``);
``.`` and ``..`` segments are refused before this (``lading_operator.policy``, and
the job opens no such segment).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

PREFIXES_ENV = "LADING_FILE_PREFIXES"
"""The ``file://`` prefixes a job in a pod may use: a JSON list, set by the operator on every pod."""

# (directory, what it holds). /var/run is a link to /run in most images: both spellings.
FORBIDDEN: tuple[tuple[str, str], ...] = (
    ("/proc", "the kernel's view of every process, their environment (the connection Secret's keys) included"),
    ("/sys", "the kernel's and the devices' settings"),
    ("/dev", "the pod's devices"),
    ("/var/run/secrets", "the pod's ServiceAccount token and other mounted credentials"),
    ("/run/secrets", "the pod's ServiceAccount token and other mounted credentials"),
    ("/etc/lading", "the Secrets lading mounts into the pod (a StreamCopy's Kafka credentials)"),
)
_SLASHES = re.compile(r"/{2,}")


def path_of(uri: str) -> str:
    """The local path a ``file://`` URI opens, repeated slashes collapsed (as the kernel reads it)."""
    return _SLASHES.sub("/", uri.removeprefix("file://")) or "/"


def under(path: str, directory: str) -> bool:
    """Whether ``path`` is ``directory`` or lies below it (on a segment boundary)."""
    directory = directory.rstrip("/")
    return path == directory or path.startswith(directory + "/") or directory == ""


def forbidden(path: str) -> str | None:
    """Why ``path`` (or a path below it) may never be opened in a pod, or ``None``."""
    path = path_of(path)
    for directory, holds in FORBIDDEN:
        if under(path, directory):
            return f"{directory} holds {holds}"
    return None


def covers_forbidden(path: str) -> str | None:
    """Why a prefix ``path`` may never be allowed: it lies under a :data:`FORBIDDEN` directory, or
    holds one (``file:///`` and ``file:///var/`` hold ``/var/run/secrets``); else ``None``."""
    path = path_of(path)
    for directory, holds in FORBIDDEN:
        if under(path, directory) or under(directory, path):
            return f"{directory} holds {holds}"
    return None


def prefixes_from_env(environ: Mapping[str, str]) -> tuple[str, ...] | None:
    """The ``file://`` prefixes this process may open: ``None`` for any (outside a pod, nothing
    set), else the listed ones (none: no ``file://`` at all). Raise ``ValueError`` on a malformed
    value (the job must not guess)."""
    raw = environ.get(PREFIXES_ENV)
    if raw is None:
        return () if environ.get("KUBERNETES_SERVICE_HOST") else None
    try:
        value = json.loads(raw) if raw.strip() else []
    except ValueError:
        value = None
    if not isinstance(value, list) or not all(isinstance(p, str) and p.startswith("file:///") for p in value):
        raise ValueError(f"{PREFIXES_ENV}: expected a JSON list of file:/// prefixes, got {raw[:200]!r}")
    return tuple(value)


def render_prefixes(prefixes: tuple[str, ...] | list[str]) -> str:
    """The value of :data:`PREFIXES_ENV` for ``prefixes`` (the ``file://`` ones are kept)."""
    return json.dumps([p for p in prefixes if p.lower().startswith("file://")])
