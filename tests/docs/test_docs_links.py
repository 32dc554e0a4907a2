"""The docs point at things that exist: links, example files, repository paths, CLI flags, chart values.

Pure checks over the Markdown (no network, no Spark):

- every relative link in README.md, docs/**/*.md and examples/README.md resolves
  to a file in the repository, and a ``#fragment`` to a heading of its target
  (GitHub's anchor rules);
- every ``examples/*.yaml`` is listed in examples/README.md, and every example
  that README names exists;
- every repository path the docs mention (``scripts/demo``, ``bench/load.py``,
  ``examples/unload-*.yaml``, ...) exists (globs must match something);
- every ``--flag`` written after ``lading run`` / ``lading render`` /
  ``lading sample-data`` is one that subcommand accepts;
- every ``lading_spec`` / ``lading_jobs`` / ``lading_operator`` name in a code span
  imports;
- every Helm value the docs name (``watch.namespaces``, ``metrics.podMonitor.enabled``)
  is a key of charts/lading/values.yaml.
"""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DOCS = sorted([REPO / "README.md", REPO / "examples" / "README.md", *(REPO / "docs").rglob("*.md")])
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))

_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
_LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.M)
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$", re.M)
_HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")
# Paths in the repository that docs mention in prose or code: top-level folders we own.
_TOP = ("examples", "scripts", "bench", "charts", "crds", "gitops", "tests", "docs", "operator", "spark_apps")
_REPO_PATH = re.compile(r"(?<![\w/.:~-])((?:" + "|".join(_TOP) + r")/[\w.*?\[\]/-]*)")
_URL = re.compile(r"[a-z][a-z0-9+.-]*://\S+")


def rel(path: Path) -> str:
    return str(path.relative_to(REPO))


