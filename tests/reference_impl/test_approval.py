"""The reference approval service: the four probes of the second field report, the
three executor controls, and recovery's four outcomes, counted from the effect
markers (never from what a call answered)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from retryproof.reference_impl import approval_names
from retryproof.reference_impl.approval import ApprovalService
from retryproof.spec import schema, validator
from retryproof.spec.digest import ContractError
from retryproof.spec.protocol import ProtocolError

REQUEST = {"action": "push", "branch": "release/2.1", "files": ["a.txt"]}


def service_on(state_dir, **failpoints) -> ApprovalService:
    """A service over ``state_dir``; a second call is what a restarted process sees."""
    return ApprovalService(state_dir, {name.replace("__", "."): action for name, action in failpoints.items()})


def approved(service: ApprovalService, key: str = "op-key-1", executor: str = "plain") -> str:
    operation_id = service.propose({"operation_key": key, "request": REQUEST, "executor": executor})["operation_id"]
    service.approve({"operation_id": operation_id})
    return operation_id


def effects(service: ApprovalService, key: str = "op-key-1") -> tuple[int, int]:
    listed = service.list_effects({"operation_key": key})
    return len(listed["effects"]), listed["executor_calls"]


def rejected(call, *args) -> ProtocolError:
    with pytest.raises(ProtocolError) as info:
        call(*args)
    return info.value


def audit_events(service: ApprovalService) -> list[tuple[str, bool]]:
    return [(event["event"], event["repaired"]) for event in service.audit.events()]


# -- P0 ---------------------------------------------------------------------------


def test_p0_a_succeeded_operation_is_consumed(tmp_path):
    service = service_on(tmp_path)
    operation_id = approved(service)
    assert service.execute({"operation_id": operation_id}) == {"state": "succeeded"}
    error = rejected(service.execute, {"operation_id": operation_id})
    assert error.code == "APPROVAL_ALREADY_CONSUMED"
    assert effects(service) == (1, 1)
    assert rejected(service_on(tmp_path).execute, {"operation_id": operation_id}).code == "APPROVAL_ALREADY_CONSUMED"
    assert effects(service) == (1, 1)


# -- P1 and P2: an error does not mean the step did not happen ------------------------


def test_p1_the_approval_persists_when_its_audit_fails(tmp_path):
    service = service_on(tmp_path, approval__audit_approved="fail")
    operation_id = service.propose({"operation_key": "op-key-1", "request": REQUEST, "executor": "plain"})[
        "operation_id"
    ]
    error = rejected(service.approve, {"operation_id": operation_id})
    assert error.code == "AUDIT_WRITE_FAILED" and "IsADirectoryError" in error.message
    view = service.get_operation({"operation_id": operation_id})
    assert (view["state"], view["audit_pending"], view["effect_evidence"]) == ("approved", True, "absent")
    assert not Path(service.audit.path).is_dir() and audit_events(service) == []

    restarted = service_on(tmp_path)
    assert restarted.recover({"operation_id": operation_id}) == {"outcome": "nothing_to_do", "state": "approved"}
    assert audit_events(restarted) == [("approved", True)]
    assert restarted.get_operation({"operation_id": operation_id})["audit_pending"] is False
    assert effects(restarted) == (0, 0)
    assert restarted.execute({"operation_id": operation_id}) == {"state": "succeeded"}
    assert effects(restarted) == (1, 1)


def test_p1_execute_appends_the_owed_approval_audit_before_it_runs(tmp_path):
    service = service_on(tmp_path, approval__audit_approved="fail")
    operation_id = service.propose({"operation_key": "op-key-1", "request": REQUEST, "executor": "plain"})[
        "operation_id"
    ]
    rejected(service.approve, {"operation_id": operation_id})

    restarted = service_on(tmp_path)
    assert restarted.execute({"operation_id": operation_id}) == {"state": "succeeded"}
    assert audit_events(restarted) == [("approved", True), ("execution_started", False), ("execution_completed", False)]
    # Each line carries the state its step set, the repaired one included.
    assert [event["state"] for event in restarted.audit.events()] == ["approved", "executing", "succeeded"]
    assert restarted.get_operation({"operation_id": operation_id})["audit_pending"] is False


def test_p1_execute_runs_nothing_while_the_owed_approval_audit_still_fails(tmp_path):
    service = service_on(tmp_path, approval__audit_approved="fail")
    operation_id = service.propose({"operation_key": "op-key-1", "request": REQUEST, "executor": "plain"})[
        "operation_id"
    ]
    rejected(service.approve, {"operation_id": operation_id})
    assert rejected(service.execute, {"operation_id": operation_id}).code == "AUDIT_WRITE_FAILED"
    assert service.get_operation({"operation_id": operation_id})["state"] == "approved"
    assert effects(service) == (0, 0)


@pytest.mark.parametrize("failpoint", ["audit_started", "audit_completed"])
def test_approve_outside_proposed_and_approved_answers_the_state_and_changes_nothing(tmp_path, failpoint):
    service = service_on(tmp_path, **{f"approval__{failpoint}": "fail"})
    operation_id = approved(service)
    rejected(service.execute, {"operation_id": operation_id})
    before = service.store.load(operation_id)
    events = audit_events(service)
    assert service.approve({"operation_id": operation_id}) == {"state": before["state"]}
    assert service.store.load(operation_id) == before and audit_events(service) == events


def test_p1_retrying_approve_repairs_the_audit_instead_of_approving_twice(tmp_path):
    service = service_on(tmp_path, approval__audit_approved="fail")
    operation_id = service.propose({"operation_key": "op-key-1", "request": REQUEST, "executor": "plain"})[
        "operation_id"
    ]
    rejected(service.approve, {"operation_id": operation_id})
    assert service_on(tmp_path).approve({"operation_id": operation_id}) == {"state": "approved"}
    assert audit_events(service) == [("approved", True)]


def test_p2_executing_does_not_mean_the_effect_happened(tmp_path):
    service = service_on(tmp_path, approval__audit_started="fail")
    operation_id = approved(service)
    assert rejected(service.execute, {"operation_id": operation_id}).code == "AUDIT_WRITE_FAILED"
    view = service.get_operation({"operation_id": operation_id})
    assert (view["state"], view["effect_evidence"]) == ("executing", "absent")
    assert effects(service) == (0, 0)
    # Executing again is not how an interrupted execution resumes.
    assert "recover" in rejected(service.execute, {"operation_id": operation_id}).message

    restarted = service_on(tmp_path)
    assert restarted.recover({"operation_id": operation_id}) == {"outcome": "re_executed", "state": "succeeded"}
    assert effects(restarted) == (1, 1)


# -- P3: the completion audit fails after the effect ------------------------------------


@pytest.mark.parametrize("executor", ["plain", "dedupe", "opaque"])
def test_p3_the_record_keeps_the_effect_and_recovery_reconciles(tmp_path, executor):
    service = service_on(tmp_path, approval__audit_completed="fail")
    operation_id = approved(service, executor=executor)
    assert rejected(service.execute, {"operation_id": operation_id}).code == "AUDIT_WRITE_FAILED"
    view = service.get_operation({"operation_id": operation_id})
    assert (view["state"], view["audit_pending"], view["effect_evidence"]) == ("succeeded", True, "present")
    assert effects(service) == (1, 1)

    restarted = service_on(tmp_path)
    assert restarted.recover({"operation_id": operation_id}) == {"outcome": "reconciled", "state": "succeeded"}
    assert effects(restarted) == (1, 1)
    assert audit_events(restarted)[-1] == ("execution_completed", True)
    assert restarted.get_operation({"operation_id": operation_id})["audit_pending"] is False
    assert restarted.recover({"operation_id": operation_id})["outcome"] == "nothing_to_do"
    assert rejected(restarted.execute, {"operation_id": operation_id}).code == "APPROVAL_ALREADY_CONSUMED"


def test_the_audit_fault_loses_no_earlier_event(tmp_path):
    healthy = service_on(tmp_path)
    approved(healthy, key="other")
    before = Path(healthy.audit.path).read_bytes()
    service = service_on(tmp_path, approval__audit_completed="fail")
    operation_id = approved(service)
    rejected(service.execute, {"operation_id": operation_id})
    assert Path(service.audit.path).read_bytes().startswith(before)
    assert [event for event, _ in audit_events(service)] == ["approved", "approved", "execution_started"]


# -- recovery: stale and unknown -------------------------------------------------------


def test_a_changed_request_is_stale_and_calls_nothing(tmp_path):
    service = service_on(tmp_path, approval__audit_completed="fail")
    operation_id = approved(service)
    rejected(service.execute, {"operation_id": operation_id})

    restarted = service_on(tmp_path)
    changed = dict(REQUEST, branch="release/2.2")
    # The operation succeeded, so it keeps that state; the pending audit is still repaired.
    assert restarted.recover({"operation_id": operation_id, "request": changed}) == {
        "outcome": "stale",
        "state": "succeeded",
    }
    assert effects(restarted) == (1, 1)
    assert restarted.get_operation({"operation_id": operation_id})["audit_pending"] is False


def test_a_changed_request_makes_an_unfinished_operation_stale_for_good(tmp_path):
    service = service_on(tmp_path, approval__audit_started="fail")
    operation_id = approved(service)
    rejected(service.execute, {"operation_id": operation_id})

    restarted = service_on(tmp_path)
    assert restarted.recover({"operation_id": operation_id, "request": {"action": "other"}}) == {
        "outcome": "stale",
        "state": "stale",
    }
    assert restarted.recover({"operation_id": operation_id}) == {"outcome": "stale", "state": "stale"}
    assert rejected(restarted.execute, {"operation_id": operation_id}).code == "NOT_APPROVED"
    assert effects(restarted) == (0, 0)


def test_a_succeeded_operation_found_stale_has_nothing_to_do_with_the_original_request(tmp_path):
    service = service_on(tmp_path)
    operation_id = approved(service)
    service.execute({"operation_id": operation_id})
    changed = dict(REQUEST, branch="release/2.2")
    assert service.recover({"operation_id": operation_id, "request": changed}) == {
        "outcome": "stale",
        "state": "succeeded",
    }
    assert service.recover({"operation_id": operation_id}) == {"outcome": "nothing_to_do", "state": "succeeded"}
    assert service.recover({"operation_id": operation_id, "request": changed}) == {
        "outcome": "stale",
        "state": "succeeded",
    }
    assert effects(service) == (1, 1)


@pytest.mark.parametrize("executor", ["opaque", "dedupe"])
def test_needs_verification_wins_over_stale_while_the_effect_is_unknown(tmp_path, executor):
    # As if the process died after the executor was dispatched: the effect is unknown.
    service = service_on(tmp_path)
    operation_id = approved(service, executor=executor)
    record = service.store.load(operation_id)
    record.update(state="executing", dispatched=True)
    service.store.save(record)
    changed = dict(REQUEST, branch="release/2.2")
    for request in (changed, REQUEST, changed):
        assert service.recover({"operation_id": operation_id, "request": request}) == {
            "outcome": "needs_verification",
            "state": "needs_verification",
        }
    assert effects(service, "op-key-1") == (0, 0)


def test_the_same_request_in_another_key_order_is_not_stale(tmp_path):
    service = service_on(tmp_path, approval__audit_completed="fail")
    operation_id = approved(service)
    rejected(service.execute, {"operation_id": operation_id})
    reordered = dict(reversed(list(REQUEST.items())))
    assert service_on(tmp_path).recover({"operation_id": operation_id, "request": reordered})["outcome"] == "reconciled"


# executor -> (recovery outcome, executor calls after recovery): the effect stays one.
AFTER_CRASH = {"plain": ("reconciled", 1), "dedupe": ("reconciled", 2), "opaque": ("needs_verification", 1)}


@pytest.mark.parametrize("executor", sorted(AFTER_CRASH))
def test_a_crash_after_the_effect_is_decided_by_evidence(state_dir, start, executor):
    service = service_on(state_dir)
    operation_id = approved(service, executor=executor)
    harness = start({"approval.after_effect": "crash"})
    harness.send("execute", {"operation_id": operation_id})
    assert harness.wait_exit() == -9
    assert effects(service) == (1, 1)

    restarted = service_on(state_dir)
    view = restarted.get_operation({"operation_id": operation_id})
    assert view["effect_evidence"] == {"plain": "present", "dedupe": "unknown", "opaque": "unknown"}[executor]
    outcome, calls = AFTER_CRASH[executor]
    assert restarted.recover({"operation_id": operation_id})["outcome"] == outcome
    assert effects(restarted) == (1, calls)
    # Asking again changes nothing: needs_verification stays until a human decides.
    assert restarted.recover({"operation_id": operation_id})["outcome"] in ("nothing_to_do", "needs_verification")
    assert effects(restarted) == (1, calls)


def test_dedupe_with_unknown_evidence_re_executes_when_the_effect_was_absent(tmp_path):
    # As if the process died after writing "dispatched" and before the executor ran.
    service = service_on(tmp_path)
    operation_id = approved(service, executor="dedupe")
    record = service.store.load(operation_id)
    record.update(state="executing", dispatched=True)
    service.store.save(record)
    assert service.get_operation({"operation_id": operation_id})["effect_evidence"] == "unknown"
    assert service.recover({"operation_id": operation_id}) == {"outcome": "re_executed", "state": "succeeded"}
    assert effects(service) == (1, 1)


def test_a_failing_step_after_the_effect_is_an_io_error_and_the_effect_is_observed(tmp_path):
    service = service_on(tmp_path, approval__after_effect="fail")
    operation_id = approved(service)
    with pytest.raises(OSError):
        service.execute({"operation_id": operation_id})
    assert service.get_operation({"operation_id": operation_id})["effect_evidence"] == "present"
    assert service_on(tmp_path).recover({"operation_id": operation_id})["outcome"] == "reconciled"
    assert effects(service) == (1, 1)


# -- the protocol surface --------------------------------------------------------------


def test_the_harness_serves_the_ops_and_declares_the_failpoints(start):
    harness = start()
    hello = harness.hello()
    assert "approval" in hello["capabilities"]
    assert {
        "approval.audit_approved",
        "approval.audit_started",
        "approval.after_effect",
        "approval.audit_completed",
    } <= set(hello["failpoints"])
    # Results are checked against their shipped schemas on arrival.
    operation_id = harness.call("propose", operation_key="k", request=REQUEST, executor="opaque")["operation_id"]
    assert harness.call("approve", operation_id=operation_id) == {"state": "approved"}
    assert harness.call("list_effects", operation_key="k") == {"effects": [], "executor_calls": 0}
    assert harness.error("execute", operation_id=operation_id, extra=True) == "invalid_request"
    assert harness.shutdown() == 0


@pytest.mark.parametrize(
    "op, args, code",
    [
        ("propose", {"operation_key": "k", "request": REQUEST, "executor": "remote"}, "invalid_request"),
        ("propose", {"operation_key": "k", "request": REQUEST, "executor": "plain", "extra": 1}, "invalid_request"),
        ("propose", {"operation_key": "", "request": REQUEST, "executor": "plain"}, "invalid_request"),
        ("propose", {"operation_key": "k", "request": {"n": float("nan")}, "executor": "plain"}, "invalid_request"),
        ("approve", {"operation_id": "op-" + "0" * 32}, "not_found"),
        ("get_operation", {"operation_id": "../../etc/passwd"}, "not_found"),
        ("recover", {"operation_id": "op-" + "0" * 32, "request": "not an object"}, "invalid_request"),
    ],
)
def test_bad_input_is_a_typed_error_that_writes_nothing(tmp_path, op, args, code):
    service = service_on(tmp_path)
    with pytest.raises((ProtocolError, ContractError)) as info:
        service.handlers()[op](args)
    assert info.value.code == code
    assert not any((tmp_path / "approval" / "operations").iterdir())


@pytest.mark.parametrize("op", approval_names.OPS)
def test_every_op_refuses_an_unknown_and_a_missing_argument_by_name(tmp_path, op):
    """The names come from the shipped schema (``$defs/<op>_args``): an arg it does not
    name, or one it requires left out, is refused before anything is read or written."""
    service = service_on(tmp_path)
    definition = schema("harness-request")["$defs"][f"{op}_args"]
    args = {name: "x" for name in definition["required"]}
    for bad, where in (
        ({**args, "operation_ids": "x"}, "args.operation_ids"),
        ({}, f"args.{definition['required'][0]}"),
    ):
        with pytest.raises(ContractError) as info:
            service.handlers()[op](bad)
        assert (info.value.code, info.value.field) == ("invalid_request", where)
    assert not any((tmp_path / "approval" / "operations").iterdir())


def test_one_key_names_one_operation(tmp_path):
    service = service_on(tmp_path)
    first = service.propose({"operation_key": "k", "request": REQUEST, "executor": "plain"})
    assert service.propose({"operation_key": "k", "request": REQUEST, "executor": "plain"}) == first
    with pytest.raises(ContractError):
        service.propose({"operation_key": "k", "request": {"other": True}, "executor": "plain"})
    with pytest.raises(ContractError):
        service.propose({"operation_key": "k", "request": REQUEST, "executor": "dedupe"})
    assert service.get_operation({"operation_id": first["operation_id"]})["request_digest"] == first["request_digest"]


def all_records_valid(service: ApprovalService) -> set[str]:
    """Validate every record and audit event on disk; answer the states seen."""
    records = [service.store.load(path.stem) for path in Path(service.store.root).glob("op-*.json")]
    for record in records:
        validator("approval-operation").validate(record)
    for event in service.audit.events():
        validator("audit-event").validate(event)
    return {record["state"] for record in records}


def test_every_record_and_audit_event_matches_its_shipped_schema(tmp_path):
    # The reference does not validate at run time (it would cost every harness start
    # a jsonschema import); this walk through every written state does instead.
    for key, failpoint, op in (
        ("p1", "audit_approved", "approve"),
        ("p2", "audit_started", "execute"),
        ("p3", "audit_completed", "execute"),
    ):
        service = service_on(tmp_path, **{f"approval__{failpoint}": "fail"})
        operation_id = service.propose({"operation_key": key, "request": REQUEST, "executor": "plain"})["operation_id"]
        if op == "execute":
            service.approve({"operation_id": operation_id})
        rejected(getattr(service, op), {"operation_id": operation_id})
    assert all_records_valid(service) == {"approved", "executing", "succeeded"}
    restarted = service_on(tmp_path)
    restarted.recover(
        {
            "operation_id": restarted.propose({"operation_key": "p2", "request": REQUEST, "executor": "plain"})[
                "operation_id"
            ],
            "request": {},
        }
    )
    for key in ("p1", "p3"):
        restarted.recover(
            {
                "operation_id": restarted.propose({"operation_key": key, "request": REQUEST, "executor": "plain"})[
                    "operation_id"
                ]
            }
        )
    assert all_records_valid(restarted) == {"approved", "stale", "succeeded"}


def test_concurrent_executes_of_one_operation_make_one_effect(state_dir, start):
    operation_id = approved(service_on(state_dir))
    harness = start()
    pending = [harness.send("execute", {"operation_id": operation_id}) for _ in range(8)]
    answers = [harness.wait(request_id, "execute") for request_id in pending]
    codes = sorted(getattr(answer, "code", "ok") for answer in answers)
    assert codes == ["APPROVAL_ALREADY_CONSUMED"] * 7 + ["ok"]
    assert effects(service_on(state_dir)) == (1, 1)


# -- the audit is written ahead: a crash leaves a repeated line, never a missing one ----

# Runs the service in a child process that SIGKILLs itself right after the save that
# gives the record ``state``: the step is durable and its audit line is not yet
# appended. A test-only seam around the store, so the protocol gains no failpoint.
_KILLED_AFTER_SAVE = """
import sys
from retryproof.reference_impl.approval import ApprovalService
from retryproof.spec.protocol import crash_now

