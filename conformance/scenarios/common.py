"""Judgements several scenarios share: a complete created result, a faithful reuse,
a failpoint that really fired."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Mapping, Sequence
from typing import Any

from retryproof.adapters.connection import Connection
from retryproof.conformance.context import Context, TaskSet, Unjudgeable
from retryproof.conformance.outcome import Call, id_answer_problems, pause_before_retry, sent_digest, settle_in_passes


def expect_created(ctx: Context, call: Call, submission_id: str, task: Any, what: str) -> Mapping[str, Any]:
    """``created`` with every field saying what this call did."""
    result = ctx.expect_disposition(call, "created", what)
    ctx.check(result.get("action_taken") is True, f"{what}: created must say action_taken true")
    return expect_faithful(ctx, result, submission_id, task, what)


def expect_reuse_of(ctx: Context, call: Call, state: TaskSet, submission_id: str, what: str) -> Mapping[str, Any]:
    """``reused`` with ``action_taken`` false, the fields of this submission, and
    exactly the identity that durable state holds for ``submission_id`` (one task)."""
    result = ctx.expect_disposition(call, "reused", what)
    ctx.check(result.get("action_taken") is False, f"{what}: reused must say action_taken false")
    expect_faithful(ctx, result, submission_id, call.args.get("task"), what)
    return expect_identity(ctx, result, state, submission_id, what)


def expect_faithful(
    ctx: Context, result: Mapping[str, Any], submission_id: str, task: Any, what: str
) -> Mapping[str, Any]:
    """The fields every id-path answer (created or reused) owes: this call's id and
    the write-task-v1 digest of its task (``id_answer_problems``)."""
    problems = id_answer_problems(result, submission_id, sent_digest(task))
    ctx.check(not problems, f"{what}: {'; '.join(problems)}")
    return result


def expect_identity(
    ctx: Context, result: Mapping[str, Any], state: TaskSet, submission_id: str, what: str
) -> Mapping[str, Any]:
    """The result's task_id and task_path are those of the one task list_tasks holds
    for ``submission_id``."""
    owned = state.for_submission(submission_id)
    ctx.check(len(owned) == 1, f"list_tasks holds {len(owned)} tasks for {submission_id}, expected 1")
    ctx.check(
        (result.get("task_id"), result.get("task_path")) == (owned[0].get("task_id"), owned[0].get("task_path")),
        f"{what}: answered {result.get('task_id')} at {result.get('task_path')}, durable state holds {owned[0].get('task_id')} at {owned[0].get('task_path')}",
    )
    return owned[0]


#: How long ``fired`` waits for a process whose call went unanswered to be seen dead.
CRASH_SETTLE_S = 2.0


def fired(ctx: Context, call: Call, failpoint: str) -> None:
    """The call armed with a ``crash`` failpoint must end without an answer because
    the process SIGKILLed itself there. An answer, a hang or garbage from a process
    that lives on, or another way of ending, means the declared fault never fired: the
    window was not tested, so the scenario is ``error``, never judged on it."""
    ctx.evidence.setdefault("crashed_calls", []).append(call.summary())
    if call.answered:
        raise Unjudgeable(
            f"the runtime declares failpoint {failpoint} but answered instead of crashing: {json.dumps(call.summary())}"
        )
    status = _exit_status(ctx.conn, min(ctx.call_timeout, CRASH_SETTLE_S))
    # 128 + 9: a shell wrapping the harness reports its child's SIGKILL that way.
    if status not in (-signal.SIGKILL, 128 + signal.SIGKILL):
        ended = "the process is still running" if status is None else f"the process ended with exit status {status}"
        raise Unjudgeable(
            f"the crash armed at {failpoint} did not fire: the call got no answer ({call.message}) and {ended}, "
            "instead of dying of SIGKILL there"
        )


def _exit_status(connection: Connection, settle_s: float) -> int | None:
    """The current process's exit status, waiting up to ``settle_s`` for it to end."""
    deadline = time.monotonic() + settle_s
    while True:
        status = connection.exit_statuses()[-1]
        if status is not None or time.monotonic() >= deadline:
            return status
        time.sleep(0.02)


