"""Structural schemas as the API server applies them to custom resources.

A CRD's ``openAPIV3Schema`` does four things to an incoming object, in this order:
unknown fields are pruned (unless ``x-kubernetes-preserve-unknown-fields``), defaults
are filled in, the value is validated against the schema (types, enums, patterns,
bounds, required), and the CEL rules in ``x-kubernetes-validations`` are evaluated
with ``self`` (and ``oldSelf`` on updates, where the old value correlates) bound at
the schema node that declares them. Each step is a pure function here; errors are
``FieldError`` values carrying the field path, formatted the way the API server
words them (``spec.to.format: Unsupported value: "xml": supported values: ...``).
"""

from __future__ import annotations

import contextlib
import copy
import json
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import celpy
import jsonschema
import lark

Schema = dict[str, Any]

# Keys the API server manages itself at the root of every object.
_ROOT_KEEP = ("apiVersion", "kind", "metadata")


@dataclass(frozen=True)
class FieldError:
    """One invalid field: its dotted path, a Kubernetes-style reason and message."""

    field: str
    reason: str  # FieldValueInvalid, FieldValueRequired, FieldValueNotSupported, ...
    message: str

    def __str__(self) -> str:
        return self.message


def join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


# ---------------------------------------------------------------------------------------
# pruning and defaulting


def prune(value: Any, schema: Schema, path: str = "", *, root: bool = True) -> list[str]:
    """Drop fields the schema does not declare, in place; return their paths."""
    pruned: list[str] = []
    if schema.get("x-kubernetes-preserve-unknown-fields") and "properties" not in schema:
        return pruned
    if isinstance(value, dict):
        props = schema.get("properties")
        addl = schema.get("additionalProperties")
        for key in list(value):
            if root and key in _ROOT_KEEP:
                continue
            if props is not None and key in props:
                pruned += prune(value[key], props[key], join(path, key), root=False)
            elif isinstance(addl, dict):
                pruned += prune(value[key], addl, join(path, key), root=False)
            elif addl is True or schema.get("x-kubernetes-preserve-unknown-fields"):
                continue
            elif props is not None or addl is False:
                pruned.append(join(path, key))
                del value[key]
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            pruned += prune(item, schema["items"], join(path, i), root=False)
    return pruned


def apply_defaults(value: Any, schema: Schema) -> None:
    """Fill in ``default`` values for absent properties, in place, recursively."""
    if isinstance(value, dict):
        for key, sub in (schema.get("properties") or {}).items():
            if key not in value and "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
            if key in value:
                apply_defaults(value[key], sub)
        addl = schema.get("additionalProperties")
        if isinstance(addl, dict):
            for key in value:
                apply_defaults(value[key], addl)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            apply_defaults(item, schema["items"])


# ---------------------------------------------------------------------------------------
# schema validation (jsonschema, after converting the structural schema)


def to_jsonschema(schema: Schema) -> Schema:
    """OpenAPI v3 structural schema → JSON Schema draft 4 (what jsonschema checks)."""
    out: Schema = {}
    for key, val in schema.items():
        if key.startswith("x-kubernetes-") or key in ("description", "default", "nullable",
                                                        "format", "example", "externalDocs"):
            continue
        if key == "properties":
            out[key] = {k: to_jsonschema(v) for k, v in val.items()}
        elif key in ("items", "additionalProperties", "not") and isinstance(val, dict):
            out[key] = to_jsonschema(val)
        elif key in ("anyOf", "allOf", "oneOf"):
            out[key] = [to_jsonschema(v) for v in val]
        else:
            out[key] = val
    if schema.get("x-kubernetes-int-or-string") and "anyOf" not in out:
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if schema.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    if schema.get("x-kubernetes-preserve-unknown-fields") and "type" not in out:
        pass  # any value
    return out


# Compiled validators by schema identity. Each entry keeps its schema alive, so an id is
# never reused while cached; schemas are never mutated in place (the emulator replaces
# a CRD's objects on every write). Keying by the schema's JSON text instead cost a full
# serialisation of the CRD schema on every admitted write (~20 % of the emulator's CPU).
_VALIDATORS: dict[int, tuple[Schema, jsonschema.Draft4Validator]] = {}
_VALIDATORS_LIMIT = 256


