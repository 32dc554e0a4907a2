"""Deterministic names for the objects the operator creates.

A child's name is a pure function of its parent and run
(``<name>-<kind>-<run id>-<attempt>``), so an operator that restarts mid-run finds
the SparkApplication it already made instead of making a second one. The kind is
part of it: a CopyJob and a Compaction of the same name in one namespace, scheduled
at the same slot, get two SparkApplications, not one they would both adopt. Names must be DNS-1035 labels (lowercase letters,
digits and ``-``, starting with a letter, at most 63 characters); long ones keep
a readable prefix and end in a hash of the whole, so distinct inputs stay distinct.
"""

from __future__ import annotations

import hashlib
import re

DNS1035_MAX = 63
# spark-operator names the driver pod ``<app>-driver``; keep that within 63 too.
APP_NAME_MAX = DNS1035_MAX - len("-driver")
_INVALID = re.compile(r"[^a-z0-9-]+")
DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def short_hash(text: str, length: int = 8) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def dns1035(text: str, max_length: int = DNS1035_MAX) -> str:
    """``text`` as a DNS-1035 label of at most ``max_length``; hash-suffixed when changed or too long."""
    clean = re.sub("-{2,}", "-", _INVALID.sub("-", text.lower())).strip("-")
    if not clean or not clean[0].isalpha():
        clean = "l-" + clean
    if clean == text and len(clean) <= max_length:
        return clean
    suffix = "-" + short_hash(text)
    return clean[: max_length - len(suffix)].rstrip("-") + suffix


def label_value(text: str) -> str:
    """A label value (<= 63 chars, alphanumerics, ``-``, ``_``, ``.``), hash-truncated when long."""
    if len(text) <= DNS1035_MAX and re.fullmatch(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]?", text):
        return text
    suffix = "-" + short_hash(text)
    return re.sub(r"[^A-Za-z0-9_.-]", "-", text)[: DNS1035_MAX - len(suffix)].rstrip("-_.") + suffix


def oneshot_run_id(uid: str, name: str) -> str:
    """The run id of a one-shot run: stable for the resource's lifetime."""
    return short_hash(uid or name)


def app_name(kind: str, resource_name: str, run_id: str, attempt: int) -> str:
    """The SparkApplication of one attempt of one run: ``<name>-<kind>-<run id>-<attempt>``.

    ``kind`` is the resource's kind (``CopyJob`` → ``copyjob``). Run ids and attempts
    hold no ``-``, so the last three segments tell kind, run and attempt apart and
    two resources of different kinds never share a name (long names end in a hash
    of the whole text instead).
    """
    return dns1035(f"{resource_name}-{kind.lower()}-{run_id}-{attempt}", APP_NAME_MAX)


def driver_pod_name(application: str) -> str:
    """The driver pod name spark-operator gives an application without ``driver.podName``."""
    return f"{application}-driver"
