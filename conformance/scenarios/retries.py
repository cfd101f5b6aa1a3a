"""Retries of one submission: response loss (A2), races (A4), restarts."""

from __future__ import annotations

from retryproof.adapters.loss import WITHHELD, WITHHELD_THEN_KILLED, Loss
from retryproof.conformance.context import TaskSet
from retryproof.conformance.outcome import Call
from retryproof.conformance.scenarios import Context, scenario
from retryproof.conformance.scenarios.common import (
    converge,
    expect_created,
    expect_identity,
    expect_one_creation,
    expect_reuse_of,
    fired,
)

AFTER_COMMIT = "write_task.after_commit"


@scenario("A2-RESPONSE-LOSS", takes_server=True)
def response_loss(ctx: Context) -> None:
    ctx.start()
    before = ctx.tasks("before")
    submission_id, task = ctx.submission_id(), ctx.task()
    lost = ctx.lose_response(submission_id, task, WITHHELD)
    if lost is not None:
        _after_real_losses(ctx, before, (submission_id, task, *lost))
        return
    # The caller never sees this answer: the kit reads it only as evidence and
    # judges the retry against durable state, not against it.
    ctx.expect_ok(ctx.write_task(submission_id, task), "first call")
    retry = ctx.write_task(submission_id, task)
    after = ctx.tasks("after")
    ctx.check_tasks(before, after, new=1)
    expect_reuse_of(ctx, retry, after, submission_id, "retry after the lost response")


def _after_real_losses(ctx: Context, before: TaskSet, withheld: tuple[str, dict, Call, float | None]) -> None:
    """Three real losses, each on a fresh key: the answer withheld (which also times
    the effect), the call cut once its effect is listed, and cut at a seeded fraction of
    the time the effect took (the last listing without it). After each, the retry (on a new connection; over MCP stdio a
    new process) must answer the one effect, after in-flight answers within the
    runtime's recovery bound if any; an effect listed before the retry must be reused."""
    # The seeded cut lands between the request and the effect, where a runtime that
    # claims a key and then makes the effect has its window; when the first listing
    # already held the effect, within the answer time.
    submission_id, task, call, listed_s = withheld
    window_s = listed_s or call.duration_s
    # At most half of it: that lower bound was measured on another call, and the time a
    # call takes varies with the machine's load.
    fraction = round(ctx.rng.uniform(0.1, 0.5), 3)
    ctx.note("effect_not_yet_listed_at_s", listed_s)
    losses = [(submission_id, task, WITHHELD, call)]
    for loss in (Loss("cut", when_listed=True), Loss("cut", after_s=round(fraction * window_s, 3))):
        if not ctx.conn.alive:
            ctx.start()
        submission_id, task = ctx.submission_id(), ctx.task()
        lost = ctx.lose_response(submission_id, task, loss)
        assert lost is not None  # the connection lost the first answer, so it loses these
        losses.append((submission_id, task, loss, lost[0]))
    ctx.note("cut_fraction_of_answer_time", fraction)
    bound = ctx.conn.recovery_s + ctx.call_timeout
    evidence = []
    for submission_id, task, loss, call in losses:
        if not ctx.conn.alive:  # over MCP stdio the server ends with its caller's input
            ctx.start()
        listed = bool(ctx.tasks().for_submission(submission_id))
        final = converge(ctx, submission_id, task, bound)
        evidence.append({"key": submission_id, **loss.describe(), "lost": call.message, "listed_before_retry": listed})
        ctx.note("losses", evidence)
        ctx.check(
            not listed or final.get("disposition") == "reused",
            f"{submission_id} ({loss.describe()['fault']}): the effect was listed before the retry, "
            f"yet the retry answered {final.get('disposition')}",
        )
        expect_identity(ctx, final, ctx.tasks(), submission_id, f"the retry of {submission_id}")
    ctx.check_tasks(before, ctx.tasks("after"), new=len(losses))


@scenario("A2-CRASH-BEFORE-RESPONSE", takes_server=True)
def crash_before_response(ctx: Context) -> None:
    """The crash is the runtime's own, at its ``after_commit`` point: committed, the
    answer not sent. Where a library stores its record only after sending the answer
    (express-idempotency), no such moment exists; its harness arms the point just
    before the answer leaves, since a point after it (the answer already at the
    harness) left the verdict to whether the record reached its store before the
    kill: a seed failed and the next passed."""
    if not ctx.has_failpoint(AFTER_COMMIT):
        _killed_after_answering(ctx)
        return
    ctx.start(failpoints={AFTER_COMMIT: "crash"})
    before = ctx.tasks("before")
    submission_id, task = ctx.submission_id(), ctx.task()
    fired(ctx, ctx.write_task(submission_id, task), AFTER_COMMIT)
    ctx.restart()
    retry = ctx.write_task(submission_id, task)
    after = ctx.tasks("after")
    ctx.check_tasks(before, after, new=1)
    expect_reuse_of(ctx, retry, after, submission_id, "retry after the crash")
    ctx.receipt(submission_id, "after retry")


def _killed_after_answering(ctx: Context) -> None:
    """Without the failpoint: the runtime's answer is withheld (through a binding) or
    read and disregarded (a harness's one stdout), and the runtime is SIGKILLed at once;
    after a restart the retry must reach the one effect (within the recovery bound)
    and answer it reused, since the answer said the effect was made."""
    ctx.start()
    before = ctx.tasks("before")
    submission_id, task = ctx.submission_id(), ctx.task()
    if ctx.lose_response(submission_id, task, WITHHELD_THEN_KILLED) is None:
        ctx.expect_ok(ctx.write_task(submission_id, task), "the call whose answer the caller never sees")
        ctx.kill()
    ctx.note("crash", "no failpoint: the answer was withheld and the runtime SIGKILLed at once")
    ctx.start()
    final = converge(ctx, submission_id, task, ctx.conn.recovery_s + ctx.call_timeout)
    after = ctx.tasks("after")
    ctx.check_tasks(before, after, new=1)
    ctx.check(
        final.get("disposition") == "reused",
        f"the retry after the crash answered {final.get('disposition')}, but the effect was made before it",
    )
    expect_identity(ctx, final, after, submission_id, "retry after the crash")


