"""The Dockerfile, read statically (tests/node builds and runs the image, off by default).

It must install the exact locked dependencies the tests use, copy only paths that
exist (and that .dockerignore lets through), build from Debian's bookworm-slim alone,
and run as a non-root user; the paths the job contract names must be where it puts them.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with line continuations joined and comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = pending + line
        pending = ""
        word, _, rest = full.partition(" ")
        out.append((word.upper(), rest.strip()))
    assert not pending, "Dockerfile ends inside a continued line"
    return out


@dataclass
class Stage:
    image: str
    name: str | None
    body: list[tuple[str, str]] = field(default_factory=list)

    def args(self, instruction: str) -> list[str]:
        return [rest for word, rest in self.body if word == instruction]


def stages() -> list[Stage]:
    result: list[Stage] = []
    for word, rest in instructions():
        if word == "FROM":
            parts = rest.split()
            name = parts[2] if len(parts) >= 3 and parts[1].upper() == "AS" else None
            result.append(Stage(parts[0], name))
        else:
            assert result, f"{word} before FROM"
            result[-1].body.append((word, rest))
    return result


def test_only_public_base_is_debian_bookworm_slim() -> None:
    """Nothing but Debian's base image: `docker build` needs only public images, and scripts/image can
    make this one itself (debootstrap) where no registry is reachable."""
    st = stages()
    assert len(st) >= 2
    names = {s.name for s in st if s.name}
    bases = {s.image for s in st if s.image not in names}
    assert bases == {"debian:bookworm-slim"}


def test_runtime_is_debians_python_jre_and_tini_with_our_entrypoint() -> None:
    final = stages()[-1]
    runs = " ".join(final.args("RUN"))
    for package in ("python3", "openjdk-17-jre-headless", "tini"):
        assert re.search(rf"apt-get install[^&]*\b{re.escape(package)}\b", runs), package
    assert "--no-install-recommends" in runs
    # the image refuses to build with a compiler in it, and checks its pinned set
    assert "a compiler is in the image" in runs and "pip check" in runs
    copies = [shlex.split(rest) for rest in final.args("COPY")]
    assert ["docker/entrypoint.sh", "/opt/lading/entrypoint.sh"] in copies
    assert final.args("ENTRYPOINT") == ['["/usr/bin/tini", "-g", "--", "/opt/lading/entrypoint.sh"]']
    assert not any(a.startswith("--from=") and "spark" in a for c in copies for a in c)


def test_entrypoint_honours_sparks_pod_contract() -> None:
    """The modes and variables Spark's Kubernetes backend relies on (its pods set them; see
    docker/entrypoint.sh), and no write to /etc/passwd."""
    script = (ROOT / "docker" / "entrypoint.sh").read_text()
    for word in ("driver)", "executor)", "SPARK_DRIVER_BIND_ADDRESS", "SPARK_DRIVER_URL", "SPARK_EXECUTOR_ID",
                 "SPARK_EXECUTOR_CORES", "SPARK_EXECUTOR_MEMORY", "SPARK_APPLICATION_ID", "SPARK_EXECUTOR_POD_IP",
                 "SPARK_EXECUTOR_POD_NAME", "SPARK_RESOURCE_PROFILE_ID", "SPARK_JAVA_OPT_", "SPARK_CLASSPATH",
                 "SPARK_EXTRA_CLASSPATH", "KubernetesExecutorBackend", "--deploy-mode client", "HADOOP_USER_NAME",
                 "-Duser.name", "NSS_WRAPPER_PASSWD"):
        assert word in script, word
    assert ">> /etc/passwd" not in script and "> /etc/passwd" not in script
    assert (ROOT / "docker" / "entrypoint.sh").stat().st_mode & 0o111, "the entrypoint must be executable"


def test_installs_the_locked_dependencies() -> None:
    runs = " ".join(rest for word, rest in instructions() if word == "RUN")
    # pyproject's dependencies, constrained by the lock the tests use ...
    assert "--constraint requirements.lock" in runs
    assert "['project']['dependencies']" in runs
    # ... and the build fails if anything installed is not pinned there.
    assert "pip check" in runs
    # case-insensitively: pip freeze spells a name as its metadata does (SQLAlchemy==2.1.9), the
    # lock in lower case (sqlalchemy==2.1.9); a case-sensitive grep failed every build with SQLAlchemy
    assert "grep -ivxFf requirements.lock installed.txt" in runs
    copies = [rest for word, rest in instructions() if word == "COPY"]
    assert any("requirements.lock" in c.split() for c in copies)
    # nothing installs around the lock
    for word, rest in instructions():
        if word == "RUN" and "pip install" in rest:
            for cmd in rest.split("&&"):
                if "pip install" in cmd:
                    assert "--constraint requirements.lock" in cmd, cmd


def test_the_lock_pins_every_runtime_dependency_pyspark_included() -> None:
    lock = {
        line.split("==")[0].lower().replace("_", "-"): line.split("==")[1].strip()
        for line in (ROOT / "requirements.lock").read_text().splitlines()
        if "==" in line and not line.startswith("#")
    }
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for dep in deps:
        name = re.split(r"[<>=!~ ;\[]", dep, maxsplit=1)[0].lower().replace("_", "-")
        assert name in lock, f"{dep} is a runtime dependency but requirements.lock does not pin it"
    # the Spark the image runs is the Spark the tests run
    import pyspark

    assert lock["pyspark"] == pyspark.__version__
    env = " ".join(rest for word, rest in instructions() if word == "ENV")
    assert "SPARK_HOME=/opt/venv/lib/python3.11/site-packages/pyspark" in env


def dockerignore_allows(path: str) -> bool:
    allowed = False
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = line[1:] if negate else line
        if fnmatch.fnmatch(path, pattern) or path.startswith(pattern.rstrip("/") + "/"):
            allowed = negate
    return allowed


def test_every_copy_source_exists_and_is_not_dockerignored() -> None:
    checked = 0
    for word, rest in instructions():
        if word not in ("COPY", "ADD"):
            continue
        assert word == "COPY", "use COPY, not ADD"
        args = shlex.split(rest)
        if any(a.startswith("--from=") for a in args):
            continue
        sources = [a for a in args if not a.startswith("--")][:-1]
        for src in sources:
            assert (ROOT / src).exists(), f"COPY {src}: no such path in the repository"
            assert dockerignore_allows(src), f"COPY {src}: excluded by .dockerignore"
            checked += 1
    assert checked >= 4


def test_contract_paths() -> None:
    final = stages()[-1]
    copies = [shlex.split(rest) for rest in final.args("COPY")]
    assert ["spark_apps", "/opt/lading/spark_apps"] in copies
    assert (ROOT / "spark_apps" / "lading_jobs").is_dir()
    env = " ".join(final.args("ENV"))
    pythonpath = re.search(r"PYTHONPATH=(\S+)", env)
    assert pythonpath and "/opt/lading/spark_apps" in pythonpath.group(1).split(":")
    assert "/opt/lading/operator" in pythonpath.group(1).split(":")
    assert ["operator", "/opt/lading/operator"] in copies
    assert (ROOT / "operator" / "lading_operator" / "__init__.py").is_file()
    assert re.search(r"PYSPARK_PYTHON=/opt/venv/bin/python\b", env)
    # no image-wide Arrow memory pool: lading_jobs.session sets the workers' per job kind
    assert "ARROW_DEFAULT_MEMORY_POOL" not in env


def test_runs_as_non_root() -> None:
    users = stages()[-1].args("USER")
    assert users, "the final stage must set USER"
    user = users[-1].split(":")[0]
    assert user.isdigit() and int(user) != 0, "USER must be a numeric non-root UID (runAsNonRoot checks it)"
    # and the chart runs the pod as the same UID
    values = (ROOT / "charts" / "lading" / "values.yaml").read_text()
    assert re.search(rf"runAsUser: {user}\b", values)


def test_operator_command_matches_the_chart() -> None:
    cmd = stages()[-1].args("CMD")
    assert cmd == ['["python", "-m", "lading_operator"]']
    deployment = (ROOT / "charts" / "lading" / "templates" / "deployment.yaml").read_text()
    assert 'command: ["python", "-m", "lading_operator"]' in deployment


def test_python_bytecode_is_compiled_into_the_image() -> None:
    """Pods run on a read-only root with PYTHONDONTWRITEBYTECODE: bytecode the image lacks is
    compiled again by every Python process at every start. The venv's is compiled after pip's
    (timestamp-based) caches are removed, hash-based; our code's after it is copied, checked
    against the source's hash (a derived image's sources never run stale bytecode)."""
    build, final = stages()[0], stages()[-1]
    runs = build.args("RUN")
    cleaned = next(i for i, r in enumerate(runs) if "-name __pycache__" in r and "rm -rf" in r)
    compiled = next(i for i, r in enumerate(runs)
                    if "compileall" in r and "--invalidation-mode unchecked-hash /opt/venv/lib/python3.11/site-packages" in r)
    assert compiled > cleaned
    body = final.body
    ours = next(i for i, (w, r) in enumerate(body) if w == "RUN" and "--invalidation-mode checked-hash /opt/lading" in r)
    copied = [i for i, (w, r) in enumerate(body) if w == "COPY" and shlex.split(r)[-1].startswith("/opt/lading/")
              and shlex.split(r)[0] in ("spark_apps", "operator", "lading")]
    assert len(copied) == 3 and max(copied) < ours
    # the same RUN still checks the image (pip check, the imports, no compiler)
    assert "pip check" in body[ours][1] and "a compiler is in the image" in body[ours][1]
    env = " ".join(final.args("ENV"))
    assert "PYTHONDONTWRITEBYTECODE=1" in env  # pods never write it; the image has it


def test_the_spark_cds_archive_is_made_in_the_image_before_our_code() -> None:
    """docker/spark_cds.sh makes /opt/lading/cds/spark.jsa through the entrypoint's driver mode
    (so with the class path the pods' JVMs get), after the entrypoint and before our code (the
    archive depends on the JRE, Spark's jars and the entrypoint: it stays cached while code changes)."""
    body = stages()[-1].body
    copies = {shlex.split(r)[-1]: i for i, (w, r) in enumerate(body) if w == "COPY"}
    built = next(i for i, (w, r) in enumerate(body) if w == "RUN" and "/opt/lading/cds/build.sh" in r)
    assert copies["/opt/lading/entrypoint.sh"] < built and copies["/opt/lading/cds/build.sh"] < built
    assert copies["/opt/lading/cds/workload.py"] < built < copies["/opt/lading/spark_apps"]
    assert ["docker/spark_cds.sh", "/opt/lading/cds/build.sh"] in [shlex.split(r) for w, r in body if w == "COPY"]
    script = (ROOT / "docker" / "spark_cds.sh").read_text()
    assert "out=/opt/lading/cds" in script and '"$out/spark.jsa"' in script
    assert "LADING_SPARK_CDS_DUMP=" in script and "/opt/lading/entrypoint.sh driver" in script
    assert (ROOT / "docker" / "spark_cds.sh").stat().st_mode & 0o111, "the build script must be executable"


def test_the_entrypoint_maps_the_archive_with_a_fixed_class_path_and_a_switch() -> None:
    script = (ROOT / "docker" / "entrypoint.sh").read_text()
    assert "cds_archive=/opt/lading/cds/spark.jsa" in script
    # a JVM that cannot map it runs without it; a user can turn it off
    assert '"-XX:SharedArchiveFile=$cds_archive" "-Xshare:auto"' in script
    assert '"${LADING_SPARK_CDS:-1}" != 0' in script
    # Spark's jars one by one (jars/* is expanded in directory order, which differs by filesystem)
    assert "local LC_ALL=C" in script and '"$SPARK_HOME"/jars/*.jar' in script
    assert '"spark.driver.extraClassPath=$spark_jars"' in script  # the driver's: ahead of the conf dir
    assert '"$JAVA_HOME/bin/java" "${cds_opts[@]}" "${java_opts[@]}"' in script  # the user's options win
    # no interpreter started to decide whether to wrap the driver
    assert "python -c" not in script and "on_python_path lading_jobs/driver_pod.py" in script
    assert "LADING_SPARK_CDS" in (ROOT / "docs" / "install.md").read_text()


def test_the_csv_extension_is_compiled_in_the_build_stage_and_copied_into_the_runtime() -> None:
    """lading_jobs.formats._csvlines, the CSV encoder's C part: compiled by scripts/build-native in
    the build stage (gcc and the headers there only) for Debian's python3, the runtime venv's
    interpreter; the runtime stage copies the .so over `COPY spark_apps` and imports it. A .so
    built in the work tree never reaches the image (.dockerignore)."""
    build, final = stages()[0], stages()[-1]
    assert build.name == "build"
    runs = build.args("RUN")
    installs = next(r for r in runs if re.search(r"apt-get install[^&]*\bgcc\b", r))
    for package in ("gcc", "libc6-dev", "python3-dev"):
        assert re.search(rf"apt-get install[^&]*--no-install-recommends[^&]*\b{re.escape(package)}\b", installs), package
    source = "spark_apps/lading_jobs/formats/_csvlines.c"
    copies = [shlex.split(r) for w, r in build.body if w == "COPY"]
    assert ["scripts/build-native", "scripts/build-native"] in copies and [source, source] in copies
    body = build.body
    copied = max(i for i, (w, r) in enumerate(body) if w == "COPY" and shlex.split(r)[0] in (source, "scripts/build-native"))
    compiled = next(i for i, (w, r) in enumerate(body) if w == "RUN" and "scripts/build-native" in r)
    assert copied < compiled and "PYTHON=python3 " in body[compiled][1]
    # after the venv's layers: a change to the C source leaves them cached
    venv = next(i for i, (w, r) in enumerate(body) if w == "RUN" and "python3 -m venv /opt/venv" in r)
    assert venv < compiled
    body = final.body
    so = [i for i, (w, r) in enumerate(body) if w == "COPY" and shlex.split(r)[:2] == [
        "--from=build", "/src/spark_apps/lading_jobs/formats/_csvlines*.so"]]
    assert len(so) == 1 and shlex.split(body[so[0]][1])[-1] == "/opt/lading/spark_apps/lading_jobs/formats/"
    spark_apps = next(i for i, (w, r) in enumerate(body) if w == "COPY" and shlex.split(r)[0] == "spark_apps")
    checked = next(i for i, (w, r) in enumerate(body) if w == "RUN" and "a compiler is in the image" in r)
    assert spark_apps < so[0] < checked and "lading_jobs.formats._csvlines" in body[checked][1]
    assert not any("gcc" in r for r in final.args("RUN") if "apt-get install" in r)
    # the work tree's own .so stays out of the build context; the script goes in
    assert not dockerignore_allows("spark_apps/lading_jobs/formats/_csvlines.cpython-311-x86_64-linux-gnu.so")
    assert dockerignore_allows("scripts/build-native") and dockerignore_allows(source)
    assert "*.so" in (ROOT / ".gitignore").read_text().split()
    script = (ROOT / "scripts" / "build-native").read_text()
    assert "set -euo pipefail" in script and "sysconfig" in script and "EXT_SUFFIX" in script
    assert (ROOT / "scripts" / "build-native").stat().st_mode & 0o111, "scripts/build-native must be executable"