state_dir, op, operation_id, state = sys.argv[1:]
service = ApprovalService(state_dir)
save = service.store.save

def save_then_die(record):
    save(record)
    if record["state"] == state:
        crash_now()

service.store.save = save_then_die
getattr(service, op)({"operation_id": operation_id})
"""


@pytest.mark.parametrize(
    ("op", "state", "event", "repair"),
    [("approve", "approved", "approved", "approve"), ("execute", "executing", "execution_started", "recover")],
)
def test_a_kill_right_after_a_step_is_saved_leaves_its_audit_owed_and_repaired(tmp_path, op, state, event, repair):
    service = service_on(tmp_path)
    operation_id = service.propose({"operation_key": "op-key-1", "request": REQUEST, "executor": "plain"})[
        "operation_id"
    ]
    if op == "execute":
        service.approve({"operation_id": operation_id})
    done = subprocess.run(
        [sys.executable, "-c", _KILLED_AFTER_SAVE, str(tmp_path), op, operation_id, state],
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    after = service_on(tmp_path)
    assert after.get_operation({"operation_id": operation_id})["state"] == state
    assert event not in [name for name, _ in audit_events(after)]
    assert after.get_operation({"operation_id": operation_id})["audit_pending"] is True
    getattr(after, repair)({"operation_id": operation_id})
    assert (event, True) in audit_events(after)
    assert after.get_operation({"operation_id": operation_id})["audit_pending"] is False


# A child that SIGKILLs itself inside the audit fault's window: the log is moved aside
# and a directory stands in its place.
_KILLED_INSIDE_AUDIT_FAULT = """
import sys
from retryproof.reference_impl import approval_store
from retryproof.reference_impl.approval import ApprovalService
from retryproof.spec.protocol import crash_now

