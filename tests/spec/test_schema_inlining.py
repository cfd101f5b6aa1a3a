"""``spec.validator`` resolves each ``$ref`` once, when it is built (``spec._inlined``):
it must judge every instance as the schema with its references does."""

from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator

from retryproof import spec
from retryproof.spec.protocol import PROTOCOL

CREATED = {
    "disposition": "created",
    "action_taken": True,
    "task_id": "t-1",
    "task_path": "tasks/t-1.json",
    "client_submission_id": "a-1",
    "request_digest": "sha256:" + "0" * 64,
    "digest_schema_version": "write-task-v1",
    "idempotent": True,
}
RESULTS = {
    "write_task": [
        CREATED,
        {**CREATED, "disposition": "reused", "action_taken": False},
        {**CREATED, "disposition": "unknown"},
        {**CREATED, "action_taken": False},
        {**CREATED, "request_digest": "md5:00"},
        {**CREATED, "task_path": 7},
        {**CREATED, "extra": 1},
        {key: value for key, value in CREATED.items() if key != "task_id"},
        {**CREATED, "disposition": "conflict", "action_taken": False, "conflict": {"reason": "digest_mismatch"}},
        {**CREATED, "disposition": "conflict", "action_taken": False, "conflict": {"reason": "other"}},
    ],
    "list_tasks": [
        {"tasks": []},
        {"tasks": [{key: CREATED[key] for key in ("task_id", "task_path", "client_submission_id", "request_digest")}]},
        {"tasks": [{"task_id": "t-1"}]},
        {"tasks": "none"},
    ],
    "diagnose": [
        {
            "state": "reserved",
            "task_id": "t-1",
            "task_path": "tasks/t-1.json",
            "task_exists": False,
            "digest_matches": None,
            "age_s": 0.5,
            "stalled": False,
        },
        {"state": "gone"},
    ],
    "hello": [{"protocol": PROTOCOL}, {}],
}


def _verdicts(validator: Draft202012Validator, instance: object) -> list[tuple[str, list[str], str]]:
    return sorted(
        (error.validator, list(map(str, error.absolute_path)), error.message)
        for error in validator.iter_errors(instance)
    )


@pytest.mark.parametrize("op", sorted(RESULTS))
def test_an_inlined_result_schema_judges_as_the_referencing_one(op):
    name = f"harness-response#/$defs/{op}_result"
    referencing = Draft202012Validator({"$ref": spec.SCHEMA_URN + name}, registry=spec._registry())
    inlined = spec.validator(name)
    assert "$ref" not in json.dumps(inlined.schema)
    for instance in RESULTS[op]:
        assert _verdicts(inlined, instance) == _verdicts(referencing, instance), instance


def test_whole_shipped_schemas_keep_no_reference_and_their_verdicts():
    task = {"sender": "PM", "recipient": "DEV", "subject": "s", "body": "b"}
    for name, instances in (
        ("task", [task, {**task, "extra": 1}, {**task, "references": [1]}]),
        (
            "write-task-call",
            [{"client_submission_id": "a-1", "task": task}, {"client_submission_id": "", "task": task}],
        ),
    ):
        referencing = Draft202012Validator(spec.schema(name), registry=spec._registry())
        inlined = spec.validator(name)
        for instance in instances:
            assert _verdicts(inlined, instance) == _verdicts(referencing, instance), (name, instance)


def test_a_reference_beside_other_keywords_applies_both_and_a_property_named_ref_is_a_name(monkeypatch):
    shipped = {
        "a": {
            "$defs": {"short": {"type": "string", "maxLength": 2}},
            "properties": {
                "x": {"$ref": "#/$defs/short", "minLength": 2},
                "$ref": {"type": "integer"},
            },
        }
    }
    monkeypatch.setattr(spec, "schema", lambda name: shipped[name])
    inlined = spec._inlined(shipped["a"], "a")
    assert inlined["properties"]["x"] == {"minLength": 2, "allOf": [{"type": "string", "maxLength": 2}]}
    assert inlined["properties"]["$ref"] == {"type": "integer"}
    check = Draft202012Validator(inlined)
    assert check.is_valid({"x": "ab", "$ref": 1})
    assert not check.is_valid({"x": "a"})  # minLength, beside the reference
    assert not check.is_valid({"x": "abc"})  # maxLength, from the reference
    assert not check.is_valid({"$ref": "1"})


def test_a_recursive_reference_stays_a_reference_that_names_its_own_document(monkeypatch):
    shipped = {
        "tree": {
            "$id": spec.SCHEMA_URN + "tree",
            "$defs": {"node": {"type": "object", "properties": {"children": {"items": {"$ref": "#/$defs/node"}}}}},
            "$ref": "#/$defs/node",
        }
    }
    monkeypatch.setattr(spec, "schema", lambda name: shipped[name])
    inlined = spec._inlined({"$ref": spec.SCHEMA_URN + "tree"}, "")
    children = inlined["properties"]["children"]["items"]
    assert children == {"$ref": spec.SCHEMA_URN + "tree#/$defs/node"}


def test_an_anchor_reference_stays_a_reference_the_registry_resolves(monkeypatch):
    """A fragment that is no JSON Pointer names an ``$anchor``: inlining it as a pointer
    would validate against the whole document instead."""
    anchored = {
        "$id": spec.SCHEMA_URN + "anchored.json",
        "type": "object",
        "properties": {"x": {"$ref": "#number"}},
        "$defs": {"n": {"$anchor": "number", "type": "number"}},
    }
    inlined = spec._inlined(anchored, "anchored.json")
    assert inlined["properties"]["x"] == {"$ref": spec.SCHEMA_URN + "anchored.json#number"}


@pytest.mark.parametrize("keyword", ["$dynamicRef", "$id"])
def test_a_schema_that_resolves_references_otherwise_is_refused(keyword):
    nested = {"type": "object", "properties": {"x": {keyword: "elsewhere.json", "type": "number"}}}
    with pytest.raises(ValueError, match="would resolve otherwise"):
        spec._inlined(nested, "nested.json")
