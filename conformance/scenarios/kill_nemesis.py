"""KILL-NEMESIS: SIGKILLs at seeded moments while calls are in flight, for runtimes
that offer no failpoints (an MCP server, an HTTP API) and for every other one.

A first batch of fresh keys, not killed, measures when its answers arrive; each
round then sends write_task for a seeded subset of keys, pipelined, SIGKILLs the
runtime's process group at a seeded fraction of the median answer time (so kills
land while effects are being written, on a fast runtime and a slow one alike) and
starts it again on the same state. Afterwards every key is retried until it answers with its effect, within the
runtime's recovery bound (``Connection.recovery_s``) plus one call timeout: a key
that stays in flight or unanswered past it fails (liveness). The set checker then
judges durable state: one effect per key, no effect an ``ok`` answer acknowledged is
lost, nothing else appeared. The schedule comes from the scenario's seeded rng, so
``--only KILL-NEMESIS --seed N`` replays it (the moments a kill lands in the runtime's
code still depend on timing; the schedule is in the evidence).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping
from typing import Any

from retryproof.conformance.context import Context, Unjudgeable
from retryproof.conformance.outcome import IN_FLIGHT_RETRY_PAUSE_S
from retryproof.conformance.scenarios import scenario
from retryproof.conformance.scenarios.common import expect_faithful, expect_identity, tally

KEYS = 8
ROUNDS = 5


@scenario("KILL-NEMESIS", long=True)
def kill_nemesis(ctx: Context) -> None:
    ctx.start()
    before = ctx.tasks("before")
    measured = [(ctx.submission_id(), ctx.task()) for _ in range(KEYS)]
    began = time.perf_counter()
    calibration = ctx.submit_all([("write_task", ctx.write_task_args(*pair)) for pair in measured])
    answered: list[float] = []
    for _, _, future in calibration.pending:
        future.add_done_callback(lambda _: answered.append(time.perf_counter() - began))
    calls = ctx.collect(calibration)
    if not any(call.answered for call in calls):
        # A runtime that answers nothing cannot be judged on what kills do to it; every
        # other scenario calls that error, and a liveness failure would blame the kills.
        raise Unjudgeable(f"none of the {KEYS} calibration calls, before any kill, got an answer ({calls[0].message})")
    # The median answer time: kills before it land while effects are being written.
    horizon_ms = statistics.median(answered) * 1000 if answered else ctx.call_timeout * 1000
    work = [(ctx.submission_id(), ctx.task()) for _ in range(KEYS)]
    schedule: list[dict[str, Any]] = []
    for _ in range(ROUNDS):
        chosen = sorted(ctx.rng.sample(range(KEYS), ctx.rng.randint(2, KEYS)))
        fraction = ctx.rng.random()
        delay_ms = round(fraction * horizon_ms, 1)
        batch = ctx.submit_all([("write_task", ctx.write_task_args(*work[index])) for index in chosen])
        time.sleep(delay_ms / 1000)
        ctx.kill()
        calls = ctx.collect(batch)
        ctx.start()
        schedule.append(
            {"keys": chosen, "kill_at_fraction": round(fraction, 3), "kill_after_ms": delay_ms, "answers": tally(calls)}
        )
    ctx.note("schedule", {"median_answer_ms": round(horizon_ms, 1), "rounds": schedule})
    bound = ctx.conn.recovery_s + ctx.call_timeout
    finals = {submission_id: _converge(ctx, submission_id, task, bound) for submission_id, task in measured + work}
    after = ctx.tasks("after")
    ctx.check_tasks(before, after, new=2 * KEYS)
    for submission_id, final in finals.items():
        expect_identity(ctx, final, after, submission_id, f"the answer for {submission_id} after the kills")


def _converge(ctx: Context, submission_id: str, task: dict[str, Any], bound: float) -> Mapping[str, Any]:
    """Retry one key until it answers with its effect; fail past ``bound`` seconds."""
    deadline = time.monotonic() + bound
    attempts = 0
    while True:
        attempts += 1
        call = ctx.write_task(submission_id, task)
        if call.kind == "ok":
            ctx.evidence.setdefault("retries_to_settle", {})[submission_id] = attempts
            what = f"retry of {submission_id}"
            return expect_faithful(ctx, ctx.expect_ok(call, what), submission_id, task, what)
        ctx.check(
            call.kind != "fail" or call.code == "in_flight",
            f"the retry of {submission_id} with its own task answered {call.disposition or call.code}: {call.message or ''}",
        )
        ctx.check(
            time.monotonic() < deadline,
            f"{submission_id} did not answer with its effect within {bound:g}s after the restart "
            f"({attempts} attempts; last: {call.code or 'no answer'} {call.message or ''})".rstrip(),
        )
        time.sleep(IN_FLIGHT_RETRY_PAUSE_S)
