"""Reading manifests as kubectl reads them, so one file means the same on a laptop and on a cluster.

kubectl turns YAML into JSON with sigs.k8s.io/yaml, which parses with go-yaml v2
(YAML 1.1) and then makes every mapping key a string. PyYAML's YAML 1.1 differs
in ways a manifest can hit, so :func:`load_all` resolves plain scalars as go-yaml
v2 does and converts keys as sigs.k8s.io/yaml does:

- ``y``, ``Y``, ``yes``, ``on`` ... are ``true`` and ``n``, ``no``, ``off`` ...
  ``false`` (PyYAML keeps ``y`` and ``n`` as strings);
- integers parse as Go's ``ParseInt(s, 0, 64)`` after removing ``_``: ``0x1A``,
  ``0o17``, ``0b101`` and ``010`` (octal, 8); ``1e3`` is a float (PyYAML: a
  string); ``1:20`` stays a string (PyYAML: 80); dates stay strings;
- a float that is a whole number becomes an integer (JSON has one number type:
  ``1.0`` arrives as ``1``); ``.nan`` and ``.inf`` cannot be JSON values;
- keys: ``true``/``false`` for booleans, decimal text for integers, Go's
  shortest ``%g`` of the float32 for floats (``1.5``, ``1e+06``,
  ``3.1415927``); a null key (``null:``, ``~:``, an empty key) is refused, as
  kubectl refuses it (``unsupported map key of type <nil>``): write ``'null':``.
  So ``options: {'null': '\\N'}`` is the CSV null option everywhere, and unquoted
  ``null:`` fails everywhere, here with a message that says how to fix it;
- two keys that become the same string (``y:`` and ``true:``) are refused.

``tests/lading_spec/test_manifests.py`` checks these against ``tools/crd-check``,
which converts YAML with kubectl's code.
"""

from __future__ import annotations

import math
import re
import struct
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode

from lading_spec.errors import SpecError

_NULL, _BOOL, _INT, _FLOAT, _STR, _MERGE = (f"tag:yaml.org,2002:{t}" for t in
                                            ("null", "bool", "int", "float", "str", "merge"))
_TRUE = frozenset({"y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"})
_FALSE = frozenset({"n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"})
_NULLS = frozenset({"", "~", "null", "Null", "NULL"})
_SPECIAL_FLOATS = {".inf": math.inf, ".Inf": math.inf, ".INF": math.inf, "+.inf": math.inf, "+.Inf": math.inf,
                   "+.INF": math.inf, "-.inf": -math.inf, "-.Inf": -math.inf, "-.INF": -math.inf,
                   ".nan": math.nan, ".NaN": math.nan, ".NAN": math.nan}
_GO_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")
_INT64 = 2**63


def _go_int(text: str) -> int | None:
    """Go's ``strconv.ParseInt(s, 0, 64)``, else ``ParseUint``: sign, 0x/0o/0b, leading-0 octal."""
    sign, digits = (-1, text[1:]) if text.startswith("-") else (1, text[1:] if text.startswith("+") else text)
    lowered = digits.lower()
    base, body = 10, digits
    if lowered.startswith("0x"):
        base, body = 16, digits[2:]
    elif lowered.startswith("0o"):
        base, body = 8, digits[2:]
    elif lowered.startswith("0b"):
        base, body = 2, digits[2:]
    elif len(digits) > 1 and digits.startswith("0"):
        base, body = 8, digits[1:]
    if not body or not re.fullmatch("[0-9a-fA-F]+", body):
        return None
    try:
        value = sign * int(body, base)
    except ValueError:
        return None
    if -_INT64 <= value < _INT64 or (sign > 0 and value < 2 * _INT64):
        return value
    return None


def resolve_plain(text: str) -> str:
    """The tag go-yaml v2 gives an unquoted scalar."""
    if text in _NULLS:
        return _NULL
    hint = text[0]
    if hint in "+-0123456789.yYnNtTfFoO~":
        if text in _TRUE or text in _FALSE:
            return _BOOL
        if text in _SPECIAL_FLOATS:
            return _FLOAT
    if hint == ".":
        return _FLOAT if _go_float(text) is not None else _STR
    if hint in "+-0123456789":
        plain = text.replace("_", "")
        if _go_int(plain) is not None:
            return _INT
        if _GO_FLOAT.match(plain):
            return _FLOAT
    if text == "<<":
        return _MERGE
    return _STR


def _go_float(text: str) -> float | None:
    if text in _SPECIAL_FLOATS:
        return _SPECIAL_FLOATS[text]
    plain = text.replace("_", "")
    if not _GO_FLOAT.match(plain):
        return None
    return float(plain)


