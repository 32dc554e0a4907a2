"""docs/security.md lists every connection the operator makes; a new one fails here until it is listed.

Each library that can open a connection is allowed only where the table says the
operator uses it, and the peer it reaches must be a row of the table
("Every connection the operator makes").
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OPERATOR = REPO / "operator" / "lading_operator"
SECURITY = REPO / "docs" / "security.md"

# library (top-level import name, or a dotted prefix) → (modules allowed to use it, or None for any; the peer)
CONNECTIONS: dict[str, tuple[frozenset[str] | None, str]] = {
    "kubernetes": (None, "the Kubernetes API server"),
    "kopf": (None, "the Kubernetes API server"),
    "urllib.request": (frozenset({"progress.py"}), "each running Spark driver's web UI"),
    "aiohttp": (frozenset({"progress.py"}), "each running Spark driver's web UI"),
    "http.client": (frozenset({"progress.py"}), "each running Spark driver's web UI"),
    "urllib3": (frozenset(), ""),
    "requests": (frozenset(), ""),
    "httpx": (frozenset(), ""),
    # a standby replica answers the liveness probe itself (kopf is not running): a listener, no connection out
    "socket": (frozenset({"election.py"}), "the kubelet's liveness probe"),
    "prometheus_client": (frozenset({"metrics.py"}), "Prometheus"),
}
LISTENERS = {"main.py": "the kubelet's liveness probe", "election.py": "the kubelet's liveness probe",
             "metrics.py": "Prometheus"}


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module)
    return out


def _table() -> str:
    text = SECURITY.read_text()
    start = text.index("### Every connection the operator makes")
    return text[start:text.index("\n#", start + 1)]


def test_every_connecting_library_is_where_the_table_says() -> None:
    table = _table()
    found = []
    for path in sorted(OPERATOR.rglob("*.py")):
        for module in _imports(path):
            for library, (allowed, peer) in CONNECTIONS.items():
                if module == library or module.startswith(library + "."):
                    found.append((path.name, library))
                    assert allowed is None or path.name in allowed, (
                        f"{path.relative_to(REPO)} imports {library}: a connection docs/security.md does not list; "
                        "add it to the table 'Every connection the operator makes' and to CONNECTIONS here")
                    assert peer in table, (library, peer)
    libraries = {library for _, library in found}
    assert "kubernetes" in libraries and "prometheus_client" in libraries  # the check sees real imports
    assert libraries & {"urllib.request", "aiohttp", "http.client"}  # the driver UI poller


def test_listeners_are_in_the_table() -> None:
    table = _table()
    rows = [r for r in table.splitlines() if r.startswith("| in |")]
    for peer in LISTENERS.values():
        assert any(peer in r for r in rows), peer
    assert any("0.0.0.0" in r for r in rows)
    assert len(re.findall(r"^\| out \|", table, re.M)) == 2