def _validator(schema: Schema) -> jsonschema.Draft4Validator:
    hit = _VALIDATORS.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    if len(_VALIDATORS) >= _VALIDATORS_LIMIT:
        _VALIDATORS.pop(next(iter(_VALIDATORS)))
    # Keys sorted, as before this cache existed: the validator reports the errors of one
    # field in keyword order (a value both of the wrong type and not in the enum).
    validator = jsonschema.Draft4Validator(to_jsonschema(json.loads(json.dumps(schema, sort_keys=True))))
    _VALIDATORS[id(schema)] = (schema, validator)
    return validator


def _quote(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, dict | list) else json.dumps(
        "object" if isinstance(value, dict) else "array")


# Errors of a top-level property's value, by (schema id, path, key, JSON of the value).
# Every write is validated in full; a subtree equal to one validated before (the spec,
# on a status write) gets the errors computed then. Sorting by path makes the union of
# the per-property lists the same list one validation of the whole object gives.
# Each entry keeps its schema, so a hit is checked by identity (an id is never reused
# while its schema lives).
_PROPERTY_ERRORS: OrderedDict[tuple[int, str, str, str],
                              tuple[Schema, list[tuple[list[str], FieldError]]]] = OrderedDict()
_PROPERTY_ERRORS_LIMIT = 50_000
_COMBINATORS = ("allOf", "anyOf", "oneOf", "not")
_ROOTS: dict[int, tuple[Schema, Schema]] = {}


def schema_errors(value: Any, schema: Schema, path: str = "") -> list[FieldError]:
    """Every violation of the schema's types, enums, patterns, bounds and required lists."""
    props = schema.get("properties")
    if not isinstance(value, dict) or not isinstance(props, dict) or \
            any(k in schema for k in _COMBINATORS):
        found = _errors_of(value, schema, path, [])
    else:
        found = _errors_of(value, _root_only(schema), path, [])
        for key, item in value.items():
            if key in props:
                found += _property_errors(props[key], path, key, item)
    found.sort(key=lambda pair: pair[0])  # stable: equal paths keep the validator's order
    return list(dict.fromkeys(error for _, error in found))  # one error per field and message


def _root_only(schema: Schema) -> Schema:
    """``schema`` with every property's own schema emptied (checked on its own)."""
    hit = _ROOTS.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    root = {**schema, "properties": {k: {} for k in schema["properties"]}}
    if len(_ROOTS) >= _VALIDATORS_LIMIT:
        _ROOTS.pop(next(iter(_ROOTS)))
    _ROOTS[id(schema)] = (schema, root)
    return root


def _property_errors(schema: Schema, path: str, key: str, value: Any
                     ) -> list[tuple[list[str], FieldError]]:
    try:
        memo_key = (id(schema), path, key, json.dumps(value))
    except (TypeError, ValueError):  # not JSON (e.g. a YAML timestamp): no memo
        return _errors_of(value, schema, join(path, key), [key])
    hit = _PROPERTY_ERRORS.get(memo_key)
    if hit is not None and hit[0] is schema:
        _PROPERTY_ERRORS.move_to_end(memo_key)
        return list(hit[1])
    found = _errors_of(value, schema, join(path, key), [key])
    _PROPERTY_ERRORS[memo_key] = (schema, found)
    if len(_PROPERTY_ERRORS) > _PROPERTY_ERRORS_LIMIT:
        _PROPERTY_ERRORS.popitem(last=False)
    return list(found)


def _errors_of(value: Any, schema: Schema, path: str, prefix: list[str]
               ) -> list[tuple[list[str], FieldError]]:
    """(sort key, error) for every violation, in the validator's order."""
    out: list[tuple[list[str], FieldError]] = []
    for err in _validator(schema).iter_errors(value):
        where = path
        for part in err.absolute_path:
            where = join(where, part)
        sort_key = prefix + list(map(str, err.absolute_path))
        out += [(sort_key, e) for e in _field_errors(err, where)]
    return out


