"""docs/install.md works as written, as far as this machine can show.

- every ``helm`` and ``kubectl`` command in its code blocks names a real subcommand,
  and every flag it uses is one that subcommand (or the tool, globally) accepts —
  asked of the real binaries' ``--help``;
- every ``--set`` / ``--set-string`` of ``charts/lading`` is a value of values.yaml;
- the documented ``kubectl apply``, ``kubectl create/label namespace`` and ``helm install
  lading ...`` run as written against a real control plane (kube-apiserver 1.36: the CRDs
  Established, ``kubectl wait`` for them, the Spark ServiceAccount in the job namespace, the
  image reaching the operator and, through its environment, the SparkApplications), and
  the NOTES say whether spark-operator and its webhook are there.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.fixtures import Kube, control_plane, crd_files, load_crds

REPO = Path(__file__).resolve().parents[2]
GUIDE = REPO / "docs" / "install.md"
_FENCE = re.compile(r"^```(bash|sh|shell)\n(.*?)^```", re.M | re.S)
KUBECTL_VALUE_FLAGS = {"-n", "--namespace", "--kubeconfig", "--context"}


def helm_bin() -> str:
    local = REPO / ".tools" / "bin" / "helm"
    return str(local) if local.exists() else "helm"


def commands(text: str) -> list[list[str]]:
    """Every command line of the bash blocks: continuations joined, comments dropped, split on &&/;."""
    out = []
    for block in _FENCE.finditer(text):
        for line in block.group(2).replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            current: list[str] = []
            for word in [*words, ";"]:
                if word in ("&&", ";", "||", "|"):
                    if current:
                        out.append(current)
                    current = []
                else:
                    current.append(word)
    return out


def flags(argv: list[str]) -> list[str]:
    return [w.split("=", 1)[0] for w in argv if re.match(r"^--?[A-Za-z]", w)]


@cache
def help_text(tool: str, path: tuple[str, ...]) -> str | None:
    binary = helm_bin() if tool == "helm" else "kubectl"
    out = subprocess.run([binary, *path, "--help"], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        return None
    usage = re.search(r"Usage:\s*\n\s*(.+)", out.stdout)
    if path and (usage is None or not usage.group(1).startswith(" ".join([tool, *path]))):
        return None  # not a subcommand: the tool printed its parent's help
    text = out.stdout
    if tool == "kubectl":
        text += subprocess.run(["kubectl", "options"], capture_output=True, text=True, timeout=60).stdout
    return text


def subcommand(argv: list[str]) -> tuple[tuple[str, ...], list[str]]:
    """The longest subcommand path the tool knows, and the rest of the words."""
    tool, words = argv[0], list(argv[1:])
    if tool == "kubectl":  # global flags with a value may come first (kubectl -n ns get ...)
        while words and words[0] in KUBECTL_VALUE_FLAGS:
            words = words[2:]
    path: tuple[str, ...] = ()
    while words and not words[0].startswith("-") and help_text(tool, (*path, words[0])) is not None:
        path, words = (*path, words[0]), words[1:]
    return path, words


def accepted(tool: str, path: tuple[str, ...]) -> set[str]:
    text = help_text(tool, path) or ""
    return set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", text))


def problems(text: str) -> list[str]:
    wrong = []
    for argv in commands(text):
        if argv[0] not in ("helm", "kubectl"):
            continue
        path, rest = subcommand(argv)
        group = "Available Commands:" in (help_text(argv[0], path) or "")
        if not path or (group and rest and not rest[0].startswith("-")):
            wrong.append(f"{argv[0]} {' '.join([*path, *rest[:1]])}: no such subcommand")
            continue
        ok = accepted(argv[0], path)
        wrong += [f"{argv[0]} {' '.join(path)} {f}: no such flag" for f in flags(argv) if f not in ok]
    return wrong


def test_every_helm_and_kubectl_command_and_flag_exists() -> None:
    found = {(argv[0], subcommand(argv)[0]) for argv in commands(GUIDE.read_text()) if argv[0] in ("helm", "kubectl")}
    # the check sees the commands a platform engineer runs, in the order of the page
    assert {("helm", ("install",)), ("helm", ("upgrade",)), ("helm", ("get", "values")), ("helm", ("repo", "add")),
            ("kubectl", ("create", "namespace")), ("kubectl", ("rollout", "status")),
            ("kubectl", ("create", "secret", "generic")), ("kubectl", ("wait",))} <= found
    assert problems(GUIDE.read_text()) == []


def test_the_check_catches_a_wrong_flag_and_a_wrong_subcommand() -> None:
    probe = ("```bash\nhelm upgrade x charts/lading --reuse-values --reset-and-reuse-values\n"
             "kubectl -n a rollout stat deployment/x\nkubectl get pods --watch-only -o name\n```\n")
    assert problems(probe) == ["helm upgrade --reset-and-reuse-values: no such flag",
                               "kubectl rollout stat: no such subcommand"]


def chart_values() -> dict[str, Any]:
    return dict(yaml.safe_load((REPO / "charts" / "lading" / "values.yaml").read_text()))


def lading_installs(text: str) -> list[list[str]]:
    return [a for a in commands(text) if a[:2] in (["helm", "install"], ["helm", "upgrade"]) and "charts/lading" in a]


def test_chart_values_set_on_the_command_line_exist() -> None:
    runs = lading_installs(GUIDE.read_text())
    assert runs
    for argv in runs:
        for flag, value in zip(argv, argv[1:], strict=False):
            if flag in ("--set", "--set-string"):
                node: Any = chart_values()
                for key in value.split("=", 1)[0].split("."):
                    assert isinstance(node, dict) and key in node, f"{' '.join(argv)}: {value}"
                    node = node[key]


# --- the documented install, run ------------------------------------------------------------

WEBHOOK = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
           "metadata": {"name": "spark-operator-webhook"},
           "webhooks": [{"name": "mutate--v1-pod.sparkoperator.k8s.io", "sideEffects": "None",
                         "admissionReviewVersions": ["v1"],
                         "clientConfig": {"service": {"name": "spark-operator-webhook-svc",
                                                      "namespace": "spark-operator"}}}]}


@pytest.fixture
def cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[Kube, Path]]:
    """A fresh real control plane: with spark-operator (its CRD and webhook) unless the param says not.

    lading's CRDs are not there: the documented commands install them."""
    with_spark_operator = getattr(request, "param", True)
    files = crd_files() if with_spark_operator else [f for f in crd_files() if "sparkoperator" not in f.name]
    theirs = [c for c in load_crds(files) if c["spec"]["group"] != "lading.io"]
    with control_plane(tmp_path / "control-plane", theirs) as kube:
        if with_spark_operator:
            kube.client.create(WEBHOOK, "mutatingwebhookconfigurations")
        yield kube, Path(kube.kubeconfig)


