"""docs/security.md shows the tenant boundary's allow- and never-lists exactly as the code holds them.

Each list sits between ``<!-- list:NAME -->`` markers as backquoted items; the code is the
one source, and this test fails when either side changes alone.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lading_operator import podsecurity, sizing
from lading_spec import envvars, jvmoptions

SECURITY = Path(__file__).resolve().parents[2] / "docs" / "security.md"


def listed(name: str) -> list[str]:
    """The backquoted items between ``<!-- list:name -->`` and ``<!-- /list:name -->``."""
    match = re.search(rf"<!-- list:{name} -->(.*?)<!-- /list:{name} -->", SECURITY.read_text(), re.S)
    assert match, f"docs/security.md has no <!-- list:{name} --> list"
    return re.findall(r"`([^`]+)`", match.group(1))


@pytest.mark.parametrize(("name", "source"), [
    ("jvm-options-allowed", jvmoptions.ALLOWED),
    ("jvm-options-never", jvmoptions.NEVER),
    ("env-never", envvars.NEVER),
    ("pod-refused", podsecurity.REFUSED),
    ("sizing-keys", sizing.SIZING_KEYS),
])
def test_docs_list_what_the_code_holds(name: str, source: tuple[str, ...]) -> None:
    assert listed(name) == list(source)
