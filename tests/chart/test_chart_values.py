"""Every value in values.yaml is documented (a `# --` comment) and typed in values.schema.json."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from chart import helm

VALUES = helm.CHART / "values.yaml"
SCHEMA = helm.CHART / "values.schema.json"
KEY = re.compile(r"^(\s*)([A-Za-z0-9_]+):")


def undocumented_keys(values_file: Path = VALUES) -> list[str]:
    """Keys with no `# --` comment directly above them or above one of their parents."""
    missing = []
    stack: list[tuple[int, str, bool]] = []  # (indent, key, documented here or above)
    comment_block: list[str] = []
    for line in values_file.read_text().splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            comment_block.append(stripped)
            continue
        match = KEY.match(line)
        if not match:
            if not stripped.startswith("- "):
                comment_block = []
            continue
        indent, key = len(match.group(1)), match.group(2)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        inherited = any(doc for _, _, doc in stack)
        here = any(c.startswith("# --") for c in comment_block)
        path = ".".join([k for _, k, _ in stack] + [key])
        is_parent = line.rstrip().endswith(":")
        if not (here or inherited or is_parent):
            missing.append(path)
        stack.append((indent, key, here or inherited))
        comment_block = []
    return missing


def test_every_value_is_documented() -> None:
    assert undocumented_keys() == []


def schema_paths(values: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Paths of values.yaml that the schema does not describe (with a description)."""
    missing = []
    if isinstance(values, dict) and "properties" in schema:
        for key, value in values.items():
            sub = schema["properties"].get(key)
            where = f"{path}.{key}" if path else key
            if sub is None:
                missing.append(where)
                continue
            if "description" not in sub and "properties" not in sub:
                missing.append(where + " (no description)")
            missing += schema_paths(value, sub, where)
    return missing


def test_every_value_is_in_the_schema() -> None:
    values = yaml.safe_load(VALUES.read_text())
    schema = json.loads(SCHEMA.read_text())
    assert schema_paths(values, schema) == []
    # and the schema is closed at the top level, so a typo in a value name fails
    assert schema["additionalProperties"] is False


def test_the_checker_notices_an_undocumented_value(tmp_path: Path) -> None:
    bad = tmp_path / "values.yaml"
    bad.write_text(VALUES.read_text() + "\nsneaky: 1\nnested:\n  inner: 2\n")
    assert undocumented_keys(bad) == ["sneaky", "nested.inner"]