def run(argv: list[str], kube: Kube, kubeconfig: Path) -> str:
    """Run a documented command, as written, against the real API server; its stdout."""
    binary = helm_bin() if argv[0] == "helm" else "kubectl"
    out = subprocess.run([binary, *argv[1:], "--kubeconfig", str(kubeconfig)],
                         capture_output=True, text=True, timeout=180, cwd=REPO)
    assert out.returncode == 0, f"{' '.join(argv)}:\n{out.stderr}"
    return out.stdout


def section(title: str, until: str) -> str:
    text = GUIDE.read_text()
    return text[text.index(title):text.index(until)]


def documented_install() -> list[list[str]]:
    """The CRDs as the Upgrade section applies them, then steps 3 and 4 as written."""
    crds = [a for a in commands(section("## Upgrade", "## Uninstall")) if a[:3] == ["kubectl", "apply", "--server-side"]]
    steps = [a for a in commands(section("### 3. Create the job namespaces", "### 5. Credentials"))
             if a[:3] in (["kubectl", "create", "namespace"], ["kubectl", "label", "namespace"],
                          ["helm", "install", "lading"])]
    assert len(crds) == 1 and [a[:3] for a in steps][-1] == ["helm", "install", "lading"]
    return crds + steps


def release_manifest(kube: Kube, kubeconfig: Path) -> list[dict[str, Any]]:
    manifest = run(["helm", "get", "manifest", "lading", "--namespace", "lading-system"], kube, kubeconfig)
    return [d for d in yaml.safe_load_all(manifest) if d]


def test_the_documented_install_runs(cluster: tuple[Kube, Path]) -> None:
    kube, kubeconfig = cluster
    stdout = [run(argv, kube, kubeconfig) for argv in documented_install()][-1]
    # the check the guide gives after installing (rollout status needs a kubelet: not here)
    checks = [a for a in commands(section("### 4. Install lading", "### 5. Credentials")) if a[:2] == ["kubectl", "get"]]
    assert checks and all(run(argv, kube, kubeconfig) for argv in checks)
    run(["kubectl", "wait", "--for=condition=Established", "--timeout=60s", "crd/copyjobs.lading.io",
         "crd/streamcopies.lading.io", "crd/compactions.lading.io"], kube, kubeconfig)
    objects = release_manifest(kube, kubeconfig)
    accounts = {(o["metadata"]["namespace"], o["metadata"]["name"]) for o in objects if o["kind"] == "ServiceAccount"}
    assert ("analytics", "lading-spark") in accounts
    assert kube.client.get_or_none("v1", "serviceaccounts", "analytics", "lading-spark") is not None
    labels = kube.client.get("v1", "namespaces", None, "analytics")["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    assert deployment["metadata"]["name"] == "lading-operator"  # what `rollout status deployment/...` names
    assert kube.client.get_or_none("apps/v1", "deployments", "lading-system", "lading-operator") is not None
    assert "deployment/lading-operator" in GUIDE.read_text()
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert container["image"] == env["LADING_SPARK_IMAGE"] == "registry.example.com/data/lading:0.1.0"
    # NOTES: spark-operator and its webhook are there, so no install instructions for it
    notes = stdout[stdout.index("NOTES:"):]
    assert "The Kubeflow Spark operator is installed" in notes and "helm install spark-operator" not in notes
    assert "webhook was NOT found" not in notes


@pytest.mark.parametrize("cluster", [False], indirect=True)
def test_notes_say_how_to_install_spark_operator_when_it_is_missing(cluster: tuple[Kube, Path]) -> None:
    kube, kubeconfig = cluster
    notes = [run(argv, kube, kubeconfig) for argv in documented_install()][-1]
    notes = notes[notes.index("NOTES:"):]
    assert "helm install spark-operator spark-operator/spark-operator" in notes
    assert "--set webhook.enable=true" in notes and "spark.jobNamespaces={analytics}" in notes
