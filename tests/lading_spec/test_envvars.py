"""Environment variables by exact name, never the unsafe ones (lading_spec.envvars)."""

from __future__ import annotations

import pytest

from lading_spec import envvars
from lading_spec.errors import SpecError
from lading_spec.sparkconf import parse_spark_conf

# The variables and their families: each runs code, redirects a name or a connection,
# or changes the pod's identity once a bash launcher, the loader, the JVM or Python starts.
PAYLOADS = ["BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND", "BASH_FUNC_ls%%", "IFS", "CDPATH",
            "GLOBIGNORE", "GLIBC_TUNABLES", "GCONV_PATH", "GETCONF_DIR", "HOSTALIASES", "LOCALDOMAIN", "LOCPATH",
            "MALLOC_TRACE", "NIS_PATH", "NLSPATH", "RESOLV_HOST_CONF", "RES_OPTIONS", "TMPDIR", "TZDIR",
            "LD_PRELOAD", "LD_AUDIT", "OPENSSL_CONF", "OPENSSL_ENGINES", "NSS_WRAPPER_HOSTS", "ALL_PROXY",
            "all_proxy", "HTTPS_PROXY", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "JAVA_OPTS", "JDK_JAVA_HOME", "PYTHONSTARTUP",
            "PYTHONPATH", "SPARK_JAVA_OPT_0", "SPARK_HOME", "AWS_ROLE_ARN", "LADING_RESULT", "PATH", "bash_env",
            "A.B", "1X", ""]


@pytest.mark.parametrize("prefix", envvars.ENV_KEYS)
@pytest.mark.parametrize("name", PAYLOADS)
def test_each_unsafe_variable_is_refused_under_every_prefix(prefix: str, name: str) -> None:
    key = prefix + name
    with pytest.raises(SpecError) as info:
        parse_spark_conf({key: "$(touch /tmp/pwned)"})
    assert info.value.field == f"spark.sparkConf.{key}"


@pytest.mark.parametrize("key", ["spark.ExecutorEnv.BASH_ENV", "spark.kubernetes.DriverEnv.PS4",
                                 "spark.YARN.appMasterEnv.GLIBC_TUNABLES"])
def test_prefixes_compare_ignoring_case(key: str) -> None:
    with pytest.raises(SpecError, match="never allowed"):
        parse_spark_conf({key: "x"})


@pytest.mark.parametrize(("name", "needle"), [
    ("BASH_ENV", "never allowed: BASH_ENV (BASH_ENV)"),
    ("ld_preload", "never allowed: ld_preload (LD_*)"),
    ("no_proxy", "(*_PROXY)"),
    ("A-B", "'A-B' is not a variable name"),
])
def test_errors_name_the_variable_and_the_entry(name: str, needle: str) -> None:
    why = envvars.never_allowed(name)
    assert why is not None and needle in why, why


@pytest.mark.parametrize("name", ["TZ", "TEAM", "LANG", "LC_ALL", "OMP_NUM_THREADS"])
def test_ordinary_variables_are_left_to_the_policy(name: str) -> None:
    assert envvars.never_allowed(name) is None
    assert parse_spark_conf({f"spark.executorEnv.{name}": "x"}) == {f"spark.executorEnv.{name}": "x"}
