"""How a binding reads answers, without a server: rules in order, paths into the
answer's parts, and every unmapped answer indeterminate (info), never a pass."""

from __future__ import annotations

from binding_helpers import shipped

from retryproof.adapters.binding import answers, parse
from retryproof.conformance.outcome import classify
from retryproof.spec.protocol import Failure

HTTP = parse(shipped("reference-http"), "reference-http")


def http_answer(status, body=None, **headers):
    return {"status": status, "header": {name.lower(): value for name, value in headers.items()}, "body": body}


def test_rules_apply_in_order_and_headers_match_in_any_case():
    assert answers.meaning(HTTP, http_answer(201, {"task_id": "T-1"})).means == "created"
    replay = http_answer(200, {"task_id": "T-1"}, **{"Idempotent-Replayed": "true"})
    assert answers.meaning(HTTP, replay).means == "reused"
    bad_key = http_answer(400, {"error": {"code": "invalid_submission_id"}})
    assert answers.meaning(HTTP, bad_key).means == "invalid_key"
    assert answers.meaning(HTTP, http_answer(400, {"error": {"code": "other"}})).means == "invalid_request"


def test_an_unmapped_answer_is_info_never_a_pass():
    # 200 without the replay header, and a 500: no rule of the reference's binding maps them.
    for answer in (http_answer(200, {"task_id": "T-1"}), http_answer(500, "boom")):
        assert answers.meaning(HTTP, answer) is None
    reply = answers.unmapped("no outcome rule matches")
    assert isinstance(reply, Failure)
    assert classify("write_task", {}, reply, 0.0, 1).kind == "info"


def test_paths_reach_into_objects_and_arrays_and_miss_cleanly():
    answer = {"body": {"items": [{"id": 7}]}}
    assert answers.resolve(answer, "body.items.0.id") == 7
    assert not answers.found(answers.resolve(answer, "body.items.1.id"))
    assert not answers.found(answers.resolve(answer, "body.nothing"))
    assert answers.effect_id(7) == "7" and answers.effect_id(True) is None and answers.effect_id("") is None


def test_a_task_field_the_binding_cannot_name_is_not_sent():
    document = shipped("reference-mcp")
    document["call"]["task"] = {"fields": {"subject": "title"}}
    binding = parse(document, "renamed")
    assert answers.call_arguments(binding, {"subject": "x", "priority": None}) == {"title": "x"}
    assert "priority" in answers.call_arguments(binding, {"subject": "x", "priority": "P1"})


def test_a_stored_task_in_json_text_is_read_back_under_the_task_names():
    document = shipped("reference-mcp")
    document["call"]["task"] = {"fields": {"subject": "title"}}
    binding = parse(document, "renamed")
    item = {"task_id": "T-1", "client_submission_id": "k-1", "task": '{"title": "Fix", "extra": 1}'}
    listed = answers.listed_tasks(binding, {"result": {"tasks": [item]}})
    assert listed[0]["task"] == {"subject": "Fix"} and listed[0]["client_submission_id"] == "k-1"
