"""The retryproof-harness/1 line codec and server loop, checked against the shipped schemas."""

from __future__ import annotations

import io
import json

import pytest

from retryproof.spec import validator
from retryproof.spec.digest import ContractError
from retryproof.spec.protocol import (
    Failure,
    ProtocolError,
    Request,
    Success,
    decode_request,
    decode_response,
    encode,
    format_failpoints,
    parse_failpoints,
    serve,
)


def test_messages_round_trip_and_match_the_schemas():
    request = Request(7, "write_task", {"client_submission_id": "sub-1", "task": {"subject": "caf\u00e9 \u2028"}})
    assert decode_request(encode(request)) == request
    assert validator("harness-request").is_valid(json.loads(encode(request)))
    for response in (
        Success(7, {"state": "approved"}),
        Failure(7, "not_found", "no such operation"),
        Failure(None, "bad_message", "x"),
    ):
        line = encode(response)
        assert line.endswith(b"\n") and line.count(b"\n") == 1
        assert decode_response(line) == response
        assert validator("harness-response").is_valid(json.loads(line))


@pytest.mark.parametrize(
    "line",
    [
        b"not json",
        b"[1]",
        b'{"op": "hello", "args": {}}',
        b'{"id": true, "op": "hello"}',
        b'{"id": 1, "op": 3}',
        b'{"id": 1, "op": "x", "args": []}',
        b"\xff\xfe",
        b'{"id": 1, "op": "x", "args": {"n": NaN}}',
        b'{"id": 1, "id": 2, "op": "x"}',
        b'{"id": 1, "op": "list_tasks"}',
        b'{"id": 1, "op": "list_tasks", "args": {}, "trace_id": "t-1"}',
    ],
)
def test_a_line_that_is_not_a_request_is_bad_message(line):
    with pytest.raises(ProtocolError) as caught:
        decode_request(line)
    assert caught.value.code == "bad_message"


def test_a_line_without_args_or_with_an_extra_key_is_answered_under_its_id():
    """PROTOCOL-R6: such a line carries an integer id, so the answer may name it."""
    for line in (b'{"id": 4, "op": "list_tasks"}', b'{"id": 4, "op": "list_tasks", "args": {}, "x": 1}'):
        with pytest.raises(ProtocolError) as caught:
            decode_request(line)
        assert (caught.value.code, caught.value.request_id) == ("bad_message", 4)


def test_whitespace_lines_get_no_answer_and_end_of_input_ends_serving():
    """PROTOCOL-R7 and PROTOCOL-R10: only JSON whitespace is ignored; at the end of
    stdin without shutdown the calls in flight finish and ``serve`` returns."""
    stdin = io.BytesIO(b" \t \r\n\n" + encode(Request(1, "echo")) + b"\x0c\n")
    stdout = io.BytesIO()
    serve({"echo": lambda args: {}}, stdin, stdout)
    answers = [decode_response(line) for line in stdout.getvalue().splitlines()]
    assert Success(1, {}) in answers and len(answers) == 2
    # A form feed is not JSON whitespace: that line is bad_message.
    assert [(answer.id, answer.code) for answer in answers if isinstance(answer, Failure)] == [(None, "bad_message")]


def test_a_duplicate_key_in_the_args_is_that_requests_invalid_request():
    line = b'{"id": 9, "op": "write_task", "args": {"task": {"subject": "a", "subject": "b"}}}'
    with pytest.raises(ProtocolError) as caught:
        decode_request(line)
    assert (caught.value.code, caught.value.request_id) == ("invalid_request", 9)
    assert "args.task.subject" in caught.value.message


@pytest.mark.parametrize(
    "line",
    [
        b'{"id": 1, "ok": true}',
        b'{"id": null, "ok": true, "result": {}}',
        b'{"id": 1, "ok": false, "error": {"message": "x"}}',
        b'{"id": "1", "ok": true, "result": {}}',
    ],
)
def test_a_response_that_breaks_the_envelope_is_bad_message(line):
    with pytest.raises(ProtocolError) as caught:
        decode_response(line)
    assert caught.value.code == "bad_message"


def test_failpoints_parse_and_format_round_trip():
    text = "write_task.after_reserve=crash,approval.audit_completed=fail"
    assert parse_failpoints(text) == {"write_task.after_reserve": "crash", "approval.audit_completed": "fail"}
    assert format_failpoints(parse_failpoints(text)) == text
    assert parse_failpoints(None) == parse_failpoints("") == {}


