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


def mcp_binding(outcomes, **call):
    document = shipped("reference-mcp")
    document["answers"]["outcomes"] = outcomes
    document["call"].update(call)
    return parse(document, "patterns")


def test_a_pattern_tells_plain_text_errors_apart_and_never_matches_a_non_string():
    binding = mcp_binding(
        [
            {"when": {"isError": False}, "means": "created"},
            {"when": {"isError": True, "text": {"pattern": "different task$"}}, "means": "conflict"},
            {
                "when": {"isError": True, "text": {"pattern": "^Error executing tool \\w+: still pending"}},
                "means": "in_flight",
            },
        ]
    )
    sdk = "Error executing tool create_task: "
    conflict = {"isError": True, "text": sdk + "key used for a different task", "result": None}
    pending = {"isError": True, "text": sdk + "still pending, retry", "result": None}
    assert answers.meaning(binding, conflict).means == "conflict"
    assert answers.meaning(binding, pending).means == "in_flight"
    # searched, not matched whole: the prefix rule does not reach "still pending" mid-text
    assert answers.meaning(binding, {"isError": True, "text": "oops: still pending"}) is None
    assert answers.meaning(binding, {"isError": True, "text": {"code": 7}}) is None


def test_the_tool_shape_travels_as_mapped_with_its_constants():
    binding = mcp_binding(
        [{"when": {"isError": False}, "means": "created"}],
        task={"member": "ticket", "fields": {"subject": "title", "body": "text"}},
        constants={"project": "demo"},
    )
    assert binding.task_model == ("subject", "body") and not binding.says_reused
    sent = answers.call_arguments(binding, {"subject": "s", "body": "b"})
    assert sent == {"project": "demo", "ticket": {"title": "s", "text": "b"}}
    assert "recipient" in answers.call_arguments(binding, {"subject": "s", "recipient": "DEV"})


def test_without_a_reused_rule_the_listing_tells_reuse_from_creation():
    ledger = answers.Ledger()
    # eight racing calls all name one new effect: one made it, the others reused it
    assert [ledger.judge("T-1", set()) for _ in range(3)] == ["created", "reused", "reused"]
    assert ledger.judge("T-2", {"T-1", "T-2"}) == "reused"  # listed before the call
    assert ledger.judge("T-3", {"T-1", "T-2"}) == "created"
    assert answers.Ledger.of("/state/a") is answers.Ledger.of("/state/a")


def test_a_racing_call_that_listed_the_effect_first_does_not_take_the_creators_credit():
    # Call B read the listing after call A's effect appeared, and B's answer is judged
    # before A's: B reused it, and A, whose listing lacked it, still created it.
    ledger = answers.Ledger()
    assert ledger.judge("T-1", {"T-1"}) == "reused"
    assert ledger.judge("T-1", set()) == "created"
    assert ledger.judge("T-1", set()) == "reused"
