"""Environment variables a tenant may set on the Spark pods: named exactly, never the unsafe ones.

A tenant sets variables through Spark properties (``spark.kubernetes.driverEnv.X``,
``spark.executorEnv.X``, ``spark.yarn.appMasterEnv.X``: :data:`ENV_KEYS`). Spark's
launchers and the image's entrypoint are bash scripts, the JVM and Python read
their own variables, and glibc reads many more before ``main``: one variable can
run code (``BASH_ENV=$(…)``, ``PS4``, ``SHELLOPTS``, ``GLIBC_TUNABLES``,
``OPENSSL_CONF``, ``JAVA_TOOL_OPTIONS``, ``PYTHONSTARTUP``), redirect a name
(``HOSTALIASES``, ``NSS_WRAPPER_HOSTS``) or a connection (``ALL_PROXY``), or change
the pod's identity or result (``AWS_*``, ``LADING_*``). So:

- a variable is allowed only by its **exact name** in the cluster admin's policy
  (``policy.sparkConf`` lists ``spark.executorEnv.TZ``; a prefix entry never covers
  a variable, and a policy entry naming a prefix of variables is refused);
- a name is a C identifier (``[A-Za-z_][A-Za-z0-9_]*``);
- a name in :data:`NEVER` is refused whatever the policy says, compared ignoring
  case. ``*`` in an entry stands for any characters: ``LD_*`` is every name starting
  with ``LD_``, ``*_PROXY`` every name ending with ``_PROXY``. The list holds
  glibc's ``unsecvars.h`` (the variables it drops for setuid programs), bash's
  start-up and prompt variables, the JVM's, Python's and Spark's own, and those
  that choose a TLS, name-service or proxy configuration.

docs/security.md shows :data:`NEVER` as written here; a test keeps the two equal.
"""

from __future__ import annotations

import fnmatch
import re

ENV_KEYS = ("spark.kubernetes.driverEnv.", "spark.executorEnv.", "spark.yarn.appMasterEnv.")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

NEVER: tuple[str, ...] = (
    # glibc unsecvars.h (and the loader's own LD_* family)
    "GCONV_PATH", "GETCONF_DIR", "GLIBC_TUNABLES", "HOSTALIASES", "LD_*", "LOCALDOMAIN", "LOCPATH",
    "MALLOC_*", "NIS_PATH", "NLSPATH", "RESOLV_HOST_CONF", "RES_OPTIONS", "TMPDIR", "TZDIR",
    # bash start-up, options, prompts and parsing
    "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PS1", "PS2", "PS3", "PS4", "PROMPT_COMMAND", "BASH_FUNC_*",
    "BASH_XTRACEFD", "BASH_COMPAT", "BASH_LOADABLES_PATH", "IFS", "CDPATH", "GLOBIGNORE", "HISTFILE",
    "EXECIGNORE", "INPUTRC", "SHELL", "HOME", "PATH", "MAIL*", "TERMINFO*",
    # TLS, name service and proxies
    "OPENSSL_*", "SSL_*", "NSS_WRAPPER_*", "*_PROXY", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
    "KRB5*", "GSS_*",
    # the JVM, Python, Spark, Hadoop, Kubernetes, the cloud identity and lading itself
    "JAVA_*", "_JAVA_OPTIONS", "JDK_*", "JVM_*", "CLASSPATH", "PYTHON*",
    "PYSPARK_*", "SPARK_*", "HADOOP_*", "YARN_*", "KUBERNETES_*", "AWS_*", "LADING_*",
)


def never_allowed(name: str) -> str | None:
    """Why the variable ``name`` may never be set, or ``None`` (then only the policy decides)."""
    if not NAME.fullmatch(name):
        return f"{name!r} is not a variable name: letters, digits and _, not starting with a digit"
    upper = name.upper()
    entry = next((e for e in NEVER if fnmatch.fnmatchcase(upper, e)), None)
    if entry is not None:
        return (f"never allowed: {name} ({entry}) runs or loads code in the pods' shells, loader, JVM or Python, "
                "redirects their names, connections or TLS, or changes their identity, endpoints or result")
    return None


def variable(key: str) -> str | None:
    """The variable a Spark property sets (``spark.executorEnv.TZ`` → ``TZ``), else ``None``.
    Spark reads these prefixes exactly; they compare ignoring case here, so no spelling slips by."""
    lowered = key.lower()
    for prefix in ENV_KEYS:
        if lowered.startswith(prefix.lower()):
            return key[len(prefix):]
    return None
