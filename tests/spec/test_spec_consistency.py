"""spec/retryproof.yaml agrees with itself, with the schemas and with spec.digest.

Every cross-reference in the YAML resolves, and every list that appears both in the
YAML and in a schema (capabilities, failpoints, states, reasons, fields) is one list.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from importlib import resources

import pytest

from retryproof.spec import SPEC_VERSION, load_spec, schema
from retryproof.spec.digest import (
    ARRAY_FIELDS,
    DIGEST_SCHEMA_VERSION,
    SCALAR_FIELDS,
    SUBMISSION_ID_PATTERN,
)
from retryproof.spec.protocol import FAILPOINT_ACTIONS, PROTOCOL

SPEC = load_spec()
PROTO = SPEC["protocol_spec"]
REQUIREMENTS = {requirement["id"]: requirement for requirement in SPEC["requirements"]}
RESPONSE_DEFS = schema("harness-response")["$defs"]
REQUEST_DEFS = schema("harness-request")["$defs"]


def test_versions_agree():
    assert SPEC["spec_version"] == SPEC_VERSION
    assert (
        SPEC["protocol"]
        == PROTO["name"]
        == PROTOCOL
        == RESPONSE_DEFS["hello_result"]["properties"]["protocol"]["const"]
    )
    assert SPEC["digest"]["schema_version"] == DIGEST_SCHEMA_VERSION


def test_every_vector_file_names_the_spec_version_it_ships_with():
    """A vendor who copies one vector file needs to know which contract it belongs to."""
    vectors = [
        path for path in resources.files("retryproof.spec").joinpath("vectors").iterdir() if path.name.endswith(".json")
    ]
    assert vectors
    for path in vectors:
        assert json.loads(path.read_text(encoding="utf-8"))["spec_version"] == SPEC_VERSION, path.name


@pytest.mark.parametrize("section", ["requirements", "scenarios"])
def test_ids_are_unique(section):
    counts = Counter(entry["id"] for entry in SPEC[section])
    assert [name for name, count in counts.items() if count > 1] == []


def test_requirements_have_a_level_text_and_known_checklist_questions():
    for requirement in SPEC["requirements"]:
        assert requirement["level"] in ("MUST", "SHOULD", "MAY"), requirement["id"]
        assert requirement["text"].strip(), requirement["id"]
        assert set(requirement["checklist"]) <= set(SPEC["checklist"]), requirement["id"]


def test_every_scenario_checks_known_requirements_and_every_requirement_is_checked():
    checked = set()
    for scenario in SPEC["scenarios"]:
        assert scenario["checks"], scenario["id"]
        assert set(scenario["checks"]) <= set(REQUIREMENTS), scenario["id"]
        assert scenario["checklist"] and set(scenario["checklist"]) <= set(SPEC["checklist"]), scenario["id"]
        assert scenario["level"] in ("MUST", "SHOULD", "MAY"), scenario["id"]
        checked.update(scenario["checks"])
    assert set(REQUIREMENTS) - checked == set()


def test_every_checklist_question_is_answered_by_some_scenario():
    answered = {question for scenario in SPEC["scenarios"] for question in scenario["checklist"]}
    assert set(SPEC["checklist"]) - answered == set()


def test_every_need_is_a_capability_a_failpoint_a_tamper_action_a_protocol_part_or_a_tool():
    assert set(PROTO["needs"]) == {"capability", "failpoint", "tool", "tamper", "protocol"}
    for scenario in SPEC["scenarios"]:
        for need in scenario["needs"]:
            kind, _, name = need.partition(":")
            if not name:
                assert need in PROTO["capabilities"], (scenario["id"], need)
            elif kind == "failpoint":
                assert name in PROTO["failpoints"], (scenario["id"], need)
            elif kind == "tamper":
                assert name in PROTO["tamper_actions"] and "tamper" in scenario["needs"], (scenario["id"], need)
            elif kind == "protocol":
                assert name in PROTO["protocol_parts"], (scenario["id"], need)
            else:
                assert kind == "tool" and name, (scenario["id"], need)


def test_every_op_has_a_request_and_a_result_schema_and_nothing_else_does():
    ops = set(PROTO["ops"])
    assert set(schema("harness-request")["properties"]["op"]["enum"]) == ops
    assert {name[: -len("_args")] for name in REQUEST_DEFS if name.endswith("_args")} == ops
    assert {name[: -len("_result")] for name in RESPONSE_DEFS if name.endswith("_result")} == ops


def test_every_op_names_a_declared_capability_and_declared_error_codes():
    for op, entry in PROTO["ops"].items():
        assert entry["capability"] is None or entry["capability"] in PROTO["capabilities"], op
        assert set(entry.get("errors", [])) <= set(PROTO["error_codes"]), op


def test_outcome_classes_use_declared_error_codes():
    prose = SPEC["outcome_model"]["fail"] + SPEC["outcome_model"]["info"]
    named = set(re.findall(r"\b(?:[a-z]+(?:_[a-z]+)+|[A-Z]+(?:_[A-Z]+)+)\b", prose))
    assert "in_progress" in named and "AUDIT_WRITE_FAILED" in named
    assert named - set(PROTO["error_codes"]) == set()


def test_hello_lists_are_the_declared_ones():
    hello = RESPONSE_DEFS["hello_result"]["properties"]
    assert hello["capabilities"]["items"]["enum"] == list(PROTO["capabilities"])
    assert hello["failpoints"]["items"]["enum"] == list(PROTO["failpoints"])
    assert hello["digest_schema_version"]["const"] == DIGEST_SCHEMA_VERSION
    assert set(FAILPOINT_ACTIONS) == {"crash", "fail"}


def test_tamper_actions_are_the_declared_ones():
    actions = REQUEST_DEFS["tamper_args"]["properties"]["action"]["enum"]
    assert actions == list(PROTO["tamper_actions"])


def test_tool_paths_are_capabilities_and_the_checklist_asks_about_one():
    tool_paths = SPEC["verdict"]["tool_paths"]
    assert set(tool_paths) == {"write_task", "approval"} <= set(PROTO["capabilities"])
    assert SPEC["verdict"]["checklist_tool_path"] in tool_paths
    capabilities = RESPONSE_DEFS["hello_result"]["properties"]["capabilities"]
    assert [branch["contains"]["const"] for branch in capabilities["anyOf"]] == list(tool_paths)


def test_after_crash_gives_each_executor_an_outcome_and_a_reason():
    after_crash = SPEC["approval"]["after_crash"]
    assert set(after_crash) == set(SPEC["approval"]["executors"])
    for executor, owed in after_crash.items():
        assert set(owed) == {"outcome", "reason"} and owed["outcome"] in SPEC["approval"]["outcomes"], executor


def test_approval_vocabulary_is_one_list():
    approval = SPEC["approval"]
    assert RESPONSE_DEFS["approval_state"]["enum"] == approval["states"]
    assert RESPONSE_DEFS["recover_result"]["properties"]["outcome"]["enum"] == list(approval["outcomes"])
    assert REQUEST_DEFS["propose_args"]["properties"]["executor"]["enum"] == list(approval["executors"])


def test_task_schema_has_exactly_the_digest_fields():
    fields = SPEC["digest"]["task_fields"]
    assert (tuple(fields["scalars"]), tuple(fields["arrays"])) == (SCALAR_FIELDS, ARRAY_FIELDS)
    assert list(schema("task")["properties"]) == [*SCALAR_FIELDS, *ARRAY_FIELDS]


def test_submission_id_pattern_is_one_pattern():
    pattern = schema("write-task-call")["$defs"]["client_submission_id"]["pattern"]
    assert pattern == SPEC["digest"]["submission_id"]["pattern"] == f"^{SUBMISSION_ID_PATTERN.pattern}$"


def test_creation_result_matches_the_dispositions_section():
    dispositions = SPEC["dispositions"]
    result = schema("creation-result")
    assert result["required"] == dispositions["result_fields"]
    assert result["properties"]["disposition"]["enum"] == ["created", "reused", "conflict"]
    assert result["$defs"]["conflict"]["properties"]["reason"]["enum"] == list(dispositions["conflict_reasons"])


def test_receipt_and_diagnostics_states_match_the_receipt_section():
    states = [state["name"] for state in SPEC["receipt"]["states"]]
    receipt = schema("receipt")
    assert receipt["properties"]["state"]["enum"] == states
    # The reference runtime's record keeps every fact the contract makes durable.
    assert set(SPEC["receipt"]["states"][0]["durable_facts"]) <= set(receipt["required"])
    assert [state["recovery"] for state in SPEC["receipt"]["states"]] == ["RECEIPT-R1", "RECEIPT-R2", "RECEIPT-R3"]
    assert schema("diagnostics")["properties"]["state"]["enum"] == ["absent", *states]
    assert RESPONSE_DEFS["diagnose_result"] == {"$ref": "urn:retryproof:schema:diagnostics"}


def test_every_schema_path_named_in_the_yaml_exists():
    shipped = {entry.name for entry in resources.files("retryproof.spec").joinpath("schemas").iterdir()}

    def paths(node):
        if isinstance(node, dict):
            for value in node.values():
                yield from paths(value)
        elif isinstance(node, list):
            for value in node:
                yield from paths(value)
        elif isinstance(node, str) and node.startswith("schemas/"):
            yield node

    named = set(paths(SPEC))
    assert named, "the YAML names its schemas"
    assert {path.removeprefix("schemas/") for path in named} - shipped == set()


CONTRACT = {section: body for section, body in SPEC.items() if section != "examples"}
RULE_ID = re.compile(r"^[A-Z]+-R[1-9][0-9]*$")


def _rules():
    return [rule for body in CONTRACT.values() if isinstance(body, dict) for rule in body.get("rules", [])]


def _nodes(node, path=()):
    yield path, node
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _nodes(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _nodes(value, (*path, index))


def test_every_rule_has_a_stable_id_and_a_string_text():
    rules = _rules()
    assert len(rules) >= 100
    for rule in rules:
        assert isinstance(rule, dict) and set(rule) == {"id", "text"}, rule
        assert isinstance(rule["id"], str) and RULE_ID.match(rule["id"]), rule
        assert isinstance(rule["text"], str) and rule["text"].strip(), rule["id"]
    ids = [rule["id"] for rule in rules]
    assert [name for name, count in Counter(ids).items() if count > 1] == []
    assert set(ids).isdisjoint(REQUIREMENTS)


def test_rules_are_numbered_per_section_under_one_prefix():
    """A section's rules share one prefix and run R1, R2, ... so an id never moves to
    another section and a gap shows a rule that was removed (ids are not reused)."""
    for section, body in CONTRACT.items():
        if isinstance(body, dict) and "rules" in body:
            ids = [rule["id"] for rule in body["rules"]]
            prefixes = {rule_id.split("-R")[0] for rule_id in ids}
            assert len(prefixes) == 1, (section, prefixes)
            assert [int(rule_id.split("-R")[1]) for rule_id in ids] == list(range(1, len(ids) + 1)), section


def test_no_prose_hides_outside_the_rules():
    """Normative prose is a rule (id, text), a requirement or a scenario; a list of
    strings elsewhere holds names only. This also catches a sentence with an unquoted
    ': ', which YAML silently parses as a one-key mapping."""
    top = {key: value for key, value in CONTRACT.items() if key not in ("requirements", "scenarios")}
    for path, node in _nodes(top):
        if not isinstance(node, list) or path[-1] == "rules":
            continue
        for item in node:
            if isinstance(item, str) and path[-1] != "durable_facts":
                assert " " not in item.strip(), (path, item)
            assert not (isinstance(item, dict) and len(item) == 1), (path, item)


def test_every_rule_id_named_in_the_spec_exists():
    known = {rule["id"] for rule in _rules()}
    named = set()
    for _, node in _nodes(CONTRACT):
        if isinstance(node, str):
            named.update(re.findall(r"\b[A-Z]+-R[0-9]+\b", node))
    assert named, "the spec cross-references its rules"
    assert named - known == set()


def test_the_after_crash_table_covers_every_executor():
    approval = SPEC["approval"]
    assert set(approval["after_crash"]) == set(approval["executors"])
    for entry in approval["after_crash"].values():
        assert entry["outcome"] in approval["outcomes"] and entry["reason"].strip()


def test_a_failpoint_a_scenario_uses_when_declared_is_a_standard_one():
    for scenario in SPEC["scenarios"]:
        for name in scenario.get("uses_failpoints", ()):
            assert name in PROTO["failpoints"], (scenario["id"], name)