def _field_errors(err: jsonschema.ValidationError, where: str) -> list[FieldError]:
    """One jsonschema error in the API server's words."""
    errors: list[FieldError] = []
    kw, inst = err.validator, err.instance
    if kw == "required":
        missing = [f for f in err.validator_value if not isinstance(inst, dict) or f not in inst]
        for f in missing:
            errors.append(FieldError(join(where, f), "FieldValueRequired",
                                     f"{join(where, f)}: Required value"))
        return errors
    if kw == "enum":
        allowed = ", ".join(json.dumps(v) for v in err.validator_value)
        msg = f"{where}: Unsupported value: {_quote(inst)}: supported values: {allowed}"
        errors.append(FieldError(where, "FieldValueNotSupported", msg))
        return errors
    if kw == "type":
        actual = {dict: "object", list: "array", str: "string", bool: "boolean",
                  int: "integer", float: "number", type(None): "null"}.get(type(inst), "?")
        msg = (f"{where}: Invalid value: {json.dumps(actual)}: {where} in body must be of type "
               f"{err.validator_value}: {json.dumps(actual)}")
    elif kw == "pattern":
        msg = (f"{where}: Invalid value: {_quote(inst)}: {where} in body should match "
               f"'{err.validator_value}'")
    elif kw == "minimum":
        msg = (f"{where}: Invalid value: {_quote(inst)}: {where} in body should be greater "
               f"than or equal to {err.validator_value}")
    elif kw == "maximum":
        msg = (f"{where}: Invalid value: {_quote(inst)}: {where} in body should be less "
               f"than or equal to {err.validator_value}")
    elif kw in ("minLength", "minItems", "minProperties"):
        unit = {"minLength": "chars long", "minItems": "items", "minProperties": "properties"}[kw]
        msg = (f"{where}: Invalid value: {_quote(inst)}: {where} in body should have at least "
               f"{err.validator_value} {unit}")
    elif kw in ("maxLength", "maxItems", "maxProperties"):
        unit = {"maxLength": "chars long", "maxItems": "items", "maxProperties": "properties"}[kw]
        msg = (f"{where}: Too long: {where} may not have more than {err.validator_value} {unit}")
    elif kw == "anyOf" and isinstance(inst, bool | float | dict | list | type(None)):
        msg = (f"{where}: Invalid value: {_quote(inst)}: {where} in body must be of type "
               "integer or string")
    else:
        msg = f"{where}: Invalid value: {_quote(inst)}: {err.message}"
    errors.append(FieldError(where, "FieldValueInvalid", msg))
    return errors


# ---------------------------------------------------------------------------------------
# CEL rules (x-kubernetes-validations)

_ENV = celpy.Environment()


@lru_cache(maxsize=1024)
def _program(rule: str) -> celpy.Runner:
    return _ENV.program(_ENV.compile(rule))


_ABSENT = object()

# Outcomes of rule evaluations, by (rule, messageExpression, JSON of what the rule reads of
# self, JSON of oldSelf).
# A CEL rule is a pure function of its inputs, so a write that leaves a node unchanged
# (every status update leaves the spec as it was) gets the outcome computed before, and
# every rule still answers for every write. celpy's tree-walking interpreter costs 0.1 to
# 1 ms per rule; it was ~55 % of the emulator's CPU under the operator scale benchmark.
_OUTCOMES: OrderedDict[tuple[str, str | None, str, str | None], tuple[str, str | None]] = OrderedDict()
_OUTCOMES_LIMIT = 50_000


# What of ``self`` a rule reads: (field path, only its presence) pairs, or None for all of
# it. A rule that reads only ``has(self.a)`` and ``self.b`` gets one outcome for every
# ``self`` with the same presence of ``a`` and the same ``b``: creates of objects that
# differ only in fields no rule reads (a query, a destination) share their outcomes.
Reads = tuple[tuple[tuple[str, ...], bool], ...]
_WRAPPERS = frozenset({"expr", "conditionalor", "conditionaland", "relation", "addition",
                       "multiplication", "unary"})


def _self_path(tree: Any) -> tuple[str, ...] | None:
    """``self.a.b`` → ("a", "b"); ``self`` → (); anything else → None."""
    if not isinstance(tree, lark.Tree):
        return None
    if tree.data in ("member", "primary") and len(tree.children) == 1:
        return _self_path(tree.children[0])
    if tree.data == "ident" and len(tree.children) == 1:
        return () if str(tree.children[0]) == "self" else None
    if tree.data == "member_dot" and len(tree.children) == 2:
        base = _self_path(tree.children[0])
        return None if base is None else (*base, str(tree.children[1]))
    return None


