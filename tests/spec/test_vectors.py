"""The golden vectors: well-formed, grouped into true equivalence classes, and right.

"Right" is decided twice: by ``retryproof.spec.digest`` (what the kit and the reference runtime
use) and by ``independent_digest`` (written from the brief's rules, sharing no code), so
the vectors cannot merely echo the code that generated them.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict

import independent_digest as independent
import pytest

from retryproof.spec import load_spec, load_vectors
from retryproof.spec.digest import (
    DIGEST_SCHEMA_VERSION,
    ContractError,
    canonical_json,
    request_digest,
)
from retryproof.spec.jcs import DuplicateKeyError, loads_strict

VECTORS = load_vectors()
CASES = VECTORS["cases"]
VALID = [case for case in CASES if "digest" in case]
INVALID = [case for case in CASES if "error" in case]


def task_of(case):
    return loads_strict(case["task_json"]) if "task_json" in case else case["task"]


def spec_answer(case) -> tuple[str, str]:
    """``("ok", digest)`` or ``(code, field)`` from the shipped implementation."""
    try:
        return "ok", request_digest(task_of(case))
    except DuplicateKeyError as exc:
        return "invalid_request", exc.field("task")
    except ContractError as exc:
        return exc.code, exc.field


def independent_answer(case) -> tuple[str, str]:
    try:
        task = independent.parse_task_text(case["task_json"]) if "task_json" in case else case["task"]
        return "ok", independent.digest(task)
    except independent.Rejected as exc:
        return "invalid_request", exc.field


def test_the_file_is_big_enough_and_well_formed():
    assert VECTORS["digest_schema_version"] == DIGEST_SCHEMA_VERSION
    assert load_spec()["digest"]["vectors"] == "vectors/write-task-v1.json"
    assert len(CASES) >= 60
    ids = [case["id"] for case in CASES]
    assert len(ids) == len(set(ids)), "case ids are unique"
    for case in CASES:
        assert case["group"] in VECTORS["groups"], case["id"]
        assert ("task" in case) != ("task_json" in case), case["id"]
        assert ("error" in case) != ("digest" in case and "canonical" in case), case["id"]
        assert ("error" in case) == case["group"].startswith("invalid-"), case["id"]
    assert set(VECTORS["groups"]) == {case["group"] for case in CASES}, "no empty group"


def test_the_file_is_ascii_so_no_tool_can_normalize_the_inputs():
    from importlib import resources

    raw = resources.files("retryproof.spec").joinpath("vectors", "write-task-v1.json").read_bytes()
    assert raw.isascii()


@pytest.mark.parametrize("case", VALID, ids=[case["id"] for case in VALID])
def test_valid_case_matches_both_implementations(case):
    task = task_of(case)
    canonical = case["canonical"].encode("utf-8")
    assert case["digest"] == "sha256:" + hashlib.sha256(canonical).hexdigest()
    assert canonical_json(task) == canonical
    assert request_digest(task) == case["digest"]
    parsed = independent.parse_task_text(case["task_json"]) if "task_json" in case else case["task"]
    assert independent.canonical_text(parsed) == canonical
    assert independent.digest(parsed) == case["digest"]


@pytest.mark.parametrize("case", INVALID, ids=[case["id"] for case in INVALID])
def test_invalid_case_names_its_code_and_field_in_both_implementations(case):
    expected = (case["error"]["code"], case["error"]["field"])
    assert spec_answer(case) == expected
    assert independent_answer(case) == expected


def test_members_of_a_group_share_one_digest_and_groups_differ():
    by_group = defaultdict(set)
    for case in VALID:
        by_group[case["group"]].add(case["digest"])
    assert all(len(digests) == 1 for digests in by_group.values()), by_group
    owners = defaultdict(list)
    for group, (digest,) in by_group.items():
        owners[digest].append(group)
    assert [groups for groups in owners.values() if len(groups) > 1] == []


def test_every_rule_has_vectors():
    """Each rule of the brief is pinned by at least one group (names are the index)."""
    groups = set(VECTORS["groups"])
    for rule in [
        "base-task",
        "subject-only",
        "empty-task",
        "empty-string-subject",
        "array-order-ab",
        "array-order-ba",
        "line-endings-lf",
        "line-endings-in-arrays",
        "unicode-line-separators",
        "nfc-cafe",
        "nfc-combining-order",
        "nfc-hangul",
        "nfc-ohm",
        "compat-fi-ligature",
        "control-characters",
        "escapes-in-input",
        "non-bmp",
        "invalid-unknown-field",
        "invalid-invocation-field",
        "invalid-scalar-type",
        "invalid-array-type",
        "invalid-array-item",
        "invalid-lone-surrogate",
        "invalid-duplicate-key",
    ]:
        assert rule in groups, rule
