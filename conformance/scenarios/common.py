"""Judgements several scenarios share: a complete created result, a faithful reuse,
a failpoint that really fired."""

from __future__ import annotations

from typing import Any, Mapping

from conformance.context import Context, TaskSet, Unjudgeable
from conformance.outcome import Call
from spec.digest import DIGEST_SCHEMA_VERSION, request_digest


def expect_created(ctx: Context, call: Call, submission_id: str, task: Any, what: str) -> Mapping[str, Any]:
    """``created`` with every field saying what this call did."""
    result = ctx.expect_disposition(call, "created", what)
    ctx.check(result.get("action_taken") is True, f"{what}: created must say action_taken true")
    ctx.check(result.get("client_submission_id") == submission_id, f"{what}: the result names another client_submission_id")
    ctx.check(result.get("idempotent") is True, f"{what}: the id path must say idempotent true")
    ctx.check(result.get("request_digest") == request_digest(task), f"{what}: request_digest {result.get('request_digest')} is not the write-task-v1 digest {request_digest(task)}")
    ctx.check(result.get("digest_schema_version") == DIGEST_SCHEMA_VERSION, f"{what}: digest_schema_version is not {DIGEST_SCHEMA_VERSION}")
    return result


def expect_reuse_of(ctx: Context, call: Call, state: TaskSet, submission_id: str, what: str) -> Mapping[str, Any]:
    """``reused`` with ``action_taken`` false and exactly the identity that durable
    state holds for ``submission_id`` (one task)."""
    result = ctx.expect_disposition(call, "reused", what)
    ctx.check(result.get("action_taken") is False, f"{what}: reused must say action_taken false")
    return expect_identity(ctx, result, state, submission_id, what)


def expect_identity(ctx: Context, result: Mapping[str, Any], state: TaskSet, submission_id: str, what: str) -> Mapping[str, Any]:
    """The result's task_id and task_path are those of the one task list_tasks holds
    for ``submission_id``."""
    owned = state.for_submission(submission_id)
    ctx.check(len(owned) == 1, f"list_tasks holds {len(owned)} tasks for {submission_id}, expected 1")
    ctx.check(
        (result.get("task_id"), result.get("task_path")) == (owned[0].get("task_id"), owned[0].get("task_path")),
        f"{what}: answered {result.get('task_id')} at {result.get('task_path')}, durable state holds {owned[0].get('task_id')} at {owned[0].get('task_path')}",
    )
    return owned[0]


def fired(ctx: Context, call: Call, failpoint: str) -> None:
    """The call armed with a ``crash`` failpoint must end without an answer (``info``);
    an answer means the declared failpoint never fired, so the window was not tested."""
    ctx.evidence.setdefault("crashed_calls", []).append(call.summary())
    if call.answered:
        raise Unjudgeable(f"the runtime declares failpoint {failpoint} but answered instead of crashing ({call.summary()})")


def expect_one_creation(ctx: Context, before: TaskSet, calls: list[Call], submission_id: str, what: str) -> TaskSet:
    """A4's contract: exactly one ``created``, every other call ``reused``, one task_id,
    and durable state holds exactly that one new task. ``what`` names the race in
    the evidence (a scenario may run several); returns the tasks after it."""
    ctx.evidence.setdefault("dispositions", {})[what] = _tally(calls)
    silent = [call for call in calls if not call.answered]
    if silent:
        raise Unjudgeable(f"{what}: {len(silent)} of {len(calls)} calls got no answer ({silent[0].message})")
    waited = [call for call in calls if call.code == "in_progress"]
    ctx.check(not waited, f"{what}: {len(waited)} calls answered in_progress instead of waiting for the holder and reusing")
    created = [call for call in calls if call.disposition == "created"]
    reused = [call for call in calls if call.disposition == "reused"]
    ctx.check(
        len(created) == 1 and len(reused) == len(calls) - 1,
        f"{what}: expected created=1, reused={len(calls) - 1}; got {_tally(calls)}",
    )
    ids = {call.task_id for call in calls}
    ctx.check(len(ids) == 1, f"{what}: the calls answered {len(ids)} different task ids: {', '.join(sorted(map(str, ids)))}")
    ctx.check(all(call.result.get("action_taken") is False for call in reused), f"{what}: a reused result says action_taken true")
    after = ctx.tasks(f"after {what}")
    ctx.check_tasks(before, after, new=1)
    expect_identity(ctx, created[0].result, after, submission_id, f"{what}: the created call")
    return after


def stalled_reservation(ctx: Context, failpoint: str) -> tuple[str, dict, TaskSet]:
    """Crash a creation right after its reservation and restart. Returns (submission
    id, task, tasks after the restart); ends the scenario ``not_applicable`` when the
    runtime finished the creation by itself at start-up (allowed, but then no stalled
    reservation is left to examine)."""
    ctx.start(failpoints={failpoint: "crash"})
    submission_id, task = ctx.submission_id(), ctx.task()
    fired(ctx, ctx.write_task(submission_id, task), failpoint)
    ctx.restart()
    state = ctx.tasks("after restart")
    finished = state.for_submission(submission_id)
    if finished:
        ctx.not_applicable(f"the runtime finished the interrupted creation at start-up (task {finished[0].get('task_id')}); no stalled reservation is left")
    return submission_id, task, state


def _tally(calls: list[Call]) -> dict[str, int]:
    tally: dict[str, int] = {}
    for call in calls:
        key = call.disposition or call.code or "no answer"
        tally[key] = tally.get(key, 0) + 1
    return tally
