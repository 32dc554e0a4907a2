"""What tenants may make lading do, per namespace: storage prefixes, images, service accounts, Spark properties.

The cluster admin sets ``policy.*`` in the Helm values; the chart mounts it as a
YAML file and points ``LADING_POLICY_FILE`` at it::

    allowedPrefixes:
      default: ["s3://shared-exports/{namespace}/"]   # every namespace not listed
      namespaces:
        analytics: ["s3://analytics-lake/", "s3://shared-exports/analytics/"]
    images:            # spec.spark.image: exact references, or prefixes ending in / : or @
      default: []      # only the operator's own image
      namespaces: {ml: ["registry.corp/ml/"]}
    serviceAccounts:   # spec.spark.serviceAccount
      default: []      # only the chart's Spark ServiceAccount
      namespaces: {analytics: ["lading-spark", "analytics-reader"]}
    sparkConf:         # keys beyond the safe tuning list; "x." allows every key under x.
      namespaces: {gpu: ["spark.kubernetes.node.selector.", "spark.executorEnv.TZ"]}
    limits:            # caps on what spec.spark and sizing properties ask for (lading_operator.sizing),
      default: {executors: 10, cores: 4, memory: 16g, runs: 10}   # and on runs under way at once
    brokers:           # Kafka brokers a StreamCopy may name: host:port, or *.domain:port
      default: ["*.kafka.svc.cluster.local:9092"]
      namespaces: {analytics: ["kafka-0.corp:9093", "kafka-1.corp:9093"]}
    catalogs:          # Iceberg catalogs (endpoints) a CopyJob may name; no section: none
      declared:
        lake: {type: glue, properties: {glue.region: eu-west-1}}
      default: []
      namespaces: {analytics: [lake]}

Each section works like ``allowedPrefixes``: a listed namespace gets exactly its
list, any other gets ``default``, ``{namespace}`` stands for the namespace.

**Safe by default.** Without a policy file (``LADING_POLICY_FILE`` unset) the
operator applies :data:`DEFAULT_POLICY`, which is also what the chart's default
values render: every namespace may use ``s3://`` (any bucket its Secret reaches) and
no ``file://``, only the operator's image and Spark ServiceAccount, only safe tuning
properties, the sizing of a small job and ten runs under way at once per namespace
(:data:`DEFAULT_LIMITS`). Every widening is
an entry in the file (docs/security.md says what each costs).

Images and service accounts (pure, in :func:`check_spark`): a resource that sets
``spec.spark.image`` or ``spec.spark.serviceAccount`` to something other than the
operator's defaults needs an entry (a missing section allows only the defaults). Spark properties:
with or without a policy file, a key must be safe tuning
(:func:`lading_spec.sparkconf.is_safe`) or listed for the namespace; keys that
change where or as whom a job runs are refused by lading_spec whatever the
policy says, and a policy that lists one is refused at start-up. Environment
variables (``spark.executorEnv.TZ``, :mod:`lading_spec.envvars`) are allowed only by
their exact name: a prefix entry never covers one, and an entry that is a prefix of
variables (``spark.executorEnv.``) is refused at start-up.

Storage rules (pure, in :func:`check_uris`):

- no policy file: ``s3://`` only (:data:`DEFAULT_POLICY`);
- ``file://`` never reaches the pod's kernel views, devices or credentials
  (:mod:`lading_spec.localfiles`): a prefix under or holding ``/proc``, ``/sys``,
  ``/dev``, ``/var/run/secrets``, ``/run/secrets`` or ``/etc/lading`` is refused at
  start-up, and so is a spec naming such a path (naming the field), whatever the
  policy says. The namespace's ``file://`` prefixes also reach the job
  (:func:`file_prefixes_for`), which opens nothing outside them;
- a namespace listed under ``namespaces`` gets exactly its list (it replaces
  ``default``, it does not add to it); any other namespace gets ``default``;
  a missing ``default`` is the empty list: nothing is allowed;
- ``{namespace}`` in a prefix stands for the resource's namespace, so one
  ``default`` entry gives every tenant its own prefix; in a URI it is filled
  only where the job fills it (``TEMPLATE_FIELDS``: a CopyJob's ``to.files``);
  anywhere else the job takes ``{namespace}`` as written, a place every tenant
  would share, so it is checked as written (and refused by lading_spec first);
- a URI is allowed when a prefix matches it on a path boundary:
  ``s3://b/team`` allows ``s3://b/team`` and ``s3://b/team/x`` but never
  ``s3://b/team-evil/``; scheme and bucket compare case-insensitively;
- only the fixed part of a URI counts: a destination template
  (``{run_time:...}``, ``{run_id}``) or a glob (``*``, ``?``, ``[``) is cut off
  first, so whatever it expands to stays under the fixed part;
- a URI with a ``.`` or ``..`` path segment (also percent-encoded) is never
  allowed: it could climb out of its prefix on file:// storage.

Errors name the field, the value and what is allowed, so the user can fix the
spec (or ask the admin) without reading the policy file.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import yaml

from lading_operator import sizing
from lading_spec import catalogs as catalogs_spec
from lading_spec import envvars, kafkacreds, localfiles, sparkconf

_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_CUT = re.compile(r"[{*?\[]")
# The URI fields whose placeholders the job fills (lading_spec.templates): a CopyJob's
# destination. Every other URI is used as written, braces included.
TEMPLATE_FIELDS = frozenset({"spec.to.files"})


class PolicyError(ValueError):
    """The policy file is unreadable or malformed; the message names the field."""


@dataclass(frozen=True)
class Allowed:
    """One section of the policy: a ``default`` list and per-namespace lists that replace it."""

    default: tuple[str, ...] = ()
    namespaces: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def for_namespace(self, namespace: str) -> tuple[str, ...]:
        raw = self.namespaces.get(namespace, self.default)
        return tuple(p.replace("{namespace}", namespace) for p in raw)


DEFAULT_LIMITS = sizing.Limits(executors=4, cores=2, memory=8 * 1024**3, runs=10)
"""The caps without a policy file (and the chart's default ``policy.limits``): a small job, and ten
runs under way at once per namespace (:mod:`lading_operator.runslots`)."""
DEFAULT_PREFIXES = ("s3://",)
"""The storage without a policy file (and the chart's default ``policy.allowedPrefixes``)."""


@dataclass(frozen=True)
class Policy:
    """The allow-lists; the defaults are :data:`DEFAULT_POLICY`, what applies without a policy file."""

    default: tuple[str, ...] = DEFAULT_PREFIXES
    namespaces: dict[str, tuple[str, ...]] = field(default_factory=dict)
    images: Allowed = field(default_factory=Allowed)
    service_accounts: Allowed = field(default_factory=Allowed)
    spark_conf: Allowed = field(default_factory=Allowed)
    limits: sizing.Limits = DEFAULT_LIMITS
    limits_by_namespace: dict[str, sizing.Limits] = field(default_factory=dict)
    brokers: Allowed | None = None  # None: no brokers section (any broker the address checks pass)
    catalogs: Allowed = field(default_factory=Allowed)  # names of declared catalogs, per namespace
    declared_catalogs: dict[str, catalogs_spec.Catalog] = field(default_factory=dict)

    def limits_for(self, namespace: str) -> sizing.Limits:
        """The caps of ``namespace`` (a listed namespace gets exactly its own)."""
        return self.limits_by_namespace.get(namespace, self.limits)

    def prefixes_for(self, namespace: str) -> tuple[str, ...]:
        """The prefixes ``namespace`` may use, with ``{namespace}`` filled in."""
        return Allowed(self.default, self.namespaces).for_namespace(namespace)

    def catalogs_env(self, namespace: str) -> str:
        """The ``LADING_CATALOGS`` value for a job of ``namespace``: the declarations it may use ("": none)."""
        allowed = {n: self.declared_catalogs[n] for n in self.catalogs.for_namespace(namespace)
                   if n in self.declared_catalogs}
        return catalogs_spec.render(allowed) if allowed else ""

    def file_prefixes_for(self, namespace: str) -> tuple[str, ...]:
        """The ``file://`` prefixes of ``namespace``: all a job of it may open (``lading_spec.localfiles``)."""
        return tuple(p for p in self.prefixes_for(namespace) if p.lower().startswith("file://"))


DEFAULT_POLICY = Policy()
"""No policy file: ``s3://`` only, the operator's image and ServiceAccount, a small job's size."""


SECTIONS = ("allowedPrefixes", "images", "serviceAccounts", "sparkConf", "limits", "brokers", "catalogs")


def parse_policy(document: Any, source: str = "policy") -> Policy:
    """Build a :class:`Policy` from a parsed YAML document; raise naming the bad field."""
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise PolicyError(f"{source}: expected a mapping with keys {', '.join(SECTIONS)}")
    unknown = set(document) - set(SECTIONS)
    if unknown:
        raise PolicyError(f"{source}: unknown key(s) {sorted(unknown)}; the keys are {', '.join(SECTIONS)}")
    prefixes = _section(document, "allowedPrefixes", source, _prefix_list)
    return Policy(default=prefixes.default, namespaces=prefixes.namespaces,
                  images=_section(document, "images", source, _image_list),
                  service_accounts=_section(document, "serviceAccounts", source, _account_list),
                  spark_conf=_section(document, "sparkConf", source, _conf_list),
                  brokers=_brokers_section(document, source),
                  **_catalogs_section(document, source), **_limits(document, source))


def _limits(document: dict[str, Any], source: str) -> dict[str, Any]:
    """The ``limits`` section: caps per namespace (:mod:`lading_operator.sizing`)."""
    section = document.get("limits")
    section = {} if section is None else section
    if not isinstance(section, dict) or set(section) - {"default", "namespaces"}:
        raise PolicyError(f"{source}: limits must be a mapping with default and namespaces")
    namespaces = section.get("namespaces") or {}
    if not isinstance(namespaces, dict):
        raise PolicyError(f"{source}: limits.namespaces must map a namespace to its caps")
    try:
        return {"limits": sizing.parse_limits(section.get("default"), f"{source}: limits.default"),
                "limits_by_namespace": {str(ns): sizing.parse_limits(caps, f"{source}: limits.namespaces.{ns}")
                                        for ns, caps in namespaces.items()}}
    except ValueError as e:
        raise PolicyError(str(e)) from e


def _section(document: dict[str, Any], name: str, source: str, items: Any) -> Allowed:
    allowed = document.get(name)
    allowed = {} if allowed is None else allowed
    if not isinstance(allowed, dict):
        raise PolicyError(f"{source}: {name} must be a mapping with default and namespaces")
    unknown = set(allowed) - {"default", "namespaces"}
    if unknown:
        raise PolicyError(f"{source}: {name} has unknown key(s) {sorted(unknown)}; use default and namespaces")
    default = items(allowed.get("default"), f"{source}: {name}.default")
    namespaces_doc = allowed.get("namespaces") or {}
    if not isinstance(namespaces_doc, dict):
        raise PolicyError(f"{source}: {name}.namespaces must map a namespace to a list")
    namespaces = {str(ns): items(values, f"{source}: {name}.namespaces.{ns}") for ns, values in namespaces_doc.items()}
    return Allowed(default=default, namespaces=namespaces)


def _strings(value: Any, where: str, what: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) and v and not any(c.isspace() for c in v)
                                              for v in value):
        raise PolicyError(f"{where} must be a list of {what}")
    return list(value)


def _image_list(value: Any, where: str) -> tuple[str, ...]:
    return tuple(_strings(value, where, "image references or prefixes ending in /, : or @ (registry.corp/team/)"))


def _account_list(value: Any, where: str) -> tuple[str, ...]:
    out = _strings(value, where, "ServiceAccount names")
    for i, item in enumerate(out):
        if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", item.replace("{namespace}", "ns")):
            raise PolicyError(f"{where}[{i}]: {item!r} is not a ServiceAccount name")
    return tuple(out)


def _conf_list(value: Any, where: str) -> tuple[str, ...]:
    out = _strings(value, where, "Spark property names, or prefixes ending in '.'")
    for i, item in enumerate(out):
        if not sparkconf.KEY.match(item):
            raise PolicyError(f"{where}[{i}]: {item!r} is not a Spark property name (spark.…)")
        if item.endswith(".") and envvars.variable(item + "X") is not None:
            raise PolicyError(f"{where}[{i}]: {item!r} is a prefix of environment variables; name each "
                              "variable exactly (spark.executorEnv.TZ)")
        probe = item + "x" if item.endswith(".") else item
        why = sparkconf.never_allowed(probe, "")
        if why:
            raise PolicyError(f"{where}[{i}]: {item!r} can never be allowed ({why})")
    return tuple(out)


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
        if scheme == "file":
            _check_file_prefix(item, f"{where}[{i}]")
        out.append(item)
    return tuple(out)


def _check_file_prefix(item: str, where: str) -> None:
    """A ``file://`` prefix must be an absolute path away from the pod's kernel views and credentials."""
    rest = item.split("://", 1)[1]
    if not rest.startswith("/"):
        raise PolicyError(f"{where}: {item!r} must be an absolute file:/// path (three slashes)")
    why = localfiles.covers_forbidden(rest.replace("{namespace}", "ns"))
    if why:
        raise PolicyError(f"{where}: {item!r} can never be allowed: a job could read what {why}; list a "
                          "directory that holds only data, such as file:///data/{namespace}/")


def load_policy(path: str | None) -> Policy:
    """Read the policy file at ``path``; ``None`` or ``""`` means no file: :data:`DEFAULT_POLICY`.

    A path that is set but unreadable or malformed raises :class:`PolicyError`:
    the operator must not start with a policy it cannot enforce.
    """
    if not path:
        return DEFAULT_POLICY
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
    prefixes = policy.prefixes_for(namespace)
    for field_path, uri in uris:
        if isinstance(uri, str) and uri[:7].lower() == "file://":
            why = localfiles.forbidden(localfiles.path_of(_CUT.split(uri, maxsplit=1)[0]))
            if why:
                return (f"{field_path}: {uri!r} can never be read or written by a job: {why}; "
                        "name a file under a prefix the cluster admin allows")
        if not uri_allowed(uri, prefixes, namespace if field_path in TEMPLATE_FIELDS else None):
            if prefixes:
                allowed = ", ".join(prefixes)
                fix = f"allowed prefixes in namespace {namespace!r}: {allowed}"
            else:
                fix = f"no prefix is allowed in namespace {namespace!r}; ask the cluster admin to add one to policy.allowedPrefixes"
            return f"{field_path}: {uri!r} is outside the allowed storage ({fix})"
    return None


def uri_allowed(uri: str, prefixes: tuple[str, ...], namespace: str | None = None) -> bool:
    """True when the fixed part of ``uri`` lies under one of ``prefixes`` (pure).

    ``namespace``: ``uri`` is a destination template whose ``{namespace}`` the job fills
    with it; ``None``: the job uses ``uri`` as written, so nothing is filled in."""
    if not isinstance(uri, str) or "://" not in uri:
        return False
    if namespace is not None:
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


# What may follow a repository: a tag (and a digest), or a digest (the distribution spec's grammar).
_TAG = re.compile(r"[\w][\w.-]{0,127}(@[a-z0-9]+(?:[+._-][a-z0-9]+)*:[A-Za-z0-9=_-]+)?\Z")
_DIGEST = re.compile(r"[a-z0-9]+(?:[+._-][a-z0-9]+)*:[A-Za-z0-9=_-]+\Z")


def image_allowed(image: str, entries: tuple[str, ...]) -> bool:
    """An entry ending in ``/`` is a prefix; one ending in ``:`` or ``@``, or naming a repository
    without a tag or digest, allows that repository with any tag or digest; otherwise the
    reference must match exactly. What follows a repository must read as a tag or digest:
    ``python`` (or ``python:``) does not allow ``python:5000/evil/miner``, an image of another
    registry (host ``python``, port 5000)."""
    for entry in entries:
        if entry.endswith("/"):
            if image.startswith(entry):
                return True
        elif image == entry:
            return True
        elif entry.endswith((":", "@")) or _bare_repository(entry):
            repository, rest = entry.rstrip(":@"), image[len(entry.rstrip(":@")) + 1:]
            separator = image[len(repository):len(repository) + 1]
            if not image.startswith(repository) or separator not in (":", "@"):
                continue
            if (separator, entry[-1]) in ((":", "@"), ("@", ":")):  # an '@' entry takes no tag, ':' no digest
                continue
            if (_TAG if separator == ":" else _DIGEST).match(rest):
                return True
    return False


def _bare_repository(reference: str) -> bool:
    return "@" not in reference and ":" not in reference.rsplit("/", 1)[-1]


def check_spark(policy: Policy, namespace: str, spark: Any, default_image: str,
                default_service_account: str) -> str | None:
    """An error for the first ``spec.spark`` setting the policy forbids in ``namespace``, else None.

    ``spark`` is the raw ``spec.spark`` (already validated by ``render.parse_spark_options``).
    """
    spark = spark if isinstance(spark, dict) else {}
    image = spark.get("image")
    if isinstance(image, str) and image != default_image:
        allowed = policy.images.for_namespace(namespace)
        if not image_allowed(image, allowed):
            return (f"spec.spark.image: {image!r} is not an allowed image in namespace {namespace!r} "
                    f"({_allowed_text(allowed, default_image)}); remove it to use the operator's image, "
                    "or ask the cluster admin to add it to policy.images")
    account = spark.get("serviceAccount")
    if isinstance(account, str) and account != default_service_account:
        allowed = policy.service_accounts.for_namespace(namespace)
        if account not in allowed:
            return (f"spec.spark.serviceAccount: {account!r} is not allowed in namespace {namespace!r} "
                    f"({_allowed_text(allowed, default_service_account)}); remove it to use "
                    f"{default_service_account!r}, or ask the cluster admin to add it to policy.serviceAccounts")
    extra = policy.spark_conf.for_namespace(namespace)
    for key in sorted((spark.get("sparkConf") or {}) if isinstance(spark.get("sparkConf"), dict) else {}):
        if not conf_allowed(key, extra):
            more = f"; also allowed here: {', '.join(extra)}" if extra else ""
            return (f"spec.spark.sparkConf.{key}: not an allowed Spark property in namespace {namespace!r}: "
                    "every namespace may set tuning properties (spark.sql.shuffle.partitions, "
                    f"spark.sql.adaptive.*, spark.executor.memoryOverhead, ... see docs/security.md){more}; "
                    "remove it, or ask the cluster admin to add it to policy.sparkConf")
    return sizing.check_limits(policy.limits_for(namespace), spark)


def conf_allowed(key: str, extra: tuple[str, ...]) -> bool:
    """Safe tuning, or listed for the namespace (an entry ending in ``.`` is a prefix, except for
    environment variables: those only by their exact name)."""
    if sparkconf.is_safe(key):
        return True
    if envvars.variable(key) is not None:
        return key in extra
    return any(key == e or (e.endswith(".") and key.startswith(e)) for e in extra)


def _allowed_text(allowed: tuple[str, ...], default: str) -> str:
    return "allowed: " + ", ".join((default, *allowed))


def check_resource(policy: Policy, namespace: str, uris: list[tuple[str, str]], spark: Any,
                   default_image: str, default_service_account: str) -> str | None:
    """The policy's verdict on one resource: its storage URIs, then its ``spec.spark``."""
    brokers = [(f, u) for f, u in uris if f.startswith(BROKERS_FIELD)]
    names = [(f, u) for f, u in uris if is_catalog_field(f)]
    uris = [(f, u) for f, u in uris if not f.startswith(BROKERS_FIELD) and not is_catalog_field(f)]
    return (check_brokers(policy, namespace, brokers) or check_catalogs(policy, namespace, names)
            or check_uris(policy, namespace, uris)
            or check_spark(policy, namespace, spark, default_image, default_service_account))


# --- Kafka brokers (issue 41: a credential goes only where its owner said) ---------------------
#
# ``brokers``: the Kafka brokers a namespace's StreamCopies may name in
# ``spec.source.kafka.bootstrapServers``, a section like the others (``default`` and
# ``namespaces``, ``{namespace}`` filled in). An entry is ``host:port`` or ``*.domain:port``
# (any host under ``domain``, on that port); hosts compare case-insensitively, without a
# trailing dot. No ``brokers`` section: any broker the address checks pass
# (:func:`lading_spec.kafkacreds.broker_address_error`); the Kafka Secret's own binding still
# decides where its credentials go (checked by the Spark app, which reads the Secret).

BROKERS_FIELD = "spec.source.kafka.bootstrapServers"
"""The field (``kinds.streamcopy_uris`` lists each broker under it) the ``brokers`` section checks."""


def _brokers_section(document: dict[str, Any], source: str) -> Allowed | None:
    return None if document.get("brokers") is None else _section(document, "brokers", source, _broker_list)


def _broker_list(value: Any, where: str) -> tuple[str, ...]:
    out = _strings(value, where, "Kafka brokers, host:port or *.domain:port")
    for i, item in enumerate(out):
        sample = item.replace("{namespace}", "ns")
        why = kafkacreds.broker_address_error("x" + sample[1:] if sample.startswith("*.") else sample)
        if why:
            raise PolicyError(f"{where}[{i}]: {item!r}: {why}")
    return tuple(out)


def broker_allowed(server: str, entries: tuple[str, ...]) -> bool:
    """Whether ``server`` (``host:port``) matches an entry: exactly, or ``*.domain:port`` for a
    host under ``domain`` (never ``domain`` itself, never ``evil-domain``)."""
    host, _, port = server.rpartition(":")
    host = host.rstrip(".").lower()
    for entry in entries:
        e_host, _, e_port = entry.rpartition(":")
        e_host = e_host.rstrip(".").lower()
        if e_port.lstrip("0") != port.lstrip("0"):
            continue
        if e_host.startswith("*."):
            if host.endswith(e_host[1:]) and len(host) > len(e_host) - 1:
                return True
        elif host == e_host:
            return True
    return False


def check_brokers(policy: Policy, namespace: str, brokers: list[tuple[str, str]]) -> str | None:
    """An error for the first (field, broker) the ``brokers`` section forbids in ``namespace``."""
    if policy.brokers is None:
        return None
    allowed = policy.brokers.for_namespace(namespace)
    for field_path, server in brokers:
        if not broker_allowed(server, allowed):
            fix = (f"allowed brokers in namespace {namespace!r}: {', '.join(allowed)}" if allowed else
                   f"no broker is allowed in namespace {namespace!r}")
            return (f"{field_path}: {server!r} is not an allowed Kafka broker ({fix}); name one of those, or ask "
                    "the cluster admin to add it to policy.brokers")
    return None


# --- Iceberg catalogs (issue 43: a catalog is an endpoint; tenants name one, never give one) -----
#
# ``catalogs``: ``declared`` maps a catalog name to its ``{type, properties}`` (pyiceberg's, without
# credentials: lading_spec.catalogs); ``default`` / ``namespaces`` list the names each namespace may
# use in ``spec.from.inputs[i].iceberg.catalog`` and ``spec.to.catalog.name``. No section, or a
# namespace with an empty list: no catalog. The job gets the declarations its namespace may use
# (``Policy.catalogs_env``, the ``LADING_CATALOGS`` variable) and no other.

CATALOG_FIELDS = (".iceberg.catalog", "spec.to.catalog.name")
"""The fields (``kinds.copyjob_uris`` lists each catalog name under one) the ``catalogs`` section checks."""


def is_catalog_field(field_path: str) -> bool:
    return field_path.endswith(CATALOG_FIELDS)


def _catalogs_section(document: dict[str, Any], source: str) -> dict[str, Any]:
    section = document.get("catalogs")
    if section is None:
        return {}
    if not isinstance(section, dict) or set(section) - {"declared", "default", "namespaces"}:
        raise PolicyError(f"{source}: catalogs must be a mapping with declared, default and namespaces")
    try:
        declared = catalogs_spec.parse_declarations(section.get("declared"), f"{source}: catalogs.declared")
    except catalogs_spec.CatalogConfigError as e:
        raise PolicyError(str(e)) from e

    def names(value: Any, where: str) -> tuple[str, ...]:
        out = _strings(value, where, "names of catalogs under catalogs.declared")
        for i, item in enumerate(out):
            if item not in declared:
                raise PolicyError(f"{where}[{i}]: {item!r} is not declared under catalogs.declared "
                                  f"(declared: {', '.join(sorted(declared)) or 'none'})")
        return tuple(out)

    allowed = _section({"catalogs": {k: v for k, v in section.items() if k != "declared"}}, "catalogs", source, names)
    return {"catalogs": allowed, "declared_catalogs": declared}


def check_catalogs(policy: Policy, namespace: str, names: list[tuple[str, str]]) -> str | None:
    """An error for the first (field, catalog name) the ``catalogs`` section does not allow in ``namespace``."""
    allowed = tuple(n for n in policy.catalogs.for_namespace(namespace) if n in policy.declared_catalogs)
    for field_path, name in names:
        if name not in allowed:
            fix = (f"catalogs allowed in namespace {namespace!r}: {', '.join(allowed)}" if allowed else
                   f"no catalog is allowed in namespace {namespace!r}")
            return (f"{field_path}: {name!r} is not an allowed Iceberg catalog ({fix}); name one of those, or ask "
                    "the cluster admin to declare it in policy.catalogs and allow it for the namespace")
    return None