def prose(text: str) -> str:
    """The Markdown without fenced code blocks and code spans (links there are not links)."""
    text = _FENCE.sub("", text)
    return _CODE_SPAN.sub("", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = _LINK.sub(lambda m: m.group(0)[1:m.group(0).index("](")], heading)  # [text](url) -> text
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    text = _FENCE.sub("", path.read_text())
    seen: dict[str, int] = {}
    out = set(_HTML_ANCHOR.findall(text))
    for _, title in _HEADING.findall(text):
        base = slug(title)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return frozenset(out)


def links(path: Path) -> list[str]:
    text = prose(path.read_text())
    return _LINK.findall(text) + _REF_DEF.findall(text)


def broken_links(path: Path, root: Path = REPO) -> list[str]:
    def rel(p: Path) -> str:
        return str(p.relative_to(root))

    problems = []
    for target in links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file_part, _, fragment = target.partition("#")
        resolved = (path.parent / file_part).resolve() if file_part else path
        if not resolved.exists():
            problems.append(f"{rel(path)}: link {target!r}: {file_part} does not exist")
            continue
        if root not in resolved.parents and resolved != root:
            problems.append(f"{rel(path)}: link {target!r} leaves the repository")
            continue
        if fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
            problems.append(f"{rel(path)}: link {target!r}: no heading #{fragment} in {rel(resolved)}")
    return problems


@pytest.mark.parametrize("path", DOCS, ids=rel)
def test_relative_links_resolve(path: Path) -> None:
    assert path.exists(), f"{rel(path)} is missing"
    assert broken_links(path) == []


def test_the_link_checker_catches_a_broken_link(tmp_path: Path) -> None:
    """A wrong implementation (one that checks nothing) would pass the test above."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "operator.md").write_text("# How the operator works\n\n## Phases\n")
    (tmp_path / "README.md").write_text("# lading\n")
    page = tmp_path / "docs" / "probe.md"
    page.write_text("[ok](operator.md) [ok anchor](operator.md#phases) [self](#a-heading) [up](../README.md)\n"
                    "[gone](no-such-page.md) [bad anchor](operator.md#no-such-heading) [bad self](#nowhere)\n"
                    "[outside](../../elsewhere.md) `[not a link](missing-in-code.md)`\n\n# A heading\n")
    problems = broken_links(page, root=tmp_path)
    assert len(problems) == 4, problems
    assert any("elsewhere.md" in p for p in problems)
    assert any("no-such-page.md does not exist" in p for p in problems)
    assert any("#no-such-heading" in p for p in problems)
    assert any("#nowhere" in p for p in problems)


@pytest.mark.parametrize("heading, anchor", [
    ("Storage policy (allow-list)", "storage-policy-allow-list"),
    ("The type mapping (version 1)", "the-type-mapping-version-1"),
    ("`from`: which files", "from-which-files"),
    ("Loading files into a table (`COPY FROM` … `INTO`)", "loading-files-into-a-table-copy-from--into"),
    ("StreamCopy and Compaction", "streamcopy-and-compaction"),
])
def test_slug_follows_github(heading: str, anchor: str) -> None:
    assert slug(heading) == anchor


def test_every_example_is_listed_in_examples_readme() -> None:
    text = (REPO / "examples" / "README.md").read_text()
    linked = {Path(t.partition("#")[0]).name for t in links(REPO / "examples" / "README.md")}
    missing = [p.name for p in EXAMPLES if p.name not in linked]
    assert missing == [], f"examples/README.md does not link these examples: {missing}"
    named = set(re.findall(r"[\w.-]+\.yaml", text))
    gone = sorted(n for n in named if not (REPO / "examples" / n).exists() and n not in {"FILE.yaml"})
    assert gone == [], f"examples/README.md names examples that do not exist: {gone}"


def test_docs_index_lists_every_page() -> None:
    index = REPO / "docs" / "README.md"
    linked = {(index.parent / t.partition("#")[0]).resolve() for t in links(index) if not t.startswith("#")}
    pages = [p for p in (REPO / "docs").rglob("*.md") if p != index]
    missing = sorted(rel(p) for p in pages if p.resolve() not in linked)
    assert missing == [], f"docs/README.md does not list: {missing}"


def mentioned_paths(path: Path) -> list[str]:
    text = _URL.sub("", path.read_text())
    found = []
    for m in _REPO_PATH.finditer(text):
        token = m.group(1).rstrip(".,:;)]")
        if "<" in token or "{" in token:
            continue
        found.append(token)
    return found


@pytest.mark.parametrize("path", DOCS, ids=rel)
def test_mentioned_repository_paths_exist(path: Path) -> None:
    missing = []
    for token in mentioned_paths(path):
        hits = list(REPO.glob(token.rstrip("/"))) if any(c in token for c in "*?[") else []
        if not (REPO / token).exists() and not hits:
            missing.append(token)
    assert missing == [], f"{rel(path)} mentions paths that do not exist: {sorted(set(missing))}"


_PY_NAME = re.compile(r"`((?:lading_spec|lading_jobs|lading_operator)(?:\.\w+)+)`")


def python_name_exists(dotted: str) -> bool:
    """``pkg.module.attr`` names an importable module, or an attribute of the longest importable prefix."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


@pytest.mark.parametrize("path", DOCS, ids=rel)
def test_python_names_in_docs_exist(path: Path) -> None:
    names = sorted(set(_PY_NAME.findall(path.read_text())))
    missing = [n for n in names if not python_name_exists(n)]
    assert missing == [], f"{rel(path)} names Python objects that do not exist: {missing}"


def test_python_name_check_is_not_vacuous() -> None:
    assert python_name_exists("lading_spec.streamcopy.parse_streamcopy")
    assert not python_name_exists("lading_spec.streamcopy.parse_stream")
    assert not python_name_exists("lading_spec.no_such_module")


@cache
def cli_options(command: str) -> frozenset[str]:
    out = subprocess.run([sys.executable, "-m", "lading", *command.split(), "--help"], capture_output=True, text=True,
                         check=True, cwd=REPO).stdout
    return frozenset(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", out))


# `lading <sub> ...` where a command starts: a line of a code block or a code span
# (after an optional `$ `), or after `&&`, `;` or `|`. Comments are prose.
_CLI = re.compile(r"(?:^|&&|;|\|)\s*(?:\$\s+)?lading ([a-z][\w-]*)([^`\n|;&#]*)", re.M)


def cli_mentions(path: Path) -> list[tuple[str, str]]:
    """(subcommand, rest of the command line) for every ``lading <sub> ...`` written in code."""
    text = path.read_text()
    code = "\n".join(m.group(0) for m in _FENCE.finditer(text)) + "\n" + "\n".join(
        m.group(2).replace("\n", " ") for m in _CODE_SPAN.finditer(_FENCE.sub("", text)))
    return [(m.group(1), m.group(2)) for m in _CLI.finditer(code)]


@pytest.mark.parametrize("path", DOCS, ids=rel)
def test_cli_commands_and_flags_exist(path: Path) -> None:
    wrong = []
    for sub, rest in cli_mentions(path):
        if sub not in ("run", "render", "sample-data", "table"):
            wrong.append(f"lading {sub}: no such subcommand")
            continue
        if sub == "table":  # lading table sync|mirror|register: the verbs of `table` have the options
            verb = rest.split()[0] if rest.split() else ""
            if verb not in ("sync", "mirror", "register"):
                wrong.append(f"lading table {verb}: no such subcommand")
                continue
            sub = f"table {verb}"
        for flag in re.findall(r"(?<![\w-])(--[a-zA-Z][\w-]*)", rest):
            if flag not in cli_options(sub):
                wrong.append(f"lading {sub} {flag}: no such option")
    assert wrong == [], f"{rel(path)}: {wrong}"


def test_cli_check_sees_commands_and_catches_a_wrong_flag(tmp_path: Path) -> None:
    found = cli_mentions(REPO / "examples" / "README.md")
    assert ("run", " examples/unload-parquet.yaml") in found
    assert any(sub == "render" and "-n analytics" in rest for sub, rest in found)
    assert "--json" in cli_options("run") and "--bogus" not in cli_options("run")
    probe = tmp_path / "probe.md"
    probe.write_text("```bash\nlading run x.yaml --bogus\n# lading is prose here\n```\n`lading sample-data s3://b/p/ --rows 5`\n")
    assert cli_mentions(probe) == [("run", " x.yaml --bogus"), ("sample-data", " s3://b/p/ --rows 5")]


@cache
def chart_values() -> dict:  # type: ignore[type-arg]
    return yaml.safe_load((REPO / "charts" / "lading" / "values.yaml").read_text())


# Spark properties share the `spark.` prefix with the chart's `spark:` values; they are not values.
_SPARK_PROPERTY = re.compile(r"^spark\.(kubernetes|sql|executor|driver|dynamicAllocation|hadoop|app|master|default|"
                             r"jars|files|archives|submit|network|task|memory|speculation|redaction|pyspark|"
                             r"executorEnv|kerberos|locality|shuffle|reducer|rpc|python|stage|plugins|lading|yarn|ui)(\.|$)")
_VALUE_TAIL = r"((?:\.[A-Za-z][\w]*)+)(?:=\S*|: .*)?$"


def value_mentions(path: Path) -> list[str]:
    tops = "|".join(re.escape(k) for k in chart_values())
    pattern = re.compile("^(" + tops + ")" + _VALUE_TAIL)
    out = []
    for m in _CODE_SPAN.finditer(_FENCE.sub("", path.read_text())):
        span = m.group(2).strip()
        for piece in re.split(r"\s+/\s+", span):  # `policy.enabled` / `policy.allowedPrefixes`
            v = pattern.match(piece)
            if v and not _SPARK_PROPERTY.match(piece):
                out.append(v.group(1) + v.group(2))
    for m in re.finditer(r"--set\s+'?([\w.]+)=", path.read_text()):
        if m.group(1).split(".")[0] in chart_values() and not m.group(1).startswith("spark.kubernetes"):
            out.append(m.group(1))
    return out


def has_value(dotted: str) -> bool:
    node: object = chart_values()
    for key in dotted.split("."):
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return True


INSTALL_DOCS = [REPO / "docs" / n for n in ("install.md", "security.md", "metrics.md", "troubleshooting.md",
                                           "gitops.md", "operator.md")]


@pytest.mark.parametrize("path", INSTALL_DOCS, ids=rel)
def test_chart_values_named_in_docs_exist(path: Path) -> None:
    unknown = sorted({v for v in value_mentions(path) if not has_value(v)})
    assert unknown == [], f"{rel(path)} names chart values that charts/lading/values.yaml lacks: {unknown}"


def test_value_check_sees_the_install_guide_values() -> None:
    """The value check finds what install.md documents (so an empty scan cannot pass)."""
    found = set(value_mentions(REPO / "docs" / "install.md"))
    assert {"watch.namespaces", "spark.jobNamespaces", "metrics.podMonitor.enabled"} <= found
    assert not has_value("metrics.podmonitor.enabled")


# The user guides written for these kinds name every field of their CRD (spec and status).
GUIDES = [("streamcopies.lading.io.yaml", "streamcopy.md"), ("compactions.lading.io.yaml", "compaction.md")]


def crd_fields(node: dict, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:  # type: ignore[type-arg]
    out = [path]
    for key, sub in (node.get("properties") or {}).items():
        out += crd_fields(sub, (*path, key))
    if isinstance(node.get("items"), dict):
        out += crd_fields(node["items"], path)
    return out


def code_words(text: str) -> set[str]:
    spans = [m.group(2) for m in _CODE_SPAN.finditer(_FENCE.sub("", text))]
    spans += [m.group(0) for m in _FENCE.finditer(text)]
    return {w for span in spans for w in re.findall(r"[A-Za-z_][\w]*", span)}


@pytest.mark.parametrize(("crd_file", "guide"), GUIDES)
def test_user_guide_names_every_field(crd_file: str, guide: str) -> None:
    crd = yaml.safe_load((REPO / "crds" / crd_file).read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    words = code_words((REPO / "docs" / guide).read_text())
    fields = [p for p in crd_fields(schema) if len(p) >= 2 and p[0] in ("spec", "status")]
    assert len(fields) > 40
    missing = sorted(".".join(p) for p in fields if p[-1] not in words)
    assert missing == [], f"docs/{guide} does not name these fields: {missing}"