def go_float_key(value: float) -> str:
    """Go's ``strconv.FormatFloat(v, 'g', -1, 32)`` as sigs.k8s.io/yaml writes a float key."""
    if math.isnan(value):
        return ".nan"
    if math.isinf(value):
        return ".inf" if value > 0 else "-.inf"
    f32 = struct.unpack("f", struct.pack("f", value))[0]
    if f32 == 0:
        return "-0" if math.copysign(1, f32) < 0 else "0"
    for digits in range(1, 10):  # the shortest mantissa that reads back as the same float32
        text = f"{f32:.{digits - 1}e}"
        if struct.unpack("f", struct.pack("f", float(text)))[0] == f32:
            break
    mantissa, exp_text = text.split("e")
    exponent = int(exp_text)
    sign = "-" if mantissa.startswith("-") else ""
    figures = mantissa.lstrip("-").replace(".", "").rstrip("0") or "0"
    if exponent < -4 or exponent >= 6:  # Go: shortest %g decides with precision 6
        head = figures[0] + ("." + figures[1:] if len(figures) > 1 else "")
        return f"{sign}{head}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    if exponent >= 0:
        whole = figures[:exponent + 1].ljust(exponent + 1, "0")
        frac = figures[exponent + 1:]
        return sign + whole + ("." + frac if frac else "")
    return f"{sign}0.{'0' * (-exponent - 1)}{figures}"


class _Loader(yaml.SafeLoader):
    """go-yaml v2 scalars, sigs.k8s.io/yaml keys."""

    yaml_implicit_resolvers: dict[Any, Any] = {}

    def resolve(self, kind: type, value: Any, implicit: tuple[bool, bool]) -> str:  # type: ignore[override]
        if kind is ScalarNode and implicit[0]:
            return resolve_plain(value)
        return super().resolve(kind, value, implicit)  # type: ignore[no-any-return]

    def construct_go_bool(self, node: ScalarNode) -> bool:
        return str(node.value) in _TRUE

    def construct_go_int(self, node: ScalarNode) -> int:
        value = _go_int(str(node.value).replace("_", ""))
        if value is None:
            raise SpecError("FILE", f"{node.start_mark}: {node.value!r} is not an integer")
        return value

    def construct_go_float(self, node: ScalarNode) -> float | int:
        value = _go_float(str(node.value))
        if value is None:
            raise SpecError("FILE", f"{node.start_mark}: {node.value!r} is not a number")
        return value

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:  # type: ignore[override]
        self.flatten_mapping(node)
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = manifest_key(self.construct_object(key_node, deep=True), key_node)
            if key in out:
                raise SpecError("FILE", f"{key_node.start_mark}: two keys of this mapping read as {key!r} "
                                        "(kubectl reads y/yes/on as true, n/no/off as false, 1e3 as 1000); "
                                        "keep one")
            out[key] = json_value(self.construct_object(value_node, deep=deep), value_node)
        return out

    def construct_sequence(self, node: Node, deep: bool = False) -> list[Any]:  # type: ignore[override]
        return [json_value(self.construct_object(child, deep=deep), child) for child in node.value]


_Loader.add_constructor(_BOOL, _Loader.construct_go_bool)
_Loader.add_constructor(_INT, _Loader.construct_go_int)
_Loader.add_constructor(_FLOAT, _Loader.construct_go_float)


def manifest_key(key: Any, node: Node) -> str:
    """A mapping key as sigs.k8s.io/yaml writes it into JSON."""
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int):
        if key >= _INT64:
            raise SpecError("FILE", f"{node.start_mark}: the key {key} does not fit a 64-bit integer; quote it")
        return str(key)
    if isinstance(key, float):
        return go_float_key(key)
    if key is None:
        raise SpecError("FILE", f"{node.start_mark}: a key is null (unquoted null, ~ or nothing), which kubectl "
                                "refuses too; quote it, e.g. 'null': '\\N' for the CSV null option")
    raise SpecError("FILE", f"{node.start_mark}: a key must be a string, number or boolean, not "
                            f"{type(key).__name__}")


def json_value(value: Any, node: Node) -> Any:
    """A scalar as it arrives after kubectl's JSON round trip: whole floats are integers."""
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise SpecError("FILE", f"{node.start_mark}: {node.value!r} (NaN or infinity) is not a JSON value; "
                                    "quote it if you mean the text")
        if value.is_integer() and abs(value) < 1e21:
            return int(value)
    return value


def load_all(text: str) -> list[Any]:
    """Every document in ``text``, as kubectl would send it; empty documents skipped.

    Raises :class:`SpecError` (field ``FILE``) naming the line for what kubectl refuses."""
    try:
        return [d for d in yaml.load_all(text, Loader=_Loader) if d is not None]  # noqa: S506 - a SafeLoader
    except yaml.YAMLError as e:
        raise SpecError("FILE", f"not valid YAML: {e}") from e
