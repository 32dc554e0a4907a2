"""No import circle in the product: lading_spec, lading_jobs, lading_operator and lading.

The graph is grimp's (the library import-linter uses): every ``import`` and ``from … import``
statement of every module, those inside functions and under ``if TYPE_CHECKING:`` included,
so moving an import into a function to dodge a circle does not hide it. A circle is a set of
modules each reachable from every other (a strongly connected component); the failure names
one concrete round through it, each step with its file line.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from pathlib import Path

import grimp
import pytest

PRODUCT = ("lading_spec", "lading_jobs", "lading_operator", "lading")

def _reachable(graph: grimp.ImportGraph, start: str) -> set[str]:
    seen: set[str] = set()
    todo = list(graph.find_modules_directly_imported_by(start))
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo.extend(graph.find_modules_directly_imported_by(m))
    return seen


def import_cycles(graph: grimp.ImportGraph) -> list[frozenset[str]]:
    """Every circle of ``graph``: its strongly connected components of more than one module
    (or of one module importing itself), sorted."""
    reach = {m: _reachable(graph, m) for m in graph.modules}
    cycles: set[frozenset[str]] = set()
    for m, out in reach.items():
        if m in out:
            cycles.add(frozenset({m} | {n for n in out if m in reach[n]}))
    return sorted(cycles, key=sorted)


def describe(graph: grimp.ImportGraph, cycle: Iterable[str]) -> str:
    """One round through ``cycle``, from its first module back to it, each import with its line."""
    members = set(cycle)
    start = min(members)
    previous: dict[str, str] = {}
    queue = deque([start])
    while queue:  # breadth first within the circle: the shortest round back to start
        m = queue.popleft()
        nxt = sorted(n for n in graph.find_modules_directly_imported_by(m) if n in members)
        if start in nxt:
            path = [m]
            while path[-1] != start:
                path.append(previous[path[-1]])
            path.reverse()
            break
        for n in nxt:
            if n not in previous and n != start:
                previous[n] = m
                queue.append(n)
    steps = []
    for a, b in zip(path, [*path[1:], start], strict=True):
        detail = graph.get_import_details(importer=a, imported=b)[0]
        steps.append(f"  {a} -> {b}   (line {detail['line_number']}: {detail['line_contents']})")
    return f"import circle of {len(members)} modules ({', '.join(sorted(members))}):\n" + "\n".join(steps)


def _unexpected(graph: grimp.ImportGraph, allowed: Iterable[frozenset[str]] = ()) -> list[str]:
    allowed = list(allowed)
    return [describe(graph, c) for c in import_cycles(graph) if not any(c <= a for a in allowed)]


@pytest.fixture(scope="module")
def product() -> grimp.ImportGraph:
    return grimp.build_graph(*PRODUCT, cache_dir=None)


def test_the_product_has_no_import_circle(product: grimp.ImportGraph) -> None:
    found = _unexpected(product)
    assert not found, ("break each circle: move what both sides need to a module both may import "
                       "(an import inside a function or under TYPE_CHECKING still counts)\n" + "\n".join(found))


def test_a_circle_through_an_import_inside_a_function_is_found_and_named(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "circular_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from circular_pkg import b\n")
    (pkg / "b.py").write_text("from circular_pkg import c\n")
    (pkg / "c.py").write_text("def later():\n    from circular_pkg.a import b\n    return b\n")
    (pkg / "d.py").write_text("from circular_pkg import a\n")  # imports the circle, is not in it
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = grimp.build_graph("circular_pkg", cache_dir=None)
    assert import_cycles(graph) == [frozenset({"circular_pkg.a", "circular_pkg.b", "circular_pkg.c"})]
    [named] = _unexpected(graph)
    assert "circular_pkg.c -> circular_pkg.a   (line 2: from circular_pkg.a import b)" in named
    assert "circular_pkg.d" not in named
