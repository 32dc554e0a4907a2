"""Where a Kafka credential may travel: only to the brokers, protocol and SASL mechanism its Secret names.

A StreamCopy names its namespace's Kafka Secret (``source.kafka.secretRef``), which the
tenant may name but not read. librdkafka sends the Secret's ``sasl.username`` and
``sasl.password`` to whatever brokers it is told to use, in the clear under
``SASL_PLAINTEXT`` with ``PLAIN``. So the Secret says what it is for, in the same
one-key-per-property form as its credentials:

- ``bootstrap.servers``: the brokers (``host:port,host:port``) the credential belongs to;
  every ``source.kafka.bootstrapServers`` entry must be one of them;
- ``security.protocol``: the protocol; the spec's ``consumer`` map may repeat it, not change it;
- ``sasl.mechanism`` (or ``sasl.mechanisms``): for a ``SASL_*`` protocol, the mechanism;
  the spec may repeat it, not change it.

A Secret that carries a credential without these is refused: nobody said where it may go.
These are checked where the Secret is read, in the Spark app (:func:`binding_error`, called
by ``lading_jobs.stream.kafka.consumer_config`` on the driver and in every task); the
operator never reads the Secret. What the operator can check without it, it checks too
(:func:`weakening_error`, from ``lading_spec.streamcopy``): with a ``secretRef``, the spec's
``consumer`` map may not ask for a protocol without TLS, and may not set the properties that
decide whom TLS trusts or which address a name stands for (:data:`OWNER_PROPERTIES`):
those are the Secret owner's, and the Secret's own values win over the spec's anyway.

Broker addresses (:func:`broker_address_error`) get the S3 endpoints' checks: no cloud
metadata-service name, no link-local address in any spelling ``inet_aton`` reads. The Spark app
also resolves each broker's name and refuses one that answers a link-local address
(``lading_jobs.stream.kafka.check_broker_addresses``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from lading_spec.uris import METADATA_HOSTS, metadata_address

SECRET_FIELD = "the credentials Secret (source.kafka.secretRef)"
BOUND_BROKERS = "bootstrap.servers"
"""The Secret key naming the brokers its credential is for (the only broker key a Secret may hold)."""
PROTOCOL = "security.protocol"
MECHANISMS = ("sasl.mechanism", "sasl.mechanisms")
"""librdkafka's two spellings of one property: whichever a side uses, both are compared."""
TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})
OWNER_PROPERTIES = frozenset({
    "ssl.ca.location", "ssl.endpoint.identification.algorithm", "enable.ssl.certificate.verification",
    "ssl.cipher.suites", "ssl.curves.list", "ssl.sigalgs.list", "client.dns.lookup",
})
"""Consumer properties that decide whom TLS trusts (a CA, hostname and certificate checks, anonymous
cipher suites) or which address a broker name stands for (``client.dns.lookup``'s canonical names):
with a ``secretRef`` only the Secret may set them, so the spec cannot turn them against it."""
SAFE_VALUES = {"ssl.endpoint.identification.algorithm": "https", "enable.ssl.certificate.verification": "true",
               "client.dns.lookup": "use_all_dns_ips"}
"""The values of :data:`OWNER_PROPERTIES` that only restate librdkafka's safe default: a spec may say them."""
# A property whose name says it carries a credential (a password, secret, key, certificate or
# keystore, JAAS login, token): it belongs in the Secret named by source.kafka.secretRef.
CREDENTIAL_PROPERTY = re.compile(r"password|secret|\.pem|key|jaas|token|credentials", re.I)
CREDENTIAL_PROPERTIES = ("sasl.username", "sasl.password", "sasl.oauthbearer.config")
_BROKER = re.compile(r"^(?P<host>[^\s:/@\\\[\]]+):(?P<port>\d{1,5})$")


def is_credential_property(key: str) -> bool:
    """Whether the consumer property ``key`` carries a credential (it belongs in the Secret)."""
    return key in CREDENTIAL_PROPERTIES or bool(CREDENTIAL_PROPERTY.search(key))


def is_credential(key: str) -> bool:
    """Whether the Secret key ``key`` holds a credential (a CA, ``ssl.ca.*``, is not one)."""
    return is_credential_property(key) and not key.startswith("ssl.ca.")


def broker_host(server: str) -> str:
    """The host of ``host:port``, as compared: lower case, no trailing dot."""
    return server.rsplit(":", 1)[0].rstrip(".").lower()


def broker_address_error(server: object) -> str | None:
    """Why ``server`` cannot be a broker address, or ``None``: ``host:port`` with a port 1-65535,
    not a metadata-service name, not a link-local address (169.254.0.0/16, fe80::/10, AWS's
    fd00:ec2::254) in any spelling (``2852039166``, ``0xa9.0xfe.0xa9.0xfe``)."""
    m = _BROKER.match(server) if isinstance(server, str) else None
    if m is None:
        return f"expected host:port (a name or IPv4 address, a port), got {server!r}"
    if not 0 < int(m["port"]) < 65536:
        return f"port {m['port']} is not a TCP port (1-65535)"
    host = m["host"].rstrip(".").lower()
    if host in METADATA_HOSTS or metadata_address(host):
        return (f"{server!r} is the cloud's instance metadata service (a link-local address), never a Kafka "
                "broker: name the brokers, e.g. kafka-0.kafka:9092")
    return None


