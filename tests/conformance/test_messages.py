"""Messages say what happened, in JSON, never a Python repr; the rule that failed comes
first; a hint follows the evidence. Each case is a real harness run through the CLI,
except the schema sentences, which are checked on the results themselves."""

import json
import os
import shlex

import pytest
from kit import REFERENCE, STDLIB_PYTHON, by_id, certify

from retryproof.conformance.validation import result_problem

HERE = os.path.dirname(__file__)
FAKE = os.path.join(HERE, "fake_harness.py")
BROKEN = os.path.join(HERE, "broken_runtimes.py")


def run_kit(tmp_path, harness, only, seed="3"):
    done, report = certify(tmp_path, harness, "--only", only, seed=seed, formats="json,md", in_process=True)
    return done, by_id(report)


def test_a_second_task_for_one_id_is_called_that_and_tallies_are_json(tmp_path):
    """Both tasks came from calls: the reason says a second task for one id, not that no
    call could have made them; A4's tally is JSON."""
    _, scenarios = run_kit(tmp_path, f"{STDLIB_PYTHON} {FAKE} double-create", "A2-RESPONSE-LOSS,A4-CONCURRENT")
    loss = scenarios["A2-RESPONSE-LOSS"]["reason"]
    assert "a second task for one id" in loss and "no call could have made" not in loss, loss
    race = scenarios["A4-CONCURRENT"]["reason"]
    # the tally after "got" is JSON (the fake's racing writes may add io_error to it)
    assert "created" in json.loads(race.split("; got ", 1)[1]), race


def test_a_schema_violation_names_the_path_and_the_rule_first_in_every_format(tmp_path):
    done, scenarios = run_kit(
        tmp_path, f"{STDLIB_PYTHON} {BROKEN} reuse-without-idempotent", "A2-RESPONSE-LOSS", seed="1"
    )
    reason = scenarios["A2-RESPONSE-LOSS"]["reason"]
    assert reason == 'write_task result violates its schema at (result) (rule required): "idempotent" is missing'
    assert reason in (tmp_path / "report.md").read_text().replace("\\_", "_")
    assert reason in done.stdout


@pytest.mark.parametrize(
    "change, says",
    [
        ({"conflict": {"reason": "digest_mismatch"}}, 'at (result) (rule not): "conflict" must be absent here'),
        ({"action_taken": False}, "at action_taken (rule const): false where the schema requires true"),
        ({"idempotent": "yes"}, 'at idempotent (rule type): "yes" is not of type boolean'),
    ],
)
def test_schema_sentences_are_json_with_the_rule_before_the_value(change, says):
    created = {
        "disposition": "created",
        "action_taken": True,
        "task_id": "T-1",
        "task_path": "tasks/T-1.json",
        "client_submission_id": "sub-1",
        "request_digest": "sha256:" + "0" * 64,
        "digest_schema_version": "write-task-v1",
        "idempotent": True,
    }
    assert result_problem("write_task", {**created, **change}) == f"write_task result violates its schema {says}"


def test_diagnostics_that_delete_the_receipt_are_reported_as_deleting_it(tmp_path):
    harness = shlex.join([*REFERENCE, "--fault", "diagnose-deletes-stalled"])
    _, scenarios = run_kit(tmp_path, harness, "STALE-RESERVATION-DIAGNOSTICS")
    reason = scenarios["STALE-RESERVATION-DIAGNOSTICS"]["reason"]
    assert "reading diagnostics deleted the receipt" in reason and "age_s" not in reason, reason


def test_a_fuzz_conflict_between_equal_digests_gets_no_normalization_hint(raw_request_compare):
    """The run is conftest.py's, which test_judging_holes reads too."""
    _, report = raw_request_compare
    reason = by_id(report)["FUZZ-MODEL"]["reason"]
    assert "the same request answered conflict" in reason and "both digests are sha256:" in reason, reason
    assert "key order" not in reason and "Unicode" not in reason