@pytest.mark.parametrize("text", ["write_task.after_reserve", "x=explode", "=crash"])
def test_a_bad_failpoint_is_refused(text):
    with pytest.raises(ValueError, match="bad failpoint"):
        parse_failpoints(text)


def test_serve_answers_every_request_with_a_typed_outcome_and_keeps_serving():
    def reject(args):
        raise ContractError("invalid_request", "task.subject", "must be a string")

    def disk_full(args):
        raise OSError(28, "No space left on device")

    def bug(args):
        raise KeyError("oops")

    handlers = {"echo": lambda args: dict(args), "reject": reject, "disk_full": disk_full, "bug": bug}
    lines = [
        Request(1, "echo", {"a": 1}),
        Request(2, "reject"),
        Request(3, "disk_full"),
        Request(4, "bug"),
        Request(5, "nope"),
    ]
    stdin = io.BytesIO(
        b"".join(map(encode, lines)) + b"garbage\n\n" + encode(Request(6, "echo")) + encode(Request(7, "shutdown"))
    )
    stdout = io.BytesIO()
    serve(handlers, stdin, stdout)
    answers = {message.id: message for message in map(decode_response, stdout.getvalue().splitlines())}
    assert answers[1] == Success(1, {"a": 1})
    assert {key: answers[key].code for key in (2, 3, 4, 5, None)} == {
        2: "invalid_request",
        3: "io_error",
        4: "internal_error",
        5: "unknown_op",
        None: "bad_message",
    }
    assert answers[6] == Success(6, {}) and answers[7] == Success(7, {})
    assert list(answers)[-1] == 7, "shutdown is answered last, after the calls in flight"
    for line in stdout.getvalue().splitlines():
        assert validator("harness-response").is_valid(json.loads(line))


def test_hello_handler_answers_the_declarations_and_refuses_another_protocol():
    from retryproof.spec.digest import ContractError
    from retryproof.spec.protocol import PROTOCOL, hello_handler

    hello = hello_handler(
        {"name": "x", "version": "1", "language": "go"}, ("write_task",), ("write_task.after_commit",)
    )
    greeting = hello({"protocol": PROTOCOL})
    assert greeting["capabilities"] == ["write_task"] and greeting["failpoints"] == ["write_task.after_commit"]
    assert greeting["digest_schema_version"] == "write-task-v1" and greeting["implementation"]["language"] == "go"
    for args in ({"protocol": "retryproof-harness/2"}, {}, {"protocol": PROTOCOL, "extra": 1}):
        with pytest.raises(ContractError) as raised:
            hello(args)
        assert raised.value.code == "invalid_request"


def test_hello_is_read_once_into_sets_and_keeps_the_answer_as_given():
    import pickle

    from retryproof.spec.protocol import Hello, greeting

    answer = greeting(
        {"name": "x", "version": "1", "language": "go"},
        ("write_task", "tamper", "legacy"),
        ("write_task.after_commit",),
        ("remove_task",),
    )
    hello = Hello.read(answer)
    assert hello.capabilities == {"write_task", "tamper", "legacy"} and hello.failpoints == {"write_task.after_commit"}
    assert hello.listed("capabilities") == ("write_task", "tamper", "legacy")  # the runtime's order, for reports
    assert hello.implementation["name"] == "x" and hello.digest_schema_version == "write-task-v1"
    assert hello.performs("remove_task") and not hello.performs("occupy_task_path")
    assert dict(hello.result) == answer and pickle.loads(pickle.dumps(hello)) == hello
    with pytest.raises(AttributeError):
        hello.capabilities = frozenset()
    # Declaring tamper without a list of actions means every action; without tamper, none.
    assert Hello.read({**answer, "tamper_actions": None}).performs("occupy_task_path")
    assert not Hello.read({**answer, "capabilities": ["write_task"]}).performs("remove_task")
    # What a binding or a test hands over may be less than a checked answer: missing is empty.
    empty = Hello.read({})
    assert (empty.capabilities, empty.failpoints, dict(empty.implementation), empty.tamper_actions) == (
        frozenset(),
        frozenset(),
        {},
        None,
    )
