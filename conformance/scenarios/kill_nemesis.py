"""KILL-NEMESIS: SIGKILLs at seeded moments while calls are in flight, for runtimes
that offer no failpoints (an MCP server, an HTTP API) and for every other one.

A first batch of fresh keys, not killed, measures two windows while the listing is
polled: from sending to the moment the effects show in the listing (the runtime's
claim -> effect window, where a key is claimed and nothing is made yet) and from
there to the answers (effect -> answer, where the effect is made and its record not
yet finished). Each round then sends write_task for keys, pipelined, and SIGKILLs the
runtime's process group, the rounds taking the windows in turn: a seeded subset of
eight shared keys killed at a seeded fraction of the time before the effects show, or
fresh keys killed the moment the first of their effects is listed; then starts it
again on the same state. The kills
land where the defects live, not at random points of the answer time, so the same
seed gives the same verdict however loaded the machine is. Afterwards every
key is retried until it answers with its effect, within the runtime's recovery bound
(``Connection.recovery_s``) plus one call timeout: a key that stays in flight or
unanswered past it fails (liveness). The set checker then judges durable state: one
effect per key, no effect an ``ok`` answer acknowledged is lost, nothing else
appeared. A failure writes a replay file with the measured windows
(``RETRYPROOF_KILL_WINDOWS``), so ``retryproof replay`` runs the same schedule.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

from retryproof.conformance import replay_file
from retryproof.conformance.context import Context, ScenarioFailed, Unjudgeable
from retryproof.conformance.scenarios import scenario
from retryproof.conformance.scenarios.common import converge, expect_identity, tally

KEYS = 8
ROUNDS = 5
#: ``EFFECT_MS,ANSWER_MS``: the windows to use instead of measuring them (a replay).
WINDOWS_ENV = "RETRYPROOF_KILL_WINDOWS"
#: How often the calibration polls the listing.
POLL_S = 0.02


@scenario("KILL-NEMESIS", long=6)
def kill_nemesis(ctx: Context) -> None:
    ctx.start()
    before = ctx.tasks("before")
    measured = [(ctx.submission_id(), ctx.task()) for _ in range(KEYS)]
    effect_ms, answer_ms = _windows(ctx, measured)
    work = [(ctx.submission_id(), ctx.task()) for _ in range(KEYS)]
    fresh: list[tuple[str, dict[str, Any]]] = []
    schedule: list[dict[str, Any]] = []
    for round_number in range(ROUNDS):
        count = ctx.rng.randint(2, KEYS)
        fraction = round(ctx.rng.uniform(0.1, 0.9), 3)
        # Even rounds send a seeded subset of the shared keys (a key may be killed in
        # several rounds) and kill at a seeded fraction of the time before the effects
        # show; odd rounds send fresh keys, which have work to do, and kill the moment
        # the first of their effects is listed (its record is not finished yet,
        # whatever the machine's load).
        before_effect = round_number % 2 == 0
        if before_effect:
            chosen = sorted(ctx.rng.sample(range(KEYS), count))
            sent = [work[index] for index in chosen]
        else:
            sent = [(ctx.submission_id(), ctx.task()) for _ in range(count)]
            fresh += sent
        batch = ctx.submit_all([("write_task", ctx.write_task_args(*pair)) for pair in sent])
        if before_effect:
            time.sleep(fraction * effect_ms / 1000)
        else:
            _first_effect(ctx, [submission_id for submission_id, _ in sent], batch.began, answer_ms)
        killed_ms = round((time.perf_counter() - batch.began) * 1000, 1)
        ctx.kill()
        calls = ctx.collect(batch)
        ctx.start()
        if before_effect:
            step: dict[str, Any] = {"keys": chosen, "window": "claim -> effect", "fraction": fraction}
        else:
            step = {"fresh_keys": count, "window": "effect -> answer", "at": "the first effect listed"}
        schedule.append({**step, "kill_after_ms": killed_ms, "answers": tally(calls)})
    windows = f"{effect_ms:g},{answer_ms:g}"
    ctx.note("schedule", {"effect_ms": effect_ms, "answer_ms": answer_ms, "rounds": schedule})
    try:
        bound = ctx.conn.recovery_s + ctx.call_timeout
        keys = measured + work + fresh
        finals = {submission_id: converge(ctx, submission_id, task, bound) for submission_id, task in keys}
        after = ctx.tasks("after")
        ctx.check_tasks(before, after, new=len(keys))
        for submission_id, final in finals.items():
            expect_identity(ctx, final, after, submission_id, f"the answer for {submission_id} after the kills")
    except ScenarioFailed:
        ctx.reproduce_env[WINDOWS_ENV] = windows
        ctx.note(
            "replay",
            replay_file.scenario_replay(ctx.entry.id, ctx.seed, ctx.hello.implementation, {WINDOWS_ENV: windows}),
        )
        raise


def _first_effect(ctx: Context, keys: list[str], began: float, answer_ms: float) -> None:
    """Return once the listing holds an effect of one of ``keys`` (fresh ones), or
    past twice the measured answer time (the batch was answered or lost by then)."""
    deadline = began + 2 * answer_ms / 1000
    wanted = set(keys)
    while time.perf_counter() < deadline:
        if wanted & {task.get("client_submission_id") for task in ctx.tasks().tasks}:
            return
        time.sleep(POLL_S)


def _windows(ctx: Context, keys: list[tuple[str, dict[str, Any]]]) -> tuple[float, float]:
    """Milliseconds from sending a batch until its effects show in the listing (the
    median key), and until the answers arrive (the median answer); taken from
    ``WINDOWS_ENV`` when a replay gives them. The batch is sent and judged either way."""
    began = time.perf_counter()
    batch = ctx.submit_all([("write_task", ctx.write_task_args(*pair)) for pair in keys])
    answered: list[float] = []
    for _, _, future in batch.pending:
        future.add_done_callback(lambda _: answered.append(time.perf_counter() - began))
    listed: dict[str, float] = {}
    deadline = time.monotonic() + ctx.call_timeout
    while len(listed) < len(keys) and len(answered) < len(keys) and time.monotonic() < deadline:
        owned = {task.get("client_submission_id") for task in ctx.tasks().tasks}
        for submission_id, _ in keys:
            if submission_id in owned:
                listed.setdefault(submission_id, time.perf_counter() - began)
        time.sleep(POLL_S)
    calls = ctx.collect(batch)
    if not any(call.answered for call in calls):
        # A runtime that answers nothing cannot be judged on what kills do to it; every
        # other scenario calls that error, and a liveness failure would blame the kills.
        raise Unjudgeable(f"none of the {KEYS} calibration calls, before any kill, got an answer ({calls[0].message})")
    given = os.environ.get(WINDOWS_ENV)
    if given:
        effect_ms, answer_ms = (float(part) for part in given.split(","))
        return effect_ms, answer_ms
    answer_ms = round(statistics.median(answered) * 1000 if answered else ctx.call_timeout * 1000, 1)
    # An effect first seen after its answer (a fast runtime, between two polls) is no
    # window of its own: the kills then take fractions of the answer time.
    effect_ms = round(min(statistics.median(listed.values()) * 1000, answer_ms), 1) if listed else answer_ms
    return effect_ms, answer_ms
