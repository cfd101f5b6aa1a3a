"""Run-time validation of harness results: an answer found valid is not validated again,
an invalid one is judged every time it comes."""

from __future__ import annotations

import pytest

from retryproof.conformance import validation
from retryproof.conformance.validation import result_problem


def test_a_result_found_valid_is_not_validated_again_and_an_invalid_one_always_is(monkeypatch):
    created = {
        "disposition": "created",
        "action_taken": True,
        "task_id": "T-memo",
        "task_path": "tasks/T-memo.json",
        "client_submission_id": "rp-memo",
        "request_digest": "sha256:" + "0" * 64,
        "digest_schema_version": "write-task-v1",
        "idempotent": True,
    }
    real = validation._validator
    checked: list[object] = []

    class Counting:
        def __init__(self, op: str):
            self.validator = real(op)

        def iter_errors(self, instance):
            checked.append(instance)
            return self.validator.iter_errors(instance)

    monkeypatch.setattr(validation, "_validator", Counting)
    monkeypatch.setattr(validation, "_valid_records", set())
    assert result_problem("write_task", created) is None
    assert result_problem("write_task", dict(reversed(created.items()))) is None  # the same JSON
    assert checked == [created]
    broken = {**created, "action_taken": False}  # created holds exactly when action_taken is true
    for _ in range(2):
        problem = result_problem("write_task", broken)
        assert problem is not None and problem.startswith("write_task result violates its schema"), problem
    assert checked.count(broken) == 2
    assert result_problem("diagnose", created) is not None  # known valid as a write_task result only


def test_a_result_of_megabytes_is_validated_each_time_not_kept(monkeypatch):
    """Kept texts are bounded in size as in number: a run that reads tasks of megabytes
    would otherwise hold each one for the rest of the process."""
    big = {
        "task_id": "T-big",
        "task": {"subject": "s", "body": "x" * (validation._MAX_REMEMBERED_CHARS + 1)},
        "client_submission_id": "rp-big",
        "request_digest": "sha256:" + "0" * 64,
    }
    monkeypatch.setattr(validation, "_valid_records", set())
    assert result_problem("read_task", big) is None
    assert validation._valid_records == set()
    small = {**big, "task": {"subject": "s"}}
    assert result_problem("read_task", small) is None
    assert len(validation._valid_records) == 1


def test_a_validator_that_cannot_be_built_fails_where_the_cli_reports_it_not_on_its_thread(monkeypatch):
    """The build on the handshake's thread swallows its failure (a traceback of that
    thread would precede the kit's own error line); the caller's build raises it."""
    validation._validator.cache_clear()
    monkeypatch.setattr(validation.spec, "validator", lambda ref: (_ for _ in ()).throw(ImportError("no jsonschema")))
    validation.prepare("hello")  # nothing raised
    with pytest.raises(ImportError, match="no jsonschema"):
        validation.result_problem("hello", {})
    validation._validator.cache_clear()
