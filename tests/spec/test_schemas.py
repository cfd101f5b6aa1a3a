"""The shipped JSON Schemas: valid, named by URN, and sharp enough to refuse wrong shapes."""

from __future__ import annotations

import copy
from importlib import resources

import pytest
from jsonschema import Draft202012Validator

from retryproof import spec
from retryproof.spec import load_spec, schema, validator

STEMS = sorted(
    entry.name[: -len(".json")]
    for entry in resources.files("retryproof.spec").joinpath("schemas").iterdir()
    if entry.name.endswith(".json")
)
YAML_EXAMPLES = [
    (name, index, example) for name, items in load_spec()["examples"].items() for index, example in enumerate(items)
]
SCHEMA_EXAMPLES = [
    (stem, index, example) for stem in STEMS for index, example in enumerate(schema(stem).get("examples", []))
]


def errors(name: str, instance) -> list[str]:
    return [error.message for error in validator(name).iter_errors(instance)]


@pytest.mark.parametrize("stem", STEMS)
def test_schema_is_valid_draft_2020_12_with_its_urn(stem):
    contents = schema(stem)
    Draft202012Validator.check_schema(contents)
    assert contents["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert contents["$id"] == spec.SCHEMA_URN + stem


@pytest.mark.parametrize(
    "name, index, example",
    SCHEMA_EXAMPLES + YAML_EXAMPLES,
    ids=lambda value: value if isinstance(value, (str, int)) else "",
)
def test_every_example_validates(name, index, example):
    assert errors(name, example) == []


def test_the_yaml_has_examples_for_every_schema_here():
    mine = {
        "task",
        "write-task-call",
        "creation-result",
        "receipt",
        "diagnostics",
        "harness-request",
        "harness-response",
    }
    assert mine <= set(load_spec()["examples"])


def example(name: str, index: int = 0):
    return copy.deepcopy(load_spec()["examples"][name][index])


def _with(name, index=0, drop=(), **changes):
    instance = example(name, index)
    for key in drop:
        del instance[key]
    instance.update(changes)
    return instance


CREATED, REUSED, CONFLICT, SCHEMA_CONFLICT, LEGACY = range(5)

WRONG = {
    "task with an unknown field": ("task", {"subject": "a", "trace_id": "t-1"}),
    "task with a number": ("task", {"priority": 1}),
    "task with a non-string item": ("task", {"references": ["a", 2]}),
    "call with an extra argument": ("write-task-call", {"task": {}, "retry": 1}),
    "call with an id that could leave the state dir": (
        "write-task-call",
        {"client_submission_id": "../etc", "task": {}},
    ),
    "call with a null id": ("write-task-call", {"client_submission_id": None, "task": {}}),
    "created without action": ("creation-result", _with("creation-result", CREATED, action_taken=False)),
    "reused with action": ("creation-result", _with("creation-result", REUSED, action_taken=True)),
    "conflict without its object": ("creation-result", _with("creation-result", CONFLICT, drop=["conflict"])),
    "created with a conflict object": (
        "creation-result",
        _with("creation-result", CREATED, conflict=example("creation-result", CONFLICT)["conflict"]),
    ),
    "conflict with an unknown reason": (
        "creation-result",
        _with(
            "creation-result", CONFLICT, conflict={**example("creation-result", CONFLICT)["conflict"], "reason": "busy"}
        ),
    ),
    "schema conflict with the same schema": (
        "creation-result",
        _with(
            "creation-result",
            SCHEMA_CONFLICT,
            conflict={
                **example("creation-result", SCHEMA_CONFLICT)["conflict"],
                "receipt_digest_schema_version": "write-task-v1",
            },
        ),
    ),
    "legacy claiming idempotence": ("creation-result", _with("creation-result", LEGACY, idempotent=True)),
    "id path claiming no idempotence": ("creation-result", _with("creation-result", CREATED, idempotent=False)),
    "legacy reuse": ("creation-result", _with("creation-result", LEGACY, disposition="reused", action_taken=False)),
    "upper-case digest": ("creation-result", _with("creation-result", CREATED, request_digest="sha256:" + "A" * 64)),
    "absolute task path": ("creation-result", _with("creation-result", CREATED, task_path="/var/tasks/1.json")),
    **{
        f"task path leaving the state directory: {path}": (
            "creation-result",
            _with("creation-result", CREATED, task_path=path),
        )
        for path in ("../../../../etc/passwd", "tasks/../../x.json", "tasks/..", "..", "tasks\\..\\..\\x")
    },
    "missing idempotent": ("creation-result", _with("creation-result", CREATED, drop=["idempotent"])),
    "reserved receipt with a result": ("receipt", _with("receipt", 0, result=example("creation-result", CREATED))),
    "committed receipt without a result": ("receipt", _with("receipt", 2, drop=["result"])),
    "receipt with an unknown state": ("receipt", _with("receipt", 0, state="done")),
    "receipt with an extra field": ("receipt", _with("receipt", 0, owner_pid=12)),
    "diagnostics of an absent receipt with a task": ("diagnostics", _with("diagnostics", 1, task_id="TASK-1")),
    "digest match without a task": ("diagnostics", _with("diagnostics", 0, task_exists=False)),
    "stalled committed receipt": (
        "diagnostics",
        {
            "state": "committed",
            "task_id": "T",
            "task_path": "t",
            "task_exists": True,
            "digest_matches": True,
            "age_s": 9.0,
            "stalled": True,
        },
    ),
    "request with an unknown op": ("harness-request", {"id": 1, "op": "drop_tables", "args": {}}),
    "request without args": ("harness-request", {"id": 1, "op": "list_tasks"}),
    "request with an extra arg": ("harness-request", {"id": 1, "op": "list_tasks", "args": {"all": True}}),
    "tamper mixing two actions": (
        "harness-request",
        {"id": 1, "op": "tamper", "args": {"action": "remove_task", "client_submission_id": "sub-1"}},
    ),
    "propose with an unknown executor": (
        "harness-request",
        {"id": 1, "op": "propose", "args": {"operation_key": "k", "request": {}, "executor": "magic"}},
    ),
    "success without a result": ("harness-response", {"id": 1, "ok": True}),
    "failure without a code": ("harness-response", {"id": 1, "ok": False, "error": {"message": "x"}}),
    "success with a null id": ("harness-response", {"id": None, "ok": True, "result": {}}),
    "hello without a tool path": (
        "harness-response#/$defs/hello_result",
        _with("harness-response#/$defs/hello_result", capabilities=["legacy", "diagnose"]),
    ),
    "hello without capabilities": (
        "harness-response#/$defs/hello_result",
        _with("harness-response#/$defs/hello_result", capabilities=[]),
    ),
    "hello with a misspelt capability": (
        "harness-response#/$defs/hello_result",
        _with("harness-response#/$defs/hello_result", capabilities=["write_task", "diagnostic"]),
    ),
    "hello with an implementation missing its language": (
        "harness-response#/$defs/hello_result",
        _with("harness-response#/$defs/hello_result", implementation={"name": "x", "version": "1"}),
    ),
    "recover with an unknown outcome": (
        "harness-response#/$defs/recover_result",
        {"outcome": "retried", "state": "succeeded"},
    ),
    "list_effects without executor_calls": ("harness-response#/$defs/list_effects_result", {"effects": []}),
}


@pytest.mark.parametrize("path", ["tasks/T-1.json", "a..b/c.json", "..hidden", "tasks/v2..json", "t"])
def test_task_paths_with_dots_that_stay_inside_are_valid(path):
    assert errors("creation-result", _with("creation-result", CREATED, task_path=path)) == []


@pytest.mark.parametrize("case", sorted(WRONG))
def test_a_wrong_instance_fails(case):
    name, instance = WRONG[case]
    assert errors(name, instance) != []


@pytest.mark.parametrize("capabilities", [["write_task"], ["approval"], ["approval", "write_task", "legacy"]])
def test_hello_names_write_task_approval_or_both(capabilities):
    """PROTOCOL-R20: an approval gate with no tasks can be certified (verdict.tool_paths)."""
    hello = _with("harness-response#/$defs/hello_result", capabilities=capabilities)
    assert errors("harness-response#/$defs/hello_result", hello) == []


def test_results_may_carry_vendor_fields_but_requests_may_not():
    assert (
        errors("harness-response#/$defs/write_report_result", {"report_id": "R1", "deduplicated": False, "x_shard": 3})
        == []
    )
    assert errors("write-task-call", {"task": {}, "x_shard": 3}) != []
