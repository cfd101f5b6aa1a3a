"""The approval ops' args check (``approval._args_problem``) judges exactly as the
shipped request schema does through jsonschema, on valid args and on every way to
break each one; and a harness that served an approval op has not imported jsonschema."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from retryproof.reference_impl import approval, approval_names
from retryproof.spec import schema, validator

GOOD = {"operation_key": "k", "operation_id": "op-1", "request": {"n": 1}, "executor": "plain"}
WRONG = {"operation_key": ["k"], "operation_id": 7, "request": "not an object", "executor": "remote"}


def cases(op: str) -> list[dict]:
    rules = schema("harness-request")["$defs"][f"{op}_args"]
    names, required = list(rules["properties"]), rules["required"]
    valid = {name: GOOD[name] for name in required}
    found = [valid, {name: GOOD[name] for name in names}, {**valid, "extra": 1}, {}, []]
    found += [{key: value for key, value in valid.items() if key != name} for name in required]
    found += [{**valid, name: WRONG[name]} for name in names]
    found += [{**valid, name: ""} for name in names if rules["properties"][name].get("type") == "string"]
    return found


@pytest.mark.parametrize("op", approval_names.OPS)
def test_the_args_check_agrees_with_jsonschema(op):
    reference = validator(f"harness-request#/$defs/{op}_args")
    for args in cases(op):
        problem = approval._args_problem(approval._args_schema(op), args, "args")
        assert (problem is None) == reference.is_valid(args), (args, problem)


def test_a_schema_keyword_the_check_does_not_know_fails_loudly(monkeypatch):
    rules = schema("harness-request")["$defs"]["approve_args"]
    patched = {"$defs": {"approve_args": {**rules, "maxProperties": 1}}}
    monkeypatch.setattr(approval, "schema", lambda name: patched)
    approval._args_schema.cache_clear()
    try:
        with pytest.raises(RuntimeError, match="maxProperties"):
            approval._args_schema("approve")
    finally:
        approval._args_schema.cache_clear()


def test_a_harness_that_served_an_approval_op_has_not_imported_jsonschema(tmp_path):
    lines = [
        {"id": 1, "op": "hello", "args": {"protocol": "retryproof-harness/1"}},
        {"id": 2, "op": "list_effects", "args": {"operation_key": "k"}},
    ]
    code = (
        "import json, sys\n"
        "from retryproof.reference_impl.__main__ import main\n"
        "assert main([]) == 0\n"
        "print(json.dumps(sorted(sys.modules)), file=sys.stderr)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        input="".join(json.dumps(line) + "\n" for line in lines),
        capture_output=True,
        text=True,
        env={**os.environ, "RETRYPROOF_STATE_DIR": str(tmp_path)},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["ok"] is True
    assert not set(json.loads(done.stderr.splitlines()[-1])) & {"jsonschema", "yaml", "referencing"}