def _collect_reads(tree: Any, found: list[tuple[tuple[str, ...], bool]]) -> None:
    if not isinstance(tree, lark.Tree):
        return
    children = tree.children
    if tree.data == "ident_arg" and len(children) == 2 and str(children[0]) == "has" \
            and isinstance(children[1], lark.Tree) and len(children[1].children) == 1:
        arg = children[1].children[0]
        while isinstance(arg, lark.Tree) and arg.data in _WRAPPERS and len(arg.children) == 1:
            arg = arg.children[0]
        path = _self_path(arg)
        if path:
            found.append((path, True))
            return
    path = _self_path(tree)
    if path is not None:
        found.append((path, False))
        return
    for child in children:
        _collect_reads(child, found)


def _count_self(tree: Any) -> int:
    if not isinstance(tree, lark.Tree):
        return 0
    if tree.data == "ident" and len(tree.children) == 1 and str(tree.children[0]) == "self":
        return 1
    return sum(_count_self(c) for c in tree.children)


@lru_cache(maxsize=1024)
def _reads(text: str) -> Reads | None:
    """The parts of ``self`` ``text`` reads (None: all of it, or not sure)."""
    if "oldSelf" in text:
        return None
    try:
        tree = _ENV.compile(text)
    except Exception:  # noqa: BLE001 - compiled again (and reported) at evaluation
        return None
    found: list[tuple[tuple[str, ...], bool]] = []
    _collect_reads(tree, found)
    if len(found) != _count_self(tree) or any(not path for path, _ in found):
        return None  # a bare self (type(self), size(self), a shadowing variable...): all of it
    return tuple(sorted(set(found)))


def _projection(node: Any, reads: Reads) -> list[Any]:
    """What the rule can see of ``node``: per read path, its presence or its value; where
    the path breaks (a missing key, a non-object), the node it broke at, whole."""
    out: list[Any] = []
    for path, presence in reads:
        current = node
        seen: list[Any] = ["value"]
        for i, key in enumerate(path):
            if not isinstance(current, dict):
                seen = ["broken", i, current]
                break
            if presence and i == len(path) - 1:
                seen = ["present", key in current]
                break
            if key not in current:
                seen = ["missing", i, current]
                break
            current = current[key]
        else:
            seen.append(current)
        out.append(seen)
    return out


def _evaluate(text: str, message_expression: str | None, node: Any, old_node: Any, uses_old: bool
              ) -> tuple[str, str | None]:
    """``("pass", None)``, ``("fail", message from messageExpression or None)`` or
    ``("error", the evaluation error)``."""
    reads = _reads(text)
    if reads is not None and message_expression:
        more = _reads(message_expression)
        reads = None if more is None else tuple(sorted(set(reads) | set(more)))
    try:
        seen = json.dumps(node) if reads is None or uses_old else json.dumps(_projection(node, reads))
        key = (text, message_expression, seen, json.dumps(old_node) if uses_old else None)
    except (TypeError, ValueError):  # not JSON (e.g. a YAML timestamp): evaluate uncached
        return _evaluate_uncached(text, message_expression, node, old_node, uses_old)
    hit = _OUTCOMES.get(key)
    if hit is not None:
        _OUTCOMES.move_to_end(key)
        return hit
    outcome = _evaluate_uncached(text, message_expression, node, old_node, uses_old)
    _OUTCOMES[key] = outcome
    if len(_OUTCOMES) > _OUTCOMES_LIMIT:
        _OUTCOMES.popitem(last=False)
    return outcome


def _evaluate_uncached(text: str, message_expression: str | None, node: Any, old_node: Any,
                       uses_old: bool) -> tuple[str, str | None]:
    activation: dict[str, Any] = {"self": celpy.json_to_cel(node)}
    if uses_old:
        activation["oldSelf"] = celpy.json_to_cel(old_node)
    try:
        ok = _program(text).evaluate(activation)
    except Exception as exc:  # celpy raises its own error types at evaluation
        return "error", str(exc)
    if isinstance(ok, celpy.evaluation.CELEvalError):
        return "error", str(ok)
    if bool(ok):
        return "pass", None
    message = None
    if message_expression:
        with contextlib.suppress(Exception):
            message = str(_program(message_expression).evaluate(activation))
    return "fail", message


