"""Admission caches (compiled validators, CEL outcomes) never change an answer.

The emulator remembers each CEL rule's outcome by the JSON of ``self`` (and
``oldSelf``) and each schema's compiled validator by identity; these tests pin
that a cached answer is only ever reused for the very same input.
"""

from __future__ import annotations

import copy

from harness import schema as schemas


def _schema(rule: dict, prop: dict | None = None) -> dict:
    return {"type": "object", "properties": {
        "spec": {"type": "object", "x-kubernetes-validations": [rule],
                 "properties": {"a": prop or {"x-kubernetes-int-or-string": True}}}}}


def _errors(obj: dict, schema: dict, old: dict | None = None) -> list[str]:
    return [e.message for e in schemas.admit(copy.deepcopy(obj), schema, old)[1]]


def test_cel_outcome_depends_on_old_self():
    schema = _schema({"rule": "self.a >= oldSelf.a", "message": "a may only grow"})
    new = {"spec": {"a": 2}}
    assert _errors(new, schema, {"spec": {"a": 1}}) == []
    assert _errors(new, schema, {"spec": {"a": 3}}) == ["spec: Invalid value: \"object\": a may only grow"]
    assert _errors(new, schema, {"spec": {"a": 1}}) == []  # the same input again: the same answer
    assert _errors(new, schema) == []  # a create: transition rules do not run


def test_cel_outcome_tells_json_types_apart():
    schema = _schema({"rule": "type(self.a) == int", "message": "a must be an integer"})
    assert _errors({"spec": {"a": 1}}, schema) == []
    assert _errors({"spec": {"a": "1"}}, schema) == ["spec: Invalid value: \"object\": a must be an integer"]
    assert _errors({"spec": {"a": 1}}, schema) == []


def test_cel_message_expression_follows_the_value():
    schema = _schema({"rule": "self.a < 10", "messageExpression": "'a is ' + string(self.a)"})
    assert _errors({"spec": {"a": 11}}, schema) == ["spec: Invalid value: \"object\": a is 11"]
    assert _errors({"spec": {"a": 12}}, schema) == ["spec: Invalid value: \"object\": a is 12"]
    assert _errors({"spec": {"a": 11}}, schema) == ["spec: Invalid value: \"object\": a is 11"]


def test_cel_evaluation_error_is_reported_every_time():
    schema = _schema({"rule": "self.b == 1"})
    for _ in range(2):
        [message] = _errors({"spec": {"a": 1}}, schema)
        assert message.startswith("spec: Invalid value: \"object\": rule evaluation error: self.b == 1")


def test_each_schema_validates_with_its_own_validator():
    integer = _schema({"rule": "true"}, {"type": "integer"})
    string = _schema({"rule": "true"}, {"type": "string"})
    obj = {"spec": {"a": 5}}
    for _ in range(2):
        assert _errors(obj, integer) == []
        assert _errors(obj, string) == [
            'spec.a: Invalid value: "integer": spec.a in body must be of type string: "integer"']
    # An equal copy is a different schema object: answered alike, never confused.
    assert _errors(obj, copy.deepcopy(string)) == _errors(obj, string)


def test_unchanged_spec_errors_are_reported_on_every_write():
    schema = {"type": "object", "required": ["spec"], "properties": {
        "spec": {"type": "object", "properties": {"a": {"type": "integer"}}},
        "status": {"type": "object", "properties": {"b": {"type": "string"}}}}}
    bad_spec = 'spec.a: Invalid value: "string": spec.a in body must be of type integer: "string"'
    bad_status = 'status.b: Invalid value: "integer": status.b in body must be of type string: "integer"'
    assert [e.message for e in schemas.schema_errors({"spec": {"a": "x"}, "status": {"b": 1}}, schema)] == [
        bad_spec, bad_status]
    assert [e.message for e in schemas.schema_errors({"spec": {"a": "x"}, "status": {"b": "ok"}}, schema)] == [
        bad_spec]
    assert [e.message for e in schemas.schema_errors({"status": {"b": 1}}, schema)] == [
        "spec: Required value", bad_status]
    assert schemas.schema_errors({"spec": {"a": 1}, "status": {"b": "ok"}}, schema) == []


def test_rules_are_keyed_by_what_they_read_of_self():
    assert schemas._reads("has(self.a) || self.b == 'x'") == ((("a",), True), (("b",), False))
    assert schemas._reads("has(self.a.b) && size(self.c) > 0") == ((("a", "b"), True), (("c",), False))
    assert schemas._reads("type(self) == string") is None  # all of self
    assert schemas._reads("self.all(k, k != 'x')") is None
    assert schemas._reads("self.x == oldSelf.x") is None
    reads = schemas._reads("has(self.a.b) || self.c == 1")
    assert reads is not None
    seen = [schemas._projection(node, reads) for node in (
        {"a": {"b": 1, "z": 2}, "c": 1, "q": "one"}, {"a": {"b": 5}, "c": 1, "q": "two"},
        {"a": {}, "c": 1}, {"a": "text", "c": 1}, {"c": 2})]
    assert seen[0] == seen[1]  # same presence of a.b, same c: one outcome
    assert len({repr(s) for s in seen[1:]}) == 4  # everything the rule can tell apart stays apart


def test_shared_outcomes_still_answer_for_each_value():
    schema = _schema({"rule": "has(self.a) ? self.b != 'bad' : true", "message": "b is bad"},
                     {"type": "string"})
    schema["properties"]["spec"]["properties"]["b"] = {"type": "string"}
    assert _errors({"spec": {"a": "q1", "b": "ok"}}, schema) == []
    assert _errors({"spec": {"a": "q2", "b": "bad"}}, schema) == ["spec: Invalid value: \"object\": b is bad"]
    assert _errors({"spec": {"b": "bad"}}, schema) == []
    assert _errors({"spec": {"a": "q3", "b": "bad"}}, schema) == ["spec: Invalid value: \"object\": b is bad"]