def expect_one_creation(
    ctx: Context, before: TaskSet, calls: list[Call], submission_ids: Sequence[str], what: str
) -> TaskSet:
    """A4's contract for each id raced in ``calls`` (several ids may race at once):
    exactly one ``created``, every other call of that id ``reused``, one task_id,
    and durable state holds exactly one new task per id. ``what`` names the race in
    the evidence (a scenario may run several); returns the tasks after it."""
    created = {}
    calls = settle_in_flight(ctx, calls, what)
    for number, submission_id in enumerate(submission_ids, 1):
        race = f"{what}, id {number} of {len(submission_ids)}" if len(submission_ids) > 1 else what
        mine = [call for call in calls if call.args.get("client_submission_id") == submission_id]
        created[submission_id] = (race, _one_created(ctx, mine, submission_id, race))
    after = ctx.tasks(f"after {what}")
    ctx.check_tasks(before, after, new=len(submission_ids))
    for submission_id, (race, result) in created.items():
        expect_identity(ctx, result, after, submission_id, f"{race}: the created call")
    return after


def _one_created(ctx: Context, calls: list[Call], submission_id: str, what: str) -> Mapping[str, Any]:
    """The one ``created`` result among one id's racing calls (settled), the rest reused."""
    ctx.evidence.setdefault("dispositions", {})[what] = tally(calls)
    silent = [call for call in calls if not call.answered]
    if silent:
        raise Unjudgeable(f"{what}: {len(silent)} of {len(calls)} calls got no answer ({silent[0].message})")
    waited = [call for call in calls if call.code == "in_progress"]
    ctx.check(
        not waited, f"{what}: {len(waited)} calls answered in_progress instead of waiting for the holder and reusing"
    )
    # Every call answered: a disposition means a result.
    created = [call.result for call in calls if call.result is not None and call.disposition == "created"]
    reused = [call.result for call in calls if call.result is not None and call.disposition == "reused"]
    ctx.check(
        len(created) == 1 and len(reused) == len(calls) - 1,
        f"{what}: expected created=1, reused={len(calls) - 1}; got {json.dumps(tally(calls))}",
    )
    ids = {call.task_id for call in calls}
    ctx.check(
        len(ids) == 1, f"{what}: the calls answered {len(ids)} different task ids: {', '.join(sorted(map(str, ids)))}"
    )
    ctx.check(
        all(result.get("action_taken") is False for result in reused),
        f"{what}: a reused result says action_taken true",
    )
    for call in calls:
        if call.result is not None:
            expect_faithful(
                ctx, call.result, submission_id, call.args.get("task"), f"{what}: a {call.disposition} call"
            )
    return created[0]


def settle_in_flight(ctx: Context, calls: list[Call], what: str) -> list[Call]:
    """Where the runtime's protocol answers a concurrent duplicate ``in_flight`` (an
    HTTP API's 409 under the IETF Idempotency-Key draft), that answer wrote nothing and
    is acceptable only if a later retry answers with the one effect: each such call is
    retried (``settle_in_passes``, within one call timeout) and judged by its retry's
    answer."""
    if not ctx.conn.settles_in_flight:
        return calls
    settled, retries = settle_in_passes(
        calls,
        lambda call: call.code == "in_flight",
        lambda index: ctx.call(calls[index].op, calls[index].args),
        time.monotonic() + ctx.call_timeout,
    )
    if retries:
        ctx.evidence.setdefault("in_flight_retries", {})[what] = retries
    return settled


def failed_at(ctx: Context, call: Call, failpoint: str) -> None:
    """The call armed with a ``fail`` failpoint must answer ``io_error`` (the step
    happened, the caller cannot know): success means the fault never fired, so the
    window was not tested; no answer means the runtime died where it should have
    stayed up."""
    ctx.evidence.setdefault("failed_calls", []).append(call.summary())
    if call.kind == "ok" or not call.answered:
        raise Unjudgeable(
            f"the runtime declares failpoint {failpoint} but did not answer io_error there: {json.dumps(call.summary())}"
        )
    ctx.check(call.code == "io_error", f"fail at {failpoint} answered {call.code}, expected io_error")