state_dir, operation_id = sys.argv[1:]
approval_store.append_line = lambda path, value: crash_now()
ApprovalService(state_dir, {"approval.audit_started": "fail"}).execute({"operation_id": operation_id})
"""


def test_a_kill_inside_an_audit_fault_is_undone_at_the_next_start(tmp_path):
    service = service_on(tmp_path)
    operation_id = approved(service)
    done = subprocess.run(
        [sys.executable, "-c", _KILLED_INSIDE_AUDIT_FAULT, str(tmp_path), operation_id], capture_output=True, timeout=60
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert Path(service.audit.path).is_dir()
    after = service_on(tmp_path)
    assert Path(after.audit.path).is_file() and not Path(after.audit.path + ".aside").exists()
    assert audit_events(after) == [("approved", False)]
    assert after.recover({"operation_id": operation_id}) == {"outcome": "re_executed", "state": "succeeded"}
    assert [name for name, _ in audit_events(after)] == [
        "approved",
        "execution_started",
        "execution_started",
        "execution_completed",
    ]


def test_list_audit_answers_the_operations_lines_in_order(tmp_path):
    service = service_on(tmp_path, approval__audit_completed="fail")
    operation_id = approved(service)
    other = approved(service, key="op-key-2")
    assert rejected(service.execute, {"operation_id": operation_id}).code == "AUDIT_WRITE_FAILED"
    assert service_on(tmp_path).recover({"operation_id": operation_id})["outcome"] == "reconciled"
    assert service.list_audit({"operation_id": operation_id}) == {
        "events": [
            {"event": "approved", "state": "approved", "repaired": False},
            {"event": "execution_started", "state": "executing", "repaired": False},
            {"event": "execution_completed", "state": "succeeded", "repaired": True},
        ]
    }
    assert service.list_audit({"operation_id": other}) == {
        "events": [{"event": "approved", "state": "approved", "repaired": False}]
    }
    assert rejected(service.list_audit, {"operation_id": "op-" + "0" * 32}).code == "not_found"


def test_every_audit_event_carries_the_spec_state():
    from retryproof.reference_impl.approval import _STEP_STATE
    from retryproof.spec import load_spec

    assert _STEP_STATE == load_spec()["approval"]["audit_events"]


def test_request_digest_matches_the_approval_request_vectors():
    from retryproof.reference_impl.approval import request_digest
    from retryproof.spec import load_vectors
    from retryproof.spec.digest import ContractError
    from retryproof.spec.jcs import loads_strict

    for case in load_vectors("approval-request")["cases"]:
        request = loads_strict(case["request_json"])
        if "error" in case:
            with pytest.raises(ContractError) as refused:
                request_digest(request)
            assert refused.value.code == case["error"]["code"], case["id"]
        else:
            assert request_digest(request) == case["digest"], case["id"]


def test_every_approval_folder_is_made_durable_in_the_folder_that_holds_it(tmp_path, monkeypatch):
    # A SIGKILL keeps the page cache, so no scenario sees a folder whose entry was never
    # synced; a power cut would lose it and the effect markers inside it. So check that
    # each folder the service makes is listed by an fsync of its parent (Linux: the
    # synced directory is read back from /proc/self/fd).
    synced: list[tuple[str, set[str]]] = []
    fsync = os.fsync

    def recording(fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        if os.path.isdir(path):
            synced.append((path, set(os.listdir(path))))
        fsync(fd)

    monkeypatch.setattr(os, "fsync", recording)
    service = service_on(tmp_path)
    service.execute({"operation_id": approved(service)})
    assert effects(service) == (1, 1)
    made = [os.path.join(top, name) for top, folders, _ in os.walk(tmp_path) for name in folders]
    assert any(os.sep + "effects" + os.sep in folder for folder in made)
    for folder in made:
        parent, name = os.path.split(folder)
        assert any(directory == parent and name in entries for directory, entries in synced), folder
