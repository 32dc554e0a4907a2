"""The Dockerfile, read statically (nothing here can run `docker build`).

It must install the exact locked dependencies the tests use, copy only paths that
exist (and that .dockerignore lets through), pin every base image, and run as a
non-root user; the paths the job contract names must be where it puts them.
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


def test_multi_stage_with_pinned_bases() -> None:
    st = stages()
    assert len(st) >= 2
    names = {s.name for s in st if s.name}
    for s in st:
        image = s.image
        if image in names:
            continue  # FROM an earlier stage
        assert "@sha256:" in image or re.search(r":[^:]*\d+\.\d+\.\d+", image), (
            f"{image}: pin a full version tag (x.y.z) or a digest, never latest or a floating tag"
        )
        assert not image.endswith(":latest")


def test_spark_runtime_comes_from_the_official_apache_spark_image() -> None:
    spark = [s for s in stages() if s.image.startswith("apache/spark:")]
    assert len(spark) == 1
    name = spark[0].name
    final = stages()[-1]
    copies = final.args("COPY")
    assert any(f"--from={name} /opt/java/openjdk" in c for c in copies)
    assert any(f"--from={name}" in c and "/opt/entrypoint.sh" in c for c in copies)
    entry = final.args("ENTRYPOINT")
    assert entry == ['["/opt/entrypoint.sh"]']


def test_installs_the_locked_dependencies() -> None:
    runs = " ".join(rest for word, rest in instructions() if word == "RUN")
    # pyproject's dependencies, constrained by the lock the tests use ...
    assert "--constraint requirements.lock" in runs
    assert "['project']['dependencies']" in runs
    # ... and the build fails if anything installed is not pinned there.
    assert "pip check" in runs
    assert "grep -vxFf requirements.lock installed.txt" in runs
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
