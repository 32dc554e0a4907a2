"""Pod Security "restricted" for every pod lading creates, whatever the spec says (pure).

The driver and executor pods get the restricted settings (:data:`RESTRICTED_POD_SECURITY_CONTEXT`,
:data:`RESTRICTED_SECURITY_CONTEXT`). A resource may set ``spec.spark.podSecurityContext`` and
``spec.spark.securityContext`` (a ``runAsUser`` or ``fsGroup`` its volumes need): its fields
are laid over those defaults, and a field that asks for more than "restricted" allows is
refused, not rewritten, with an error naming it (:data:`REFUSED` says which values). So the
rendered pods meet "restricted" even in a namespace whose Pod Security admission would let
more through.

docs/security.md lists :data:`REFUSED` as written here; a test keeps the two equal.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lading_spec.errors import SpecError

RESTRICTED_POD_SECURITY_CONTEXT: Mapping[str, Any] = {
    "runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
RESTRICTED_SECURITY_CONTEXT: Mapping[str, Any] = {
    "runAsNonRoot": True, "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"}}
# The only capability "restricted" lets a container add.
ADDABLE_CAPABILITIES = ("NET_BIND_SERVICE",)
SECCOMP_TYPES = ("RuntimeDefault", "Localhost")

# What either level may not ask for (field: the refused values), in the words of the docs.
REFUSED: tuple[str, ...] = (
    "runAsNonRoot: false",
    "runAsUser: 0",
    "seccompProfile.type: Unconfined",
    "allowPrivilegeEscalation: true",
    "capabilities.add: anything but NET_BIND_SERVICE",
    "capabilities.drop: a list without ALL",
)


def restricted(raw: Mapping[str, Any], path: str, pod_level: bool) -> dict[str, Any]:
    """``raw`` (a type-checked (pod) securityContext) over the restricted defaults; raise
    :class:`SpecError` naming the first field that asks for more than "restricted"."""
    for key, value in raw.items():
        where = f"{path}.{key}"
        if key == "runAsNonRoot" and value is not True:
            _refuse(where, value, "must be true (Pod Security restricted); remove it, the pods run as UID 185")
        if key == "runAsUser" and value == 0:
            _refuse(where, value, "root is not allowed (Pod Security restricted); use a non-zero UID such as 185")
        if key == "allowPrivilegeEscalation" and value is not False:
            _refuse(where, value, "must be false (Pod Security restricted); remove it")
        if key == "seccompProfile" and value.get("type") not in SECCOMP_TYPES:
            _refuse(f"{where}.type", value.get("type"),
                    f"accepted: {', '.join(SECCOMP_TYPES)} (Pod Security restricted)")
        if key == "capabilities":
            extra = [c for c in value.get("add") or [] if c not in ADDABLE_CAPABILITIES]
            if extra:
                _refuse(f"{where}.add", extra, f"only {', '.join(ADDABLE_CAPABILITIES)} may be added "
                        "(Pod Security restricted)")
            if "ALL" not in (value.get("drop") or []):
                _refuse(f"{where}.drop", value.get("drop"), "must include ALL (Pod Security restricted)")
    defaults = RESTRICTED_POD_SECURITY_CONTEXT if pod_level else RESTRICTED_SECURITY_CONTEXT
    return {**defaults, **raw}


def _refuse(where: str, value: object, why: str) -> None:
    raise SpecError(where, f"{value!r} is not allowed: {why}")
