"""Manifests read as kubectl reads them: the same YAML gives the same JSON here as through
tools/crd-check, which converts YAML with kubectl's own code (sigs.k8s.io/yaml, go-yaml v2).

The probe is tests/support/kubectl_yaml.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.kubectl_yaml import crd_check_values

from lading_spec import manifests
from lading_spec.errors import SpecError

# Each line is one spec entry's YAML value; written as a manifest would write it.
CORPUS = {
    "yes_words": "[y, Y, yes, On, ON, true, n, N, no, off, FALSE]",
    "numbers": "[1e3, 010, 0x1A, -0x1A, 0o17, 0b101, 1_000, +12, 1.0, 1.5, -.5, .5, 12345678901]",
    "not_numbers": "[1:20, 2024-01-01, 2024-01-01T10:00:00Z, 0.1.2, 08, 1e, '1']",
    "strings": r"""['null', "x", '\N', ~x]""",
    "int_keys": "{1: a, 010: b, 0x10: c}",
    "float_keys": "{1.5: a, 1e6: b, 123456789.0: c, 0.00001: d, 3.14159265358979: e, 1.0: f, .inf: g}",
    "bool_keys": "{y: a, off: b}",
    "date_keys": "{2024-01-01: a, 1:20: b}",
    "csv_options": r"""{'null': '\N', header: y, delimiter: '|'}""",
    "nested": "{a: [{on: 1}, {2.50: x}]}",
}


def test_lading_reads_yaml_as_kubectl_does(tmp_path: Path) -> None:
    text = "".join(f"  {key}: {value}\n" for key, value in CORPUS.items())
    kubectl, output = crd_check_values(text, tmp_path)
    assert set(kubectl) == set(CORPUS), output
    ours = manifests.load_all("spec:\n" + text)[0]["spec"]
    for key in CORPUS:
        assert ours[key] == kubectl[key], (key, ours[key], kubectl[key])
        assert json.dumps(ours[key], sort_keys=True) == json.dumps(kubectl[key], sort_keys=True), key
    # what PyYAML alone would have made of some of them, so this test is not vacuous
    import yaml
    plain = yaml.safe_load("spec:\n" + text)["spec"]
    assert plain["yes_words"][0] == "y" and plain["numbers"][0] == "1e3" and plain["not_numbers"][0] == 80
    assert 1.5 in plain["float_keys"] and "y" in plain["bool_keys"] and False in plain["bool_keys"]


@pytest.mark.parametrize("key", ["null", "~", "Null", '""'])
def test_a_null_key_is_refused_both_ways(key: str, tmp_path: Path) -> None:
    spec = f"  options: {{{key if key != chr(34) * 2 else chr(34) * 2}: '\\N'}}\n"
    kubectl, output = crd_check_values(spec, tmp_path)
    if key == '""':  # a quoted empty string is a string key, "" everywhere
        assert kubectl["options"] == {"": "\\N"} == manifests.load_all("spec:\n" + spec)[0]["spec"]["options"]
        return
    assert "unsupported map key of type" in output and not kubectl
    with pytest.raises(SpecError) as info:
        manifests.load_all("spec:\n" + spec)
    assert "line 2" in info.value.message and "'null': '\\N'" in info.value.message


def test_keys_that_collide_are_refused() -> None:
    with pytest.raises(SpecError, match="two keys of this mapping read as 'true'"):
        manifests.load_all("a: {y: 1, true: 2}\n")


@pytest.mark.parametrize(("value", "expected"), [
    (1.5, "1.5"), (0.1, "0.1"), (1000.0, "1000"), (1e6, "1e+06"), (0.00001, "1e-05"),
    (123456789.0, "1.2345679e+08"), (3.14159265358979, "3.1415927"), (-0.5, "-0.5"), (1.0, "1"),
    (1e-7, "1e-07"), (2.5e10, "2.5e+10"), (float("inf"), ".inf"), (float("-inf"), "-.inf"),
])
def test_float_keys_as_go_formats_them(value: float, expected: str) -> None:
    """Observed with crd-check (strconv.FormatFloat(v, 'g', -1, 32))."""
    assert manifests.go_float_key(value) == expected


def test_nan_and_infinity_are_not_values() -> None:
    with pytest.raises(SpecError, match="not a JSON value"):
        manifests.load_all("a: .nan\n")


def test_an_unquoted_y_column_name_says_to_quote_it() -> None:
    """kubectl (and so lading run) reads ``name: y`` as true; the error says why and how to fix it."""
    from lading_spec.copyjob import parse_copyjob

    doc = manifests.load_all("kind: CopyJob\nspec:\n  from: {files: 's3://bkt/in/', format: csv}\n"
                             "  to:\n    table: 's3://bkt/t/'\n    schema:\n      - {name: x, type: int}\n"
                             "      - {name: y, type: int}\n")[0]
    with pytest.raises(SpecError, match=r'to\.schema\[1\]\.name.*got true.*quote the name \(name: "y"\)'):
        parse_copyjob(doc["spec"])
