"""Crashes inside write_task: SIGKILL at each failpoint, restart, retry. The retry
converges on one task under the preallocated identity, and says ``created`` exactly
when it wrote the task object itself."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from retryproof.conformance.scenarios import Context, scenario
from retryproof.conformance.scenarios.common import (
    expect_faithful,
    expect_identity,
    expect_kept,
    fired,
    pin_reservation,
    stalled_reservation,
)

AFTER_RESERVE = "write_task.after_reserve"


def crash_then_retry(ctx: Context, failpoint: str) -> None:
    if failpoint == AFTER_RESERVE:
        # A crash inside the call leaves its identity readable only after the
        # restart, too late to catch a runtime that renumbers at start-up; a first
        # submission pinned before any restart catches it (see pin_reservation).
        pinned_id, pinned_task, pinned = pin_reservation(ctx, failpoint)
        ctx.restart(failpoints={failpoint: "crash"})
    else:
        ctx.start(failpoints={failpoint: "crash"})
    before = ctx.tasks("before")
    submission_id, task = ctx.submission_id(), ctx.task()
    fired(ctx, ctx.write_task(submission_id, task), failpoint)
    ctx.restart()
    # REC-1 is judged against the identity the first attempt left behind, learnt two
    # ways: diagnose names the reservation (the only way after after_reserve, hence
    # that scenario needs diagnose), and list_tasks shows the task object once it is
    # durable (every later failpoint), so no runtime escapes by not offering diagnose.
    reserved = ctx.receipt(submission_id, "after the crash")
    ctx.check(
        reserved is None or reserved.get("state") != "absent",
        f"diagnose says absent after a crash at {failpoint}, where the receipt was durable",
    )
    present = ctx.tasks("after restart").for_submission(submission_id)
    if failpoint != AFTER_RESERVE:
        ctx.check(
            len(present) == 1,
            f"the task object was durable at {failpoint}, yet list_tasks after the restart holds {len(present)} tasks for the id",
        )
    # Only a crash before the task object is durable leaves the retry anything to
    # write; a runtime may also have finished the creation itself at start-up.
    expected = "created" if failpoint == AFTER_RESERVE and not present else "reused"
    result = ctx.expect_disposition(ctx.write_task(submission_id, task), expected, "retry after the crash")
    ctx.check(
        result.get("action_taken") is (expected == "created"),
        f"retry: {expected} must say action_taken {expected == 'created'}",
    )
    after = ctx.tasks("after retry")
    ctx.check_tasks(before, after, new=1)
    expect_faithful(ctx, result, submission_id, task, "retry after the crash")
    expect_identity(ctx, result, after, submission_id, "retry after the crash")
    answered = (result["task_id"], result["task_path"])
    if present:
        written = (present[0].get("task_id"), present[0].get("task_path"))
        ctx.check(
            answered == written,
            f"the retry answered {answered[0]} at {answered[1]}, not the task {written[0]} at {written[1]} the first attempt wrote",
        )
    if reserved is not None:
        preallocated = (reserved.get("task_id"), reserved.get("task_path"))
        ctx.check(
            answered == preallocated,
            f"the retry answered {answered[0]} at {answered[1]}, not the preallocated {preallocated[0]} at {preallocated[1]}",
        )
    second = ctx.expect_disposition(ctx.write_task(submission_id, task), "reused", "second retry")
    ctx.check(second.get("task_id") == result["task_id"], "the second retry answered another task id")
    ctx.receipt(submission_id, "after retry")
    if failpoint == AFTER_RESERVE:
        # The runtime may have finished the pinned creation at start-up (reused).
        finished = bool(after.for_submission(pinned_id))
        call = ctx.write_task(pinned_id, pinned_task)
        kept = ctx.expect_disposition(
            call, "reused" if finished else "created", "retry of the submission pinned before the restarts"
        )
        expect_faithful(ctx, kept, pinned_id, pinned_task, "retry of the pinned submission")
        expect_kept(
            ctx, (kept.get("task_id"), kept.get("task_path")), pinned, "the retry of the pinned submission answered"
        )
        ctx.check_tasks(after, ctx.tasks("after the pinned retry"), new=0 if finished else 1)


@scenario("CRASH-AFTER-RESERVE")
def crash_after_reserve(ctx: Context) -> None:
    crash_then_retry(ctx, AFTER_RESERVE)


@scenario("CRASH-AFTER-TASK-WRITE")
def crash_after_task_write(ctx: Context) -> None:
    crash_then_retry(ctx, "write_task.after_task_write")


@scenario("CRASH-AFTER-TASK-CREATED")
def crash_after_task_created(ctx: Context) -> None:
    crash_then_retry(ctx, "write_task.after_task_created")


@scenario("CRASH-AFTER-COMMIT")
def crash_after_commit(ctx: Context) -> None:
    crash_then_retry(ctx, "write_task.after_commit")


#: How long STALE-RESERVATION-DIAGNOSTICS waits between two readings of one receipt:
#: short because the scenario waits it twice and the selftest runs the scenario three
#: times. A second reading must show the reservation at least half of it older
#: (``AGE_GROWTH``): a runtime whose clock ticks every 15 ms passes every time, and one
#: that refreshes the age at each read shows about none.
AGE_STEP_S = 0.1
AGE_GROWTH = 0.5 * AGE_STEP_S
#: Readings taken beyond the second while a loaded machine's round trips leave a
#: refreshed age and a true one too close to tell apart (``_age_not_refreshed``).
AGE_EXTRA_READINGS = 5


@scenario("STALE-RESERVATION-DIAGNOSTICS", long=2)
def stale_reservation(ctx: Context) -> None:
    submission_id, task, state, pinned = stalled_reservation(ctx, AFTER_RESERVE)
    stalled_at = time.time()  # the reservation is at least this old at every later reading
    stalled = ctx.diagnose(submission_id, "stale_after_s=0", stale_after_s=0)
    ctx.check(stalled.get("state") == "reserved", f"diagnose says state {stalled.get('state')}, expected reserved")
    ctx.check(stalled.get("task_exists") is False, "diagnose says the task exists, but it was never written")
    ctx.check(stalled.get("stalled") is True, "a reservation older than stale_after_s=0 is not reported stalled")
    ctx.check(
        isinstance(stalled.get("task_id"), str) and bool(stalled.get("task_id")),
        "diagnose of a reservation names no preallocated task_id",
    )
    fresh = ctx.diagnose(submission_id, "stale_after_s=3600", stale_after_s=3600)
    _still_reserved(ctx, fresh, stalled, "the second reading")
    ctx.check(fresh.get("stalled") is False, "a reservation younger than stale_after_s=3600 is reported stalled")
    # Reading must not refresh the reservation: between two readings AGE_STEP_S apart
    # age_s grows by AGE_STEP_S. The pause before the first reading matters: a runtime
    # that restarts the age at every read shows the same small age both times.
    time.sleep(AGE_STEP_S)
    sent = [time.time()]
    first = ctx.diagnose(submission_id, "after a pause", stale_after_s=3600)
    _still_reserved(ctx, first, stalled, "the reading after a pause")
    time.sleep(AGE_STEP_S)
    sent.append(time.time())
    second = ctx.diagnose(
        submission_id, f"{AGE_STEP_S}s later, stale_after_s={AGE_STEP_S / 2}", stale_after_s=AGE_STEP_S / 2
    )
    answered = time.time()
    _still_reserved(ctx, second, stalled, f"the reading {AGE_STEP_S}s later")
    ages = (first.get("age_s"), second.get("age_s"))
    ctx.check(
        isinstance(ages[0], (int, float)) and isinstance(ages[1], (int, float)) and ages[1] - ages[0] >= AGE_GROWTH,
        f"age_s went from {ages[0]} to {ages[1]} over {AGE_STEP_S}s: diagnostics must measure the reservation's age, and reading them must not refresh it",
    )
    ctx.check(
        second.get("stalled") is True,
        f"a reservation {ages[1]}s old is not reported stalled past stale_after_s={AGE_STEP_S / 2}",
    )
    _age_not_refreshed(ctx, submission_id, stalled, second, sent, answered, stalled_at)
    absent = ctx.diagnose(ctx.submission_id(), "an unknown id")
    ctx.check(
        absent.get("state") == "absent", f"diagnose of an unknown id says state {absent.get('state')}, expected absent"
    )
    ctx.restart(graceful=True)
    again = ctx.diagnose(submission_id, "after another restart", stale_after_s=0)
    ctx.check(
        (again.get("state"), again.get("task_id"), again.get("task_path"))
        == ("reserved", stalled.get("task_id"), stalled.get("task_path")),
        "reading diagnostics or restarting changed the stalled reservation",
    )
    ctx.check(ctx.tasks("after diagnostics").count == state.count, "diagnostics created or deleted a task")
    result = ctx.expect_disposition(ctx.write_task(submission_id, task), "created", "retry after the diagnostics")
    expect_kept(
        ctx, (result.get("task_id"), result.get("task_path")), pinned, "the retry after the diagnostics answered"
    )


def _age_not_refreshed(
    ctx: Context,
    submission_id: str,
    stalled: Mapping[str, Any],
    reading: Mapping[str, Any],
    sent: list[float],
    answered: float,
    stalled_at: float,
) -> None:
    """DIAG-1, judged without timing luck. The growth of age_s between two readings
    tells a refreshed age from a true one only while the round trips are short: on a
    loaded machine a slow second reading made a refreshing runtime's age grow enough.
    So each reading is also held to bounds the kit knows: a true age is at least the
    time from the stall to the reading's sending (less ``AGE_GROWTH`` for a coarse
    clock), an age the previous reading refreshed at most the time from that reading's
    sending to this one's answer. Once the first bound exceeds the second, an age that
    meets it was not refreshed; until then, another reading ``AGE_STEP_S`` later, whose
    true age has grown by that much more than a refreshed one can."""
    for extra in range(AGE_EXTRA_READINGS + 1):
        since_stall = sent[-1] - stalled_at
        age = reading.get("age_s")
        ctx.check(
            isinstance(age, (int, float)) and age >= since_stall - AGE_GROWTH,
            f"age_s was {age} at a reading sent {since_stall:.3f}s after the reservation stalled: "
            "diagnostics must measure the reservation's age, and reading them must not refresh it",
        )
        if since_stall - AGE_GROWTH > answered - sent[-2] or extra == AGE_EXTRA_READINGS:
            return
        time.sleep(AGE_STEP_S)
        sent.append(time.time())
        reading = ctx.diagnose(submission_id, f"{AGE_STEP_S}s later again", stale_after_s=3600)
        answered = time.time()
        _still_reserved(ctx, reading, stalled, f"the reading {AGE_STEP_S}s later again")


def _still_reserved(ctx: Context, reading: Mapping[str, Any], earlier: Mapping[str, Any], which: str) -> None:
    """DIAG-1, DIAG-2: a reading of diagnostics leaves the reservation as it was; what
    a later reading shows is judged first, so a receipt that diagnostics deleted is
    reported as deleted, not as an age that stopped growing."""
    state = reading.get("state")
    if state == "absent":
        ctx.check(
            False,
            f"{which} of diagnostics says state absent where an earlier one said reserved: reading diagnostics deleted the receipt",
        )
    ctx.check(
        (state, reading.get("task_id"), reading.get("task_path"))
        == ("reserved", earlier.get("task_id"), earlier.get("task_path")),
        f"{which} of diagnostics says state {state}, task {reading.get('task_id')} at {reading.get('task_path')}, "
        f"where an earlier one said reserved, task {earlier.get('task_id')} at {earlier.get('task_path')}: reading diagnostics changed the receipt",
    )
