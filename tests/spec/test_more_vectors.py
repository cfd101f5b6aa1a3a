"""The submission-id and approval request digest vectors agree with the shipped code
and the schemas, and hold what their usage notes promise."""

from __future__ import annotations

import hashlib
import json
from importlib import resources

import pytest

from retryproof.spec import load_spec, load_vectors, validator
from retryproof.spec.digest import ContractError, check_submission_id
from retryproof.spec.jcs import CanonicalizationError, canonical_bytes, loads_strict


def _raw(name: str) -> bytes:
    return resources.files("retryproof.spec").joinpath("vectors", name).read_bytes()


SUBMISSION_IDS = load_vectors("submission-id")["cases"]
REQUESTS = load_vectors("approval-request")["cases"]


def test_the_spec_names_both_files_and_they_are_ascii():
    spec = load_spec()
    assert spec["digest"]["submission_id"]["vectors"] == "vectors/submission-id.json"
    assert spec["approval"]["request_digest_vectors"] == "vectors/approval-request.json"
    for name in ("submission-id.json", "approval-request.json"):
        assert _raw(name).isascii(), name


@pytest.mark.parametrize("case", SUBMISSION_IDS, ids=[case["id"] for case in SUBMISSION_IDS])
def test_submission_id_case_matches_the_code_and_the_schema(case):
    value = case["client_submission_id"]
    assert ("valid" in case) != ("error" in case)
    schema_ok = validator("write-task-call").is_valid({"client_submission_id": value, "task": {}})
    try:
        check_submission_id(value)
        code = None
    except ContractError as exc:
        code = exc.code
    if case.get("valid"):
        assert code is None and schema_ok
        return
    assert code == case["error"]["code"] == "invalid_submission_id"
    # The schema's pattern follows ECMA-262, where $ matches only at the very end;
    # Python's re (which jsonschema uses) also matches $ before a final line feed.
    assert not schema_ok or (isinstance(value, str) and value.endswith("\n"))


def test_submission_id_vectors_cover_non_strings():
    kinds = {type(case["client_submission_id"]).__name__ for case in SUBMISSION_IDS if "error" in case}
    assert {"int", "float", "bool", "NoneType", "list", "dict", "str"} <= kinds


@pytest.mark.parametrize("case", REQUESTS, ids=[case["id"] for case in REQUESTS])
def test_request_case_matches_rfc8785_code(case):
    request = loads_strict(case["request_json"])
    if "error" in case:
        assert case["error"]["code"] == "invalid_request"
        with pytest.raises(CanonicalizationError):
            canonical_bytes(request)
        return
    canonical = case["canonical"].encode("utf-8")
    assert canonical_bytes(request) == canonical
    assert case["digest"] == "sha256:" + hashlib.sha256(canonical).hexdigest()


def test_request_vectors_pin_utf16_key_order_and_no_normalization():
    by_id = {case["id"]: case for case in REQUESTS}
    assert by_id["non-ascii-key-order"]["digest"] == by_id["key-order-same-request"]["digest"]
    keys = list(json.loads(by_id["non-ascii-key-order"]["canonical"]))
    assert keys != sorted(keys), "code point order would differ from the UTF-16 order the case pins"
    assert keys == sorted(keys, key=lambda key: key.encode("utf-16-be"))
    assert by_id["no-nfc"]["canonical"] != '{"\u00e9":4}'