def _walk_rules(value: Any, old: Any, schema: Schema, path: str
                ) -> Iterator[tuple[str, dict[str, Any], Any, Any]]:
    """(path, rule, value, old value or _ABSENT) for every rule at every present node."""
    for rule in schema.get("x-kubernetes-validations") or []:
        yield path, rule, value, old
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        addl = schema.get("additionalProperties")
        olds = old if isinstance(old, dict) else {}
        for key, sub in value.items():
            sub_schema = props.get(key) or (addl if isinstance(addl, dict) else None)
            if sub_schema is not None:
                yield from _walk_rules(sub, olds.get(key, _ABSENT), sub_schema, join(path, key))
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            # Items of plain lists do not correlate with old items: no oldSelf below.
            yield from _walk_rules(item, _ABSENT, schema["items"], join(path, i))


def cel_errors(value: Any, schema: Schema, old: Any = _ABSENT, path: str = "") -> list[FieldError]:
    """Evaluate every CEL rule; a rule using ``oldSelf`` runs only where an old value exists."""
    errors: list[FieldError] = []
    for where, rule, node, old_node in _walk_rules(value, old, schema, path):
        text = rule["rule"]
        uses_old = "oldSelf" in text
        if uses_old and old_node is _ABSENT:
            continue
        field = where
        if rule.get("fieldPath"):
            field = (where + rule["fieldPath"]) if where else rule["fieldPath"].lstrip(".")
        outcome, detail = _evaluate(text, rule.get("messageExpression"), node, old_node, uses_old)
        if outcome == "error":
            errors.append(FieldError(field, "FieldValueInvalid",
                                     f"{field}: Invalid value: {_quote(node)}: rule "
                                     f"evaluation error: {text}: {detail}"))
            continue
        if outcome == "pass":
            continue
        # On a failing messageExpression the API server falls back to the static message.
        message = detail if detail is not None else (rule.get("message") or f"failed rule: {text}")
        reason = {"FieldValueRequired": "FieldValueRequired",
                  "FieldValueForbidden": "FieldValueForbidden",
                  "FieldValueDuplicate": "FieldValueDuplicate"}.get(rule.get("reason", ""),
                                                                     "FieldValueInvalid")
        label = {"FieldValueRequired": "Required value", "FieldValueForbidden": "Forbidden",
                 "FieldValueDuplicate": "Duplicate value"}.get(reason)
        if label:
            text_out = f"{field}: {label}: {message}"
        else:
            text_out = f"{field}: Invalid value: {_quote(node)}: {message}"
        errors.append(FieldError(field, reason, text_out))
    return errors


_BODY_SCHEMAS: dict[int, tuple[Schema, Schema]] = {}


def _body_schema(schema: Schema) -> Schema:
    """The schema without ``metadata`` (the API server validates metadata itself), made
    once per schema so that its compiled validator is found again by identity."""
    hit = _BODY_SCHEMAS.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    body_schema = dict(schema)
    if "properties" in schema:
        body_schema["properties"] = {k: v for k, v in schema["properties"].items()
                                     if k != "metadata"}
    if "required" in schema:
        body_schema["required"] = [k for k in schema["required"] if k != "metadata"]
    if len(_BODY_SCHEMAS) >= _VALIDATORS_LIMIT:
        _BODY_SCHEMAS.pop(next(iter(_BODY_SCHEMAS)))
    _BODY_SCHEMAS[id(schema)] = (schema, body_schema)
    return body_schema


def admit(obj: dict[str, Any], schema: Schema, old: dict[str, Any] | None = None
          ) -> tuple[list[str], list[FieldError]]:
    """Prune, default and validate ``obj`` in place: (pruned paths, errors)."""
    pruned = prune(obj, schema)
    apply_defaults(obj, schema)
    body = {k: v for k, v in obj.items() if k != "metadata"}
    body_schema = _body_schema(schema)
    errors = schema_errors(body, body_schema)
    if not errors:  # the API server skips CEL when the schema already failed
        old_body: Any = _ABSENT if old is None else {k: v for k, v in old.items()
                                                      if k != "metadata"}
        errors = cel_errors(body, body_schema, old_body)
    return pruned, errors
