"""The approval targets of the matrix: the application side they share
(``approval_effects``), and each harness's handshake and single consumption with its
real library when that library is installed.

CI does not install the libraries (``retryproof matrix`` does), so the harness tests
skip there with the reason; the effect store and the digest run everywhere.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from retryproof import spec
from retryproof.adapters.implementations.approval_effects import EffectStore, checked_proposal, request_digest
from retryproof.spec import load_vectors
from retryproof.spec.jcs import loads_strict
from retryproof.spec.protocol import ProtocolError

ROOT = Path(__file__).resolve().parents[2]
TARGETS = {
    "agent_runloop": ("agent-runloop", "agent_loop"),
    "langgraph_interrupt": ("langgraph-interrupt", "langgraph"),
    "holdpoint": ("holdpoint", "holdpoint"),
}


def test_request_digest_matches_the_approval_request_vectors():
    for case in load_vectors("approval-request")["cases"]:
        request = loads_strict(case["request_json"])
        if "error" in case:
            with pytest.raises(ProtocolError) as refused:
                request_digest(request)
            assert refused.value.code == case["error"]["code"], case["id"]
        else:
            assert request_digest(request) == case["digest"], case["id"]


@pytest.mark.parametrize(
    "key, request_, executor",
    [("", {}, "plain"), ("k", [], "plain"), ("k", {}, "twice"), (7, {}, "plain"), ("\ud800", {}, "plain")],
)
def test_a_proposal_the_contract_refuses_is_invalid_request(key, request_, executor):
    with pytest.raises(ProtocolError) as refused:
        checked_proposal(key, request_, executor)
    assert refused.value.code == "invalid_request"


def test_plain_and_opaque_make_an_effect_per_call_and_dedupe_one_per_key(tmp_path):
    effects = EffectStore(str(tmp_path))
    for executor in ("plain", "opaque"):
        key = f"op-{executor}"
        assert effects.run(key, executor, "call-1") == ("E1", False)
        assert effects.run(key, executor, "call-1") == ("E2", False)
        assert effects.listing(key) == {"effects": [{"effect_id": "E1"}, {"effect_id": "E2"}], "executor_calls": 2}
    assert effects.run("op-dedupe", "dedupe", "call-1") == ("E1", False)
    assert effects.run("op-dedupe", "dedupe", "call-1") == ("E1", True)
    assert effects.run("op-dedupe", "dedupe", "call-2") == ("E2", False)
    assert effects.listing("op-dedupe")["executor_calls"] == 3
    # A new store on the same directory (a new process) sees the same effects.
    assert EffectStore(str(tmp_path)).run("op-dedupe", "dedupe", "call-1") == ("E1", True)


def test_only_a_plain_effect_is_observable(tmp_path):
    effects = EffectStore(str(tmp_path))
    assert effects.evidence("k", "plain") == "absent"
    effects.run("k", "plain", "c")
    assert effects.evidence("k", "plain") == "present"
    assert effects.evidence("k", "dedupe") == effects.evidence("k", "opaque") == "unknown"
    with pytest.raises(ProtocolError):
        effects.listing(None)


def _python(folder: str, module: str) -> Path:
    python = ROOT / "adapters" / "implementations" / folder / ".venv" / "bin" / "python"
    if not python.is_file():
        pytest.skip(f"{folder} is not installed: run adapters/implementations/{folder}/setup install")
    probe = subprocess.run([str(python), "-c", f"import {module}, retryproof.spec"], capture_output=True, timeout=120)
    if probe.returncode != 0:
        pytest.skip(f"the {folder} environment cannot import {module} and the kit: {probe.stderr.decode()[-300:]}")
    return python


def _answers(python: Path, folder: str, state: Path, requests: list[dict]) -> dict[int, dict]:
    """Each request's answer, each in a process of its own on the same state (the
    harness runs pipelined requests concurrently; these must follow one another)."""
    answers = {}
    for number, request in enumerate(requests, 1):
        lines = [{"id": number, **request}, {"id": 0, "op": "shutdown", "args": {}}]
        done = subprocess.run(
            [str(python), str(ROOT / "adapters" / "implementations" / folder / "harness.py")],
            input="".join(json.dumps(line) + "\n" for line in lines),
            capture_output=True,
            text=True,
            timeout=120,
            env=dict(os.environ, RETRYPROOF_STATE_DIR=str(state)),
        )
        assert done.returncode == 0, done.stderr[-2000:]
        answers[number] = json.loads(done.stdout.splitlines()[0])
    return answers


@pytest.mark.parametrize("folder", sorted(TARGETS))
def test_an_approval_harness_serves_approval_only_and_consumes_an_approval_once(folder, tmp_path):
    name, module = TARGETS[folder]
    python = _python(folder, module)
    first = _answers(
        python,
        folder,
        tmp_path,
        [
            {"op": "hello", "args": {"protocol": "retryproof-harness/1"}},
            {"op": "propose", "args": {"operation_key": "k-1", "request": {"b": 1, "a": 2}, "executor": "plain"}},
        ],
    )
    spec.validator("harness-response").validate(first[1])
    hello = first[1]["result"]
    assert hello["implementation"]["name"] == name
    assert hello["capabilities"] == ["approval"]
    assert set(hello["failpoints"]) == {
        "approval.audit_approved",
        "approval.audit_started",
        "approval.audit_completed",
        "approval.after_effect",
    }
    operation = first[2]["result"]
    assert operation["state"] == "proposed"
    assert operation["request_digest"] == request_digest({"a": 2, "b": 1})
    target = {"operation_id": operation["operation_id"]}
    second = _answers(
        python,
        folder,
        tmp_path,
        [
            {"op": "execute", "args": target},
            {"op": "approve", "args": target},
            {"op": "execute", "args": target},
            {"op": "execute", "args": target},
            {"op": "list_effects", "args": {"operation_key": "k-1"}},
            {"op": "get_operation", "args": target},
            {"op": "list_audit", "args": target},
        ],
    )
    assert second[1]["error"]["code"] == "NOT_APPROVED"
    assert second[2]["result"] == {"state": "approved"}
    assert second[3]["result"] == {"state": "succeeded"}
    assert second[4]["error"]["code"] == "APPROVAL_ALREADY_CONSUMED"
    assert second[5]["result"] == {"effects": [{"effect_id": "E1"}], "executor_calls": 1}
    assert second[6]["result"]["state"] == "succeeded"
    assert second[6]["result"]["effect_evidence"] == "present"
    events = [line["event"] for line in second[7]["result"]["events"]]
    assert events[0] == "approved" and events[-1] == "execution_completed", events