def pin_reservation(ctx: Context, failpoint: str) -> tuple[str, dict, tuple[Any, Any]]:
    """Leave a reservation behind and learn its preallocated identity *before* any
    restart: ``fail`` at ``failpoint`` keeps the process up, so diagnose answers from
    the process that reserved (the caller's ``ctx.restart`` then SIGKILLs it).
    Learning the identity only after the restart would let a runtime that renumbers
    at start-up pass (REC-1, DIAG-2). Returns (submission id, task, (task_id,
    task_path))."""
    ctx.start(failpoints={failpoint: "fail"})
    submission_id, task = ctx.submission_id(), ctx.task()
    failed_at(ctx, ctx.write_task(submission_id, task), failpoint)
    reserved = ctx.diagnose(submission_id, "before the restart")
    ctx.check(
        reserved.get("state") == "reserved",
        f"diagnose after fail at {failpoint} says state {reserved.get('state')}, expected reserved",
    )
    ctx.check(
        isinstance(reserved.get("task_id"), str) and bool(reserved.get("task_id")),
        "diagnose of a reservation names no preallocated task_id",
    )
    return submission_id, task, (reserved.get("task_id"), reserved.get("task_path"))


def expect_kept(ctx: Context, found: tuple[Any, Any], pinned: tuple[Any, Any], what: str) -> None:
    """REC-1: the identity ``found`` now is the one preallocated before the restart."""
    ctx.check(
        found == pinned,
        f"{what}: {found[0]} at {found[1]}, not the preallocated {pinned[0]} at {pinned[1]} diagnose showed before the restart",
    )


def stalled_reservation(ctx: Context, failpoint: str) -> tuple[str, dict, TaskSet, tuple[Any, Any]]:
    """A reservation stalled across a SIGKILL and a restart, whose identity the
    restart kept. Returns (submission id, task, tasks after the restart, (task_id,
    task_path)); ends the scenario ``not_applicable`` when the runtime finished the
    creation by itself at start-up (allowed, but then no stalled reservation is left
    to examine)."""
    submission_id, task, pinned = pin_reservation(ctx, failpoint)
    ctx.restart()
    state = ctx.tasks("after restart")
    finished = state.for_submission(submission_id)
    if finished:
        expect_kept(
            ctx, (finished[0].get("task_id"), finished[0].get("task_path")), pinned, "the task finished at start-up is"
        )
        ctx.not_applicable(
            f"the runtime finished the interrupted creation at start-up (task {finished[0].get('task_id')}); no stalled reservation is left"
        )
    again = ctx.diagnose(submission_id, "after restart")
    expect_kept(ctx, (again.get("task_id"), again.get("task_path")), pinned, "after the restart diagnose shows")
    return submission_id, task, state, pinned


def tally(calls: list[Call]) -> dict[str, int]:
    """How many calls answered each disposition or error code. A garbled answer (``info``
    with a disposition: its result broke its schema) is counted as ``garbled``, not as
    what it claimed, as the reports' dispositions line does (``content.dispositions``)."""
    counts: dict[str, int] = {}
    for call in calls:
        garbled = call.kind == "info" and call.disposition
        key = "garbled" if garbled else call.disposition or call.code or "no answer"
        counts[key] = counts.get(key, 0) + 1
    return counts


def converge(
    ctx: Context,
    submission_id: str,
    task: dict[str, Any],
    bound: float,
    connection: Connection | None = None,
    first: tuple[float, Call] | None = None,
) -> Mapping[str, Any]:
    """Retry one key until it answers with its effect; fail once an answer without it
    came past ``bound`` seconds after the key's first retry was sent. ``first``: that
    retry when the caller made it, as when it was sent (``time.monotonic()``) and its
    call; converge judges it as its own. A pipelined retry is read only once its whole
    batch has answered, so each answer is timed by when it came (its send plus its
    duration), not when it was read: one read late still gets a retry."""
    if first is None:
        sent = time.monotonic()
        call = ctx.write_task(submission_id, task, connection=connection)
    else:
        sent, call = first
    deadline = sent + bound
    attempts = 1
    while True:
        if call.kind == "ok":
            ctx.evidence.setdefault("retries_to_settle", {})[submission_id] = attempts
            what = f"retry of {submission_id}"
            return expect_faithful(ctx, ctx.expect_ok(call, what), submission_id, task, what)
        ctx.check(
            call.kind != "fail" or call.code == "in_flight",
            f"the retry of {submission_id} with its own task answered {call.disposition or call.code}: {call.message or ''}",
        )
        answered = sent + call.duration_s
        ctx.check(
            answered < deadline,
            f"{submission_id} did not answer with its effect within {bound:g}s after the fault "
            f"({attempts} attempts; last: {call.code or 'no answer'} {call.message or ''})".rstrip(),
        )
        pause_before_retry(attempts - 1, deadline, since=answered)
        attempts += 1
        sent = time.monotonic()
        call = ctx.write_task(submission_id, task, connection=connection)