def _key(server: str) -> tuple[str, str]:
    return broker_host(server), server.rsplit(":", 1)[-1].lstrip("0") or "0"


def _mechanism(props: Mapping[str, str]) -> tuple[str, str] | None:
    """``(key, value)`` of the SASL mechanism ``props`` sets under either spelling."""
    for key in MECHANISMS:
        if props.get(key):
            return key, props[key]
    return None


def _owners(consumer: Mapping[str, str]) -> set[str]:
    """The :data:`OWNER_PROPERTIES` ``consumer`` sets to anything but their safe default."""
    return {k for k in OWNER_PROPERTIES & set(consumer) if consumer[k].lower() != SAFE_VALUES.get(k)}


def weakening_error(consumer: Mapping[str, str]) -> tuple[str, str] | None:
    """``(key, why)`` for the first ``consumer`` property that would weaken a Secret's connection
    (the spec has a ``secretRef``), or ``None``. The operator cannot read the Secret, so this asks
    only what no Secret could want from a tenant: a protocol without TLS, or the owner's TLS
    and name-resolution settings."""
    protocol = consumer.get(PROTOCOL)
    if protocol is not None and protocol.upper() not in TLS_PROTOCOLS:
        return PROTOCOL, (f"{protocol!r} sends the credentials of source.kafka.secretRef without TLS; with a "
                          "secretRef the spec may ask for SSL or SASL_SSL only (a Secret that is for a "
                          "plaintext listener says so itself, in its own security.protocol key)")
    for key in sorted(_owners(consumer)):
        return key, ("with a secretRef, whom TLS trusts and which address a broker name stands for are the "
                     f"Secret owner's: put {key} in the Secret named by source.kafka.secretRef, or remove it")
    return None


def binding_error(bootstrap: tuple[str, ...], consumer: Mapping[str, str], secret: Mapping[str, str]) -> str | None:
    """Why the Secret's properties ``secret`` may not go to ``bootstrap`` with the spec's
    ``consumer`` map, or ``None``. Names the field and the Secret's keys, never their values."""
    credentials = sorted(k for k in secret if is_credential(k))
    if not credentials:
        return None
    carries = f"{SECRET_FIELD} carries credentials ({', '.join(credentials)})"
    bound = [s.strip() for s in (secret.get(BOUND_BROKERS) or "").split(",") if s.strip()]
    if not bound:
        return (f"{carries} but no {BOUND_BROKERS} key saying which brokers they are for; its owner adds one "
                "(host:port,host:port) and lading sends them nowhere else")
    allowed = {_key(s) for s in bound}
    for i, server in enumerate(bootstrap):
        if _key(server) not in allowed:
            return (f"source.kafka.bootstrapServers[{i}]: {server!r} is not one of the brokers {SECRET_FIELD} "
                    f"is for (its {BOUND_BROKERS} key); its credentials go to those brokers only: use them, or "
                    "ask the Secret's owner")
    protocol = secret.get(PROTOCOL)
    if not protocol:
        return (f"{carries} but no {PROTOCOL} key saying how they are sent; its owner adds one "
                "(SASL_SSL, SSL, ...)")
    if consumer.get(PROTOCOL) is not None and consumer[PROTOCOL].upper() != protocol.upper():
        return (f"source.kafka.consumer.{PROTOCOL}: differs from the protocol {SECRET_FIELD} is for; remove it "
                "(the Secret's own applies)")
    if protocol.upper().startswith("SASL_"):
        mechanism = _mechanism(secret)
        if mechanism is None:
            return (f"{carries} for {PROTOCOL} {protocol.upper()} but no sasl.mechanism key saying which SASL "
                    "mechanism; its owner adds one (SCRAM-SHA-512, PLAIN, ...)")
        asked = _mechanism(consumer)
        if asked is not None and asked[1].upper() != mechanism[1].upper():
            return (f"source.kafka.consumer.{asked[0]}: differs from the SASL mechanism {SECRET_FIELD} is for; "
                    "remove it (the Secret's own applies)")
    for key in sorted(_owners(consumer)):
        if consumer[key] != secret.get(key):
            return (f"source.kafka.consumer.{key}: with a secretRef only the Secret may set it (whom TLS trusts, "
                    "which address a broker name stands for); remove it")
    return None


def secret_wins(consumer: Mapping[str, str], secret: Mapping[str, str]) -> dict[str, str]:
    """The spec's ``consumer`` map without what the Secret decides: its mechanism under either
    spelling (so ``sasl.mechanisms`` in the spec never outlives the Secret's ``sasl.mechanism``)."""
    out = dict(consumer)
    if _mechanism(secret) is not None:
        for key in MECHANISMS:
            out.pop(key, None)
    return out
