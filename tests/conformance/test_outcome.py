"""The outcome model's classes come from the spec: the codes that prove nothing was
written are exactly those the spec's error_codes describe so."""

import pytest

from retryproof.conformance.outcome import FAIL_CODES, classify, sent_digest
from retryproof.spec import load_spec
from retryproof.spec.digest import ContractError, request_digest
from retryproof.spec.protocol import Failure

SPEC = load_spec()


def test_fail_codes_are_the_codes_the_spec_says_write_nothing():
    codes = SPEC["protocol_spec"]["error_codes"]
    writes_nothing = {
        code for code, meaning in codes.items() if "nothing was written" in meaning or "nothing ran" in meaning
    }
    indeterminate = {
        code for code, meaning in codes.items() if "indeterminate" in meaning or "may have happened" in meaning
    }
    assert FAIL_CODES == set(SPEC["outcome_model"]["fail_codes"]) <= set(codes)
    assert writes_nothing <= FAIL_CODES and not FAIL_CODES & indeterminate
    assert "not_found" in FAIL_CODES


def test_a_code_outside_fail_codes_is_indeterminate():
    for code in SPEC["protocol_spec"]["error_codes"]:
        call = classify("write_task", {}, Failure(1, code, "x"), 0.0, 1)
        assert call.kind == ("fail" if code in FAIL_CODES else "info"), code


def test_a_digest_is_kept_per_task_never_across_tasks_one_json_text_may_stand_for():
    # A tuple reads as a list in JSON, and write-task-v1 refuses it: the kept digest of
    # the list version must not answer for it, nor the list's digest for other text.
    listed = {"sender": "a", "subject": "s", "references": ["r"]}
    assert sent_digest(listed) == request_digest(listed)
    with pytest.raises(ContractError):
        sent_digest({"sender": "a", "subject": "s", "references": ("r",)})
    assert sent_digest({**listed, "references": ["q"]}) == request_digest({**listed, "references": ["q"]})
    assert sent_digest(listed) == request_digest(listed)