#: How A4 races: ``A4_ROUNDS`` rounds, each racing ``A4_IDS_PER_ROUND`` fresh ids at
#: once, the concurrency setting's callers on each, the same for every runtime. A
#: check-then-set whose window is only the library's own code between its lookup and
#: its write (microseconds: a Redis GET then SET, a lock file created empty and written
#: after) is hit by about one race in twenty of one id alone once the runtime is warm,
#: so five such rounds caught it on some seeds and runs and not on others. Ids racing
#: at once keep the runtime busy inside each other's windows: a race of
#: ``narrowly-unlocked`` (the kit's own tests) then hits about seven times in eight,
#: Prefect's lock file failed 19 runs of 20 with eight ids and 5 of 7 with four (figures
#: in CHANGELOG.md), and a conformant runtime's creations overlap, so a round of eight
#: ids costs it little more than one id did. One id's callers go back to back (an event
#: loop meets them together; interleaved with the other ids', express-idempotency passed
#: one run in six), the ids one after another, all before any answer is read. Every call
#: of a round shares one call timeout: a slow runtime may need ``--call-timeout``
#: (Prefect's sixty-four task runs at once answered none within 10 s once, at load
#: 20-35). Several rounds, so a runtime that races only when cold or only when warm is
#: met both ways (A4-CONCURRENT therefore shares a run's server only as its first user,
#: ``cold_server``: no other scenario warmed it); fresh ids in each, so a lock table
#: warmed by one id passes nothing. Three, because how often a race meets such a window
#: falls with the storage's cost, and the races of one round miss it together: with the
#: state on tmpfs (a free fsync), ``benchmarks/bench_races.py`` saw about one warm round
#: in five miss ``narrowly-unlocked`` entirely, where on disk none did (figures in
#: CHANGELOG.md).
A4_ROUNDS = 3
A4_IDS_PER_ROUND = 8


def _race(ctx: Context) -> tuple[list[str], list[tuple[str, dict]]]:
    """A round's fresh ids and one caller's requests: one call per id, in id order."""
    pairs = [(ctx.submission_id(), ctx.task()) for _ in range(A4_IDS_PER_ROUND)]
    return [submission_id for submission_id, _ in pairs], [
        ("write_task", ctx.write_task_args(submission_id, task)) for submission_id, task in pairs
    ]


@scenario("A4-CONCURRENT", alone=True, shares_server=True, cold_server=True)
def concurrent(ctx: Context) -> None:
    ctx.start()
    state = ctx.tasks("before")
    with ctx.alone():
        for round_number in range(1, A4_ROUNDS + 1):
            submission_ids, requests = _race(ctx)
            calls = ctx.concurrently([request for request in requests for _ in range(ctx.concurrency)])
            state = expect_one_creation(
                ctx, state, calls, submission_ids, f"round {round_number}: {ctx.concurrency} pipelined calls"
            )


@scenario("A4-MULTIPROCESS", alone=True)
def multiprocess(ctx: Context) -> None:
    ctx.start()
    state = ctx.tasks("before")
    processes = [ctx.conn, *ctx.spawn(ctx.concurrency - 1)]  # the first process races too: one start fewer
    with ctx.alone():
        for round_number in range(1, A4_ROUNDS + 1):
            submission_ids, requests = _race(ctx)
            calls = ctx.in_parallel(processes, requests)
            state = expect_one_creation(
                ctx,
                state,
                calls,
                submission_ids,
                f"round {round_number}: {ctx.concurrency} processes on one state directory",
            )


@scenario("RESTART-REUSE", takes_server=True)
def restart_reuse(ctx: Context) -> None:
    ctx.start()
    before = ctx.tasks("before")
    submission_id, task = ctx.submission_id(), ctx.task()
    expect_created(ctx, ctx.write_task(submission_id, task), submission_id, task, "first call")
    for graceful in (True, False):
        ctx.restart(graceful=graceful)
        retry = ctx.write_task(submission_id, task)
        state = ctx.tasks("after graceful restart" if graceful else "after SIGKILL restart")
        expect_reuse_of(
            ctx, retry, state, submission_id, "retry after a graceful restart" if graceful else "retry after SIGKILL"
        )
    ctx.check_tasks(before, state, new=1)


@scenario("REUSE-EARLIER-ID", shares_server=True)
def reuse_earlier_id(ctx: Context) -> None:
    ctx.start()
    before = ctx.tasks("before")
    submission_id, task = ctx.submission_id(), ctx.task()
    expect_created(ctx, ctx.write_task(submission_id, task), submission_id, task, "first call")
    for number in (1, 2):
        later_id, later_task = ctx.submission_id(), ctx.task()
        expect_created(
            ctx, ctx.write_task(later_id, later_task), later_id, later_task, f"later creation {number} (another id)"
        )
    retry = ctx.write_task(submission_id, task)
    after = ctx.tasks("after")
    # The answer's task must be the one list_tasks holds for this id, not the newest.
    expect_reuse_of(ctx, retry, after, submission_id, "retry of the earliest id after two later creations")
    ctx.check_tasks(before, after, new=3)
