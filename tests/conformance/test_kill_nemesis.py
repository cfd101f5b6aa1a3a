"""KILL-NEMESIS judges what its kills did, never the machine's load: a round counts
only when its SIGKILL interrupted a call, so a runtime whose answers always come
before any kill can land is an error, not a pass, and a runtime that strands a key
claimed mid-call fails on every seed.

The runtimes here live in this process (a kill cancels their calls in flight; their
durable state is a dict that outlives it), so the timing is the test's own, not the
machine's; the real processes (the reference, the claim services over HTTP, a NestJS
app on Redis) are run by ``retryproof run`` and ``benchmarks/bench_faults.py``."""

from __future__ import annotations

import heapq
import itertools
import random
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

import pytest

from retryproof.adapters.connection import Connection, Lost
from retryproof.conformance.catalogue import entry
from retryproof.conformance.context import Context, ScenarioFailed, Unjudgeable
from retryproof.conformance.events import RunFinished, RunInfo, ScenarioResult
from retryproof.conformance.scenarios.common import converge
from retryproof.conformance.scenarios.kill_nemesis import (
    AHEAD_OF_ANSWERS,
    ATTEMPTS,
    LATE,
    LATE_ATTEMPTS,
    ROUNDS,
    kill_nemesis,
)
from retryproof.conformance.verdict import judge
from retryproof.conformance.writers.html import render_html
from retryproof.conformance.writers.markdown import render_markdown
from retryproof.spec.digest import DIGEST_SCHEMA_VERSION, request_digest
from retryproof.spec.protocol import Failure, Hello, Success

#: A call's claim -> effect and effect -> answer windows in the slow runtimes.
WORK_S = 0.04


class Store:
    """Durable state: what outlives a SIGKILL."""

    def __init__(self) -> None:
        self.receipts: dict[str, dict[str, Any]] = {}
        self.tasks: list[dict[str, Any]] = []
        self.claims: set[str] = set()  # keys claimed and not finished (only a stranding runtime keeps them)
        self.starts = 0


class Step:
    """A runtime's step, run by its ``Clock`` when due unless cancelled first."""

    def __init__(self, step: Any, args: tuple) -> None:
        self.step, self.args, self.cancelled = step, args, False

    def cancel(self) -> None:
        self.cancelled = True


class Clock:
    """Runs a runtime's steps when due, on one thread of its own, until stopped. A
    ``threading.Timer`` per step started a thread under the runtime's lock, and
    ``Thread.start`` waits for the new thread to run: on a loaded machine a batch's
    effects, made at once, held the lock (and the kit's listing behind it) for tens of
    ms, so the kit's kills came that long after the effects (KILL-NEMESIS then placed the
    control's rounds again as late, up to an error)."""

    def __init__(self) -> None:
        self.due: list[tuple[float, int, Step]] = []
        self.order = itertools.count()
        self.changed = threading.Condition()
        self.stopped = False
        threading.Thread(target=self._run, daemon=True).start()

    def after(self, seconds: float, step: Any, args: tuple) -> Step:
        scheduled = Step(step, args)
        with self.changed:
            heapq.heappush(self.due, (time.monotonic() + seconds, next(self.order), scheduled))
            self.changed.notify()
        return scheduled

    def stop(self) -> None:
        with self.changed:
            self.stopped = True
            self.changed.notify()

    def _run(self) -> None:
        while True:
            with self.changed:
                while not self.stopped and (not self.due or self.due[0][0] > time.monotonic()):
                    self.changed.wait(self.due[0][0] - time.monotonic() if self.due else None)
                if self.stopped:
                    return
                _, _, step = heapq.heappop(self.due)
            if not step.cancelled:
                step.step(*step.args)


class InProcess(Connection):
    """One runtime: ``instant`` answers every call as it is sent (before any kill can
    land); otherwise a call claims its key, makes its effect ``WORK_S`` later and
    answers ``WORK_S`` after that. A kill loses every call in flight; a ``strands``
    runtime keeps their claims (a retry answers in_flight forever), the others drop them."""

    LISTING_S = 0.0

    def __init__(self, store: Store, *, instant: bool = False, strands: bool = False):
        self.store, self.instant, self.strands = store, instant, strands
        self.lock = threading.Lock()
        self.clock = Clock()
        self.in_flight: dict[Future, tuple[str, Step]] = {}
        self.statuses: list[int | None] = []

    def start(self, failpoints: Mapping[str, str] | None = None) -> Mapping[str, Any]:
        self.statuses.append(None)
        self.store.starts += 1
        if self.clock.stopped:  # by the kill before
            self.clock = Clock()
        return {}

    def submit(self, op: str, args: Mapping[str, Any] | None = None, *, args_json: str | None = None) -> Future:
        future: Future = Future()
        args = dict(args or {})
        with self.lock:
            if op == "list_tasks":
                self._list(future)
                return future
            key = args["client_submission_id"]
            if self._answered_at_once(key, future):
                return future
            if self.instant:
                self._effect(key, args)
                future.set_result(self._finish(key))
            else:
                self.store.claims.add(key)
                self._after(WORK_S, future, key, self._made, (key, args, future))
        return future

    def _list(self, future: Future) -> None:
        """Look at the tasks now and answer ``LISTING_S`` later, as a listing through a
        process does (under the lock)."""
        listed = Success(1, {"tasks": [dict(task) for task in self.store.tasks]})
        if self.LISTING_S:
            self._after(self.LISTING_S, future, "", lambda: self._deliver(future, listed), ())
        else:
            future.set_result(listed)

    def _deliver(self, future: Future, reply: Success) -> None:
        with self.lock:
            if self.in_flight.pop(future, None) is not None:
                future.set_result(reply)

    def _answered_at_once(self, key: str, future: Future) -> bool:
        """Answer a key in flight (in_flight) or already answered (reused) at once, under
        the lock; whether it was one of them."""
        if key in self.store.claims:
            future.set_result(Failure(1, "in_flight", "a request is outstanding for this key"))
        elif key in self.store.receipts:
            future.set_result(Success(1, {**self.store.receipts[key], "disposition": "reused", "action_taken": False}))
        else:
            return False
        return True

    def _after(self, seconds: float, future: Future, key: str, step: Any, args: tuple) -> None:
        """Run ``step`` ``seconds`` from now, unless a kill comes first (under the lock)."""
        self.in_flight[future] = (key, self.clock.after(seconds, step, args))

    def _made(self, key: str, args: dict[str, Any], future: Future) -> None:
        # The answer is timed from the effect, not from the call: under load the effect's
        # timer may run late, and an answer before its effect has no receipt to give.
        with self.lock:
            if future in self.in_flight:  # a kill that came first cancelled the effect
                self._effect(key, args)
                self._after(WORK_S, future, key, self._answer, (key, future))

    def _effect(self, key: str, args: dict[str, Any]) -> None:
        task_id = f"T-{len(self.store.tasks) + 1}"
        digest = request_digest(args["task"])
        self.store.tasks.append(
            {
                "task_id": task_id,
                "task_path": f"tasks/{task_id}.json",
                "client_submission_id": key,
                "request_digest": digest,
            }
        )
        self.store.receipts[key] = {
            "disposition": "created",
            "action_taken": True,
            "task_id": task_id,
            "task_path": f"tasks/{task_id}.json",
            "client_submission_id": key,
            "request_digest": digest,
            "digest_schema_version": DIGEST_SCHEMA_VERSION,
            "idempotent": True,
        }

    def _finish(self, key: str) -> Success:
        self.store.claims.discard(key)
        return Success(1, dict(self.store.receipts[key]))

    def _answer(self, key: str, future: Future) -> None:
        with self.lock:
            if self.in_flight.pop(future, None) is not None:
                future.set_result(self._finish(key))

    def kill(self) -> None:
        with self.lock:
            for future, (key, timer) in self.in_flight.items():
                timer.cancel()
                if not self.strands:
                    self.store.claims.discard(key)  # a retry replays the effect, or makes it
                future.set_result(Lost("killed"))
            self.in_flight.clear()
            self.statuses[-1] = -9
        self.clock.stop()

    def wait(self, pending: Future, timeout: float | None = None, *, allowed_s: float | None = None) -> Any:
        try:
            return pending.result(timeout)
        except FutureTimeout:
            return Lost("no response")

    def send_line(self, raw: bytes, timeout: float | None = None) -> Any:
        return Lost("no line framing")

    def stop(self) -> None:
        self.kill()

    @property
    def alive(self) -> bool:
        return bool(self.statuses) and self.statuses[-1] is None

    def stderr_text(self) -> str:
        return ""

    def exit_statuses(self) -> list[int | None]:
        return list(self.statuses)


class AnswersWithItsEffect(InProcess):
    """A conformant runtime with no effect -> answer window: the answer leaves with the
    effect, so no kill can land between them. Its calls finish ``STEP_S`` apart (each
    waits for the ones before), so a kill once half a batch is answered interrupts the
    rest however loaded the machine is (half ``WORK_S``: its twelve placements and the
    retries of the keys they killed are its whole run's time)."""

    STEP_S = WORK_S / 2

    def _after(self, seconds: float, future: Future, key: str, step: Any, args: tuple) -> None:
        super()._after(self.STEP_S * (1 + len(self.in_flight)), future, key, step, args)

    def _made(self, key: str, args: dict[str, Any], future: Future) -> None:
        with self.lock:
            if self.in_flight.pop(future, None) is not None:
                self._effect(key, args)
                future.set_result(self._finish(key))


class AnswersInBursts(InProcess):
    """A fast conformant runtime on a loaded machine (the Node harness beside four
    catalogue runs): the calls in flight make their effects and answer all at once,
    ``BURST_S`` after the first of them was sent, so no listing shows an effect
    unanswered and half a batch is never answered without the rest. A kill the listing
    or half the answers triggered came after every answer."""

    BURST_S = 0.02

    def __init__(self, store: Store):
        super().__init__(store)
        self.requests: dict[Future, dict[str, Any]] = {}
        self.burst: Step | None = None  # what every call in flight waits for

    def _after(self, seconds: float, future: Future, key: str, step: Any, args: tuple) -> None:
        if self.burst is None:
            burst: list[Step] = []  # filled under the lock, which the step takes before reading it
            self.burst = self.clock.after(self.BURST_S, self._answer_all, (burst,))
            burst.append(self.burst)
        self.requests[future] = args[1]
        self.in_flight[future] = (key, self.burst)

    def _answer_all(self, burst: list[Step]) -> None:
        with self.lock:
            if burst[0] is not self.burst:  # a kill came first (this timer was already running)
                return
            self.burst = None
            for pending, (key, _) in list(self.in_flight.items()):
                del self.in_flight[pending]
                self._effect(key, self.requests.pop(pending))
                pending.set_result(self._finish(key))

    def kill(self) -> None:
        with self.lock:
            self.burst = None
            self.requests.clear()
        super().kill()


class LockedAfterEffect(InProcess):
    """Prefect's shape (a SERIALIZABLE lock file from before the effect until after its
    record): one call at a time, its claim durable from its effect on, so a kill
    between a call's effect and its answer strands the key (a retry answers in_flight
    forever) and a kill before the effect strands nothing. Its listing answers
    ``LISTING_S`` after it looked, as a listing through a process does, so a kill the
    listing triggered may come after the listed call answered, with the next call not
    at its effect yet: that placement interrupted a call and probed nothing. (In this
    process the placement before effect -> answer rounds were checked caught it too, on
    20 of 20 seeds, through the other rounds; Prefect's figures are in CHANGELOG.md.)
    ``CLAIM_S`` is still longer than ``LISTING_S``, so the call after the listed one is
    not at its effect by that kill; every call of a batch waits for the ones before."""

    CLAIM_S = 0.04
    LISTING_S = 0.03
    WINDOW_S = 0.05

    def __init__(self, store: Store, strands: bool = True):
        super().__init__(store, strands=strands)
        self.queue: list[tuple[str, dict[str, Any], Future]] = []

    def submit(self, op: str, args: Mapping[str, Any] | None = None, *, args_json: str | None = None) -> Future:
        future: Future = Future()
        args = dict(args or {})
        with self.lock:
            if op == "list_tasks":
                self._list(future)
                return future
            key = args["client_submission_id"]
            if self._answered_at_once(key, future):
                return future
            self.queue.append((key, args, future))
            self.in_flight[future] = (key, Step(None, ()))  # lost to a kill while queued
            if len(self.queue) == 1:
                self._begin()
        return future

    def _begin(self) -> None:
        key, args, future = self.queue[0]
        self._after(self.CLAIM_S, future, key, self._locked_effect, (key, args, future))

    def _locked_effect(self, key: str, args: dict[str, Any], future: Future) -> None:
        with self.lock:
            if future in self.in_flight:
                self._effect(key, args)
                self.store.claims.add(key)
                self._after(self.WINDOW_S, future, key, self._answer_next, (key, future))

    def _answer_next(self, key: str, future: Future) -> None:
        with self.lock:
            if self.in_flight.pop(future, None) is not None:
                future.set_result(self._finish(key))
                self.queue.pop(0)
                if self.queue:
                    self._begin()

    def kill(self) -> None:
        with self.lock:
            self.queue.clear()
        super().kill()


class RecordsAfterEffect(InProcess):
    """DBOS's shape (a step's output is recorded after its function returned): a call
    makes its effect, records that it did ``RECORD_S`` later, and answers ``WORK_S``
    after that. A kill between the effect and the record loses the record, so the retry
    runs the call again and makes a second task; a kill after the record is harmless.
    The window is narrow beside the effect -> answer time and the listing's own
    ``LISTING_S``, and where the effects fall between two listings is drawn per start
    (a seeded offset), as a real runtime's timing varies: only a kill that follows the
    effect as closely as a listing can show it meets the window on every seed."""

    LISTING_S = 0.001
    RECORD_S = 0.01
    CLAIM_S = 0.08

    def __init__(self, store: Store):
        super().__init__(store)
        self.unrecorded: dict[str, dict[str, Any]] = {}  # lost to a kill: not durable
        self.claim_s = self.CLAIM_S + random.Random(len(store.tasks)).uniform(0, 0.03)

    def _after(self, seconds: float, future: Future, key: str, step: Any, args: tuple) -> None:
        super()._after(self.claim_s if step == self._made else seconds, future, key, step, args)

    def _made(self, key: str, args: dict[str, Any], future: Future) -> None:
        with self.lock:
            if future in self.in_flight:
                self._effect(key, args)
                self.unrecorded[key] = self.store.receipts.pop(key)
                self._after(self.RECORD_S, future, key, self._recorded, (key, future))

    def _recorded(self, key: str, future: Future) -> None:
        with self.lock:
            if future in self.in_flight:
                self.store.receipts[key] = self.unrecorded.pop(key)
                self._after(WORK_S, future, key, self._answer, (key, future))


class TakesRequestsInOrder(InProcess):
    """A conformant runtime that reads its requests one at a time, as a single-threaded
    server does: a call takes ``TAKE_S`` to read and makes its effect ``WORK_S`` after,
    a listing is answered as soon as it is read. So the first listing after a batch is
    read after the whole batch and shows effects made up to a batch's reading before,
    and the next ones are answered at once (the reference's and its MCP server's first
    listing after a batch took 20-300 ms at load 8-17, the next ones a few ms)."""

    TAKE_S = 0.01

    def __init__(self, store: Store):
        super().__init__(store)
        self.free_at = 0.0  # when the reader has read every request sent so far

    def start(self, failpoints: Mapping[str, str] | None = None) -> Mapping[str, Any]:
        self.free_at = 0.0  # a new process has read nothing
        return super().start(failpoints)

    def _list(self, future: Future) -> None:
        self._after(max(0.0, self.free_at - time.monotonic()), future, "", self._list_now, (future,))

    def _list_now(self, future: Future) -> None:
        with self.lock:
            if self.in_flight.pop(future, None) is not None:
                future.set_result(Success(1, {"tasks": [dict(task) for task in self.store.tasks]}))

    def _after(self, seconds: float, future: Future, key: str, step: Any, args: tuple) -> None:
        if step == self._made:  # a call: read after the requests before it
            now = time.monotonic()
            self.free_at = max(now, self.free_at) + self.TAKE_S
            seconds += self.free_at - now
        super()._after(seconds, future, key, step, args)


class ShowsEffectsLate:
    """A runtime whose listing, from its first restart on, answers ``SHOW_S`` late when
    it holds the effect of a call not answered yet, ``late_listings`` times (all when
    None), as a listing on a busy machine may: the kill that listing triggers comes
    ``SHOW_S`` after the effect at least. Its calls answer ``ANSWER_S`` after their
    effect, so that call is still unanswered at the kill even on a loaded machine (run
    with a call timeout of ``CALL_TIMEOUT_S``, so the calibration's calls answer)."""

    SHOW_S = 0.3
    ANSWER_S = 0.9
    CALL_TIMEOUT_S = 1.5
    late_listings: int | None = None

    # The InProcess hooks this mixes into: the listed tasks, the calls in flight and the answer step.
    store: Store
    lock: threading.Lock
    in_flight: dict[Future, tuple[str, Step]]
    _after: Any
    _answer: Any
    _deliver: Any

    def _list(self, future: Future) -> None:
        listed = Success(1, {"tasks": [dict(task) for task in self.store.tasks]})
        unanswered = {key for key, _ in self.in_flight.values()} & {
            task["client_submission_id"] for task in listed.result["tasks"]
        }
        if self.store.starts < 2 or not unanswered or self.late_listings == 0:
            future.set_result(listed)
            return
        if self.late_listings is not None:
            self.late_listings -= 1
        self._after(self.SHOW_S, future, "", lambda: self._deliver(future, listed), ())

    def _answer_later(self, key: str, future: Future) -> None:
        self._after(self.ANSWER_S, future, key, self._answer, (key, future))


class LateAWhile(ShowsEffectsLate, InProcess):
    """A conformant runtime whose first ``ATTEMPTS`` listings to show an unanswered
    effect after a restart are late: round two's first ``ATTEMPTS`` placements, as a
    stall of the machine spans several placements in a row."""

    late_listings = ATTEMPTS

    def _made(self, key: str, args: dict[str, Any], future: Future) -> None:
        with self.lock:
            if future in self.in_flight:
                self._effect(key, args)
                self._answer_later(key, future)


class LateOnceThenAnswersFirst(LateAWhile):
    """A conformant runtime whose first listing to show an unanswered effect after a
    restart is late (round two's first placement), and which then answers every call as
    it is sent for ``ATTEMPTS - 1`` starts, as a fast runtime on a loaded machine answers
    whole batches before a kill lands: the round's ``ATTEMPTS``-th placement misses for
    another reason than lateness, and none of them counted yet."""

    late_listings = 1

    def __init__(self, store: Store):
        super().__init__(store)
        self.quick_starts = ATTEMPTS - 1

    def start(self, failpoints: Mapping[str, str] | None = None) -> Mapping[str, Any]:
        self.instant = self.late_listings == 0 and self.quick_starts > 0
        self.quick_starts -= self.instant
        return super().start(failpoints)


class LateAlwaysRecordsAfterEffect(ShowsEffectsLate, RecordsAfterEffect):
    """The runtime recording its effect late, with every listing that shows an
    unanswered effect late: every effect -> answer kill comes after the record. It
    claims for half as long: its 24 late placements each wait out the claim, and a kill
    ``SHOW_S`` after the effect is late however soon the effect came."""

    CLAIM_S = RecordsAfterEffect.CLAIM_S / 2

    def _recorded(self, key: str, future: Future) -> None:
        with self.lock:
            if future in self.in_flight:
                self.store.receipts[key] = self.unrecorded.pop(key)
                self._answer_later(key, future)


def context(seed: int, runtime: type[InProcess] = InProcess, call_timeout: float = 0.5, **options: bool) -> Context:
    store = Store()
    return Context(
        entry("KILL-NEMESIS"), lambda: runtime(store, **options), Hello.read({}), seed, 8, call_timeout=call_timeout
    )


def run(seed: int, runtime: type[InProcess] = InProcess, call_timeout: float = 0.5, **options: bool) -> Context:
    ctx = context(seed, runtime, call_timeout, **options)
    kill_nemesis(ctx)
    return ctx


def placements(ctx: Context) -> list[list[dict[str, Any]]]:
    return [round_["attempts"] for round_ in ctx.evidence["schedule"]["rounds"]]


#: How many runs of one seed a test makes when its claim needs a kill placed soon after
#: an effect: a loaded machine (the whole suite, 7 workers on 2 CPUs, load 8-15) stalls
#: the kit's thread for tens of ms, several placements in a row, and a run whose kills
#: all came too late to judge is an error (or, for a window narrower than the kills'
#: precision, cannot show the defect). Such a run judged nothing, so the seed is run
#: again, as a user reruns an error; each run is still checked for what the kit
#: guarantees under any load.
RUNS = 3


def judged(seed: int, runtime: type[InProcess], call_timeout: float = 0.5, check: Any = None) -> Context:
    """The first of ``RUNS`` runs of ``seed`` that did not end in error; ``check(ctx)``
    (when given) is called on each run that did, for what its evidence must still show.
    ``RUNS`` errors fail with the last run's placements."""
    for _ in range(RUNS):
        ctx = context(seed, runtime, call_timeout)
        try:
            kill_nemesis(ctx)
        except Unjudgeable as exc:
            error = exc
            if check is not None:
                check(ctx)
            continue
        return ctx
    pytest.fail(f"{error} ({RUNS} runs)\nthe last run's placements: {placements(ctx)}")


def run_until_round_two_lands(runtime: type[LateAWhile]) -> list[dict[str, Any]]:
    """Round two's placements in a run where one of them landed, for the tests whose
    runtime must pass once one lands. A run that ended in error must have placed round
    two ``LATE_ATTEMPTS`` times (the claim of both tests: a round with a late kill is
    placed past ``ATTEMPTS``), else the test fails at once with its placements (their
    ``effect_age_ms_at_most`` against ``late_after_ms``)."""

    def placed_past_the_attempts(ctx: Context) -> None:
        attempts = placements(ctx)[1]
        assert "missed" not in attempts[-1] or len(attempts) == LATE_ATTEMPTS, attempts

    return placements(judged(1, runtime, runtime.CALL_TIMEOUT_S, placed_past_the_attempts))[1]


@pytest.mark.parametrize("seed", [1, 2])
def test_a_runtime_answering_before_any_kill_lands_is_not_judged(seed):
    """Every call answered before its kill: no round interrupted anything, however
    early each was placed again, and that is an error, never a pass. Two seeds: the
    runtime answers as it is sent, so no seed's draws change what a kill meets."""
    with pytest.raises(Unjudgeable, match=f"interrupted no call in {ATTEMPTS} placements"):
        run(seed, instant=True)


#: How a stranded key's failure reads: the whole bound (no recovery_s here, one call
#: timeout), timed from the key's first retry, and retries past the first.
STRANDED = r"did not answer with its effect within 0\.5s after the fault \([2-9]\d* attempts; last: in_flight"


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_a_runtime_stranding_a_key_claimed_mid_call_fails_on_every_seed(seed):
    with pytest.raises(ScenarioFailed, match=STRANDED):
        run(seed, strands=True)


@pytest.mark.parametrize("released", [False, True])
def test_an_in_flight_answer_read_past_the_bound_still_gets_its_retry(released):
    """``_settle`` reads a key's pipelined retry only once its whole batch has answered,
    maybe past the bound: an ``in_flight`` that came within it still gets one retry,
    made at once, and the failure names the whole bound. Judged by when it was read, as
    a first version of handing converge that retry was, the fixed claim service failed
    with "1 attempts; last: in_flight"."""
    ctx = context(1)
    ctx.start()
    key, task = ctx.submission_id(), ctx.task()
    runtime = ctx.conn
    assert isinstance(runtime, InProcess)
    runtime.store.claims.add(key)  # a claim left by a killed call, as a lease holds it
    sent = time.monotonic()
    first = ctx.write_task(key, task)
    bound = 0.2
    time.sleep(bound)  # the rest of its batch answering
    if released:
        runtime.store.claims.discard(key)  # the lease expired: the retry makes the effect
        assert converge(ctx, key, task, bound, first=(sent, first))["disposition"] == "created"
        assert ctx.evidence["retries_to_settle"] == {key: 2}
    else:
        with pytest.raises(ScenarioFailed, match=r"within 0\.2s after the fault \(2 attempts; last: in_flight"):
            converge(ctx, key, task, bound, first=(sent, first))


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_a_runtime_recovering_its_interrupted_calls_passes_and_every_round_interrupted_one(seed):
    """The control: the same slow runtime without the defect passes, and the evidence
    shows each round's kill interrupting calls (the round's last placement) and its
    resolution: the widest age at the kill among the effects its counted effect -> answer
    kills followed (not the narrowest: what every counted round met)."""
    ctx = run(seed)
    rounds = placements(ctx)
    assert ctx.evidence["resolution_ms"] == max(attempts[-1]["effect_age_ms_at_most"] for attempts in rounds[1::2])
    assert len(rounds) == ROUNDS
    for number, attempts in enumerate(rounds):
        assert attempts[-1]["interrupted"] >= 1, attempts
        # Each placement before the last says why it did not count.
        assert all(attempt["missed"] for attempt in attempts[:-1]) and "missed" not in attempts[-1], attempts
        if number % 2:  # effect -> answer: placed again until its kill came right after an effect
            assert attempts[-1]["interrupted_after_effect"] >= 1, attempts
            assert attempts[-1]["effect_age_ms_at_most"] <= attempts[-1]["late_after_ms"], attempts
        else:
            assert all(attempt["interrupted"] == 0 for attempt in attempts[:-1]), attempts
        last = attempts[-1]
        assert last["answered_before_kill"] + last["interrupted"] <= last["sent"]


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_a_runtime_stranding_a_key_killed_between_effect_and_answer_fails_on_every_seed(seed):
    """Only a kill between a call's effect and its answer finds the defect, and every
    seed lands one. A failure states its resolution too."""
    ctx = context(seed, LockedAfterEffect)
    with pytest.raises(ScenarioFailed, match=STRANDED):
        kill_nemesis(ctx)
    assert "resolution_ms" in ctx.evidence


def test_the_runtime_working_on_one_call_at_a_time_passes_without_its_defect():
    """The control for the runtime above: it answers the final retries, pipelined, one
    after another, the last of them ``KEYS`` calls' work (past one call timeout) after
    sending. Judged by one deadline for the whole batch, as before, the keys it had not
    reached failed on every seed, so the test above failed with or without the defect."""
    run(1, LockedAfterEffect, strands=False)


def test_a_runtime_without_an_effect_to_answer_window_is_still_judged():
    """No kill can land between an effect and its answer that do not exist apart: such a
    round is placed ``ATTEMPTS`` times, then counted by its last placement that
    interrupted a call, and the runtime passes, not an error; its resolution says that
    no counted kill was shown after an effect (null), so the pass vouches for no window."""
    ctx = run(1, AnswersWithItsEffect)
    assert ctx.evidence["resolution_ms"] is None, placements(ctx)
    rounds = placements(ctx)
    for attempts in rounds[1::2]:
        assert len(attempts) == ATTEMPTS, attempts
        assert not any(attempt["interrupted_after_effect"] for attempt in attempts), attempts
        assert any(attempt["interrupted"] for attempt in attempts), attempts


@pytest.mark.parametrize("seed", [1, 2])
def test_a_runtime_answering_a_whole_batch_at_once_is_judged(seed):
    """The effect -> answer rounds of a runtime that answers each batch at once: while
    no placement interrupted a call, the next also kills by the clock, ahead of the
    last batch's answers (half its first answer's time, halved again per placement
    before), and the round is judged; later placements are placed by the listing alone.
    Before, all six placements were triggered by half the answers, came after the last,
    and the scenario ended in error (the Node harness did so in 15 of 24 runs at load
    12-16). Its bursts come 20 ms after sending: under the suite's load (15) the kit's
    thread woke past them in all six placements of a round in 2 of 6 runs of this file,
    an error, so a seed is run again (``judged``); such a run must still have placed
    each unplaced round by the clock after its first placement."""

    def placed_by_the_clock(ctx: Context) -> None:
        for attempts in placements(ctx)[1::2]:
            assert any(placed["interrupted"] for placed in attempts) or all(
                "kill_by_ms" in placed for placed in attempts[1:]
            ), attempts

    for attempts in placements(judged(seed, AnswersInBursts, check=placed_by_the_clock))[1::2]:
        counted = [attempt for attempt in attempts if attempt["interrupted"]]
        assert counted, attempts
        assert all(attempt["killed_at"] == AHEAD_OF_ANSWERS for attempt in counted), attempts
        first = attempts.index(counted[0])
        assert first >= 1 and "kill_by_ms" not in attempts[0], attempts
        for number, attempt in enumerate(attempts[1 : first + 1], 1):
            expected = attempts[number - 1]["first_answer_ms"] / 2**number
            assert attempt["kill_by_ms"] == pytest.approx(expected, abs=0.1), attempts
        assert not any("kill_by_ms" in attempt for attempt in attempts[first + 1 :]), attempts


@pytest.mark.parametrize("seed", range(1, 11))
def test_a_runtime_recording_its_effect_late_makes_a_second_task_on_every_seed(seed):
    """The kill follows an effect within two listings' time: a runtime that records its
    effect 10 ms after making it is caught on every seed. With 20 ms between the
    listings, as before, a kill came up to about 22 ms after the effect and the verdict
    changed between runs: seed 3 passed in one run of seeds 1-10, none in another
    (with 50 ms, seed 8 passed).

    What the kit guarantees under any load: a counted kill within ``RECORD_S`` of the
    effect (its ``effect_age_ms_at_most``) finds the defect, so a run that passes had
    every counted effect -> answer kill come later than that. On a loaded machine every
    kill of a run may (the kit then counts kills within three of the run's own pace, and
    its pace is slow: kills 25-75 ms after the effect, in 2 of 40 runs at load 9); that
    run could not see a 10 ms window, nor can a run that ended in error, so the seed is
    run again, up to ``RUNS``, and must fail in one of them."""
    for _ in range(RUNS):
        ctx = context(seed, RecordsAfterEffect)
        try:
            kill_nemesis(ctx)
        except ScenarioFailed as failed:
            assert "a second task for one id" in str(failed)
            return
        except Unjudgeable:
            continue
        counted = [round_ for round_ in ctx.evidence["schedule"]["rounds"][1::2] if round_["interrupted_after_effect"]]
        assert all(round_["effect_age_ms_at_most"] > RecordsAfterEffect.RECORD_S * 1000 for round_ in counted), counted
    pytest.fail(f"seed {seed}: no second task in {RUNS} runs; the last run's placements: {placements(ctx)}")


def test_late_kills_are_placed_again_past_the_attempts_of_other_misses_and_say_so():
    """Round two's first ``ATTEMPTS`` kills came at least ``SHOW_S`` after the effect
    they followed (their listings were late), past three of the run's listing pace: each
    placement says so and the round is placed again, past ``ATTEMPTS``, where it lands;
    the runtime passes. With ``ATTEMPTS`` placements for a late round too, as before, it
    ended in error."""
    attempts = run_until_round_two_lands(LateAWhile)
    late, rest = attempts[:ATTEMPTS], attempts[ATTEMPTS:]
    for placed in late:
        assert placed["interrupted_after_effect"] >= 1, placed
        assert placed["effect_age_ms_at_most"] >= LateAWhile.SHOW_S * 1000 > placed["late_after_ms"], placed
        assert LATE in placed["missed"] and f"{placed['effect_age_ms_at_most']:g} ms" in placed["missed"], placed
    assert rest and rest[-1]["effect_age_ms_at_most"] <= rest[-1]["late_after_ms"], rest


def test_a_round_that_came_late_once_is_placed_past_the_attempts_whatever_its_later_misses():
    """Round two's first kill came late; its next ``ATTEMPTS - 1`` interrupted no call
    (the runtime answered each batch first). The round is still placed again, as long
    as a late one, and its next placement lands; the runtime passes. Placed again only
    while its last placement came late, as before, the round stopped at ``ATTEMPTS``
    placements, counted the late one and ended the scenario in error (the reference
    over MCP so, once in 9 runs at load 8-14)."""
    attempts = run_until_round_two_lands(LateOnceThenAnswersFirst)
    assert LATE in attempts[0]["missed"], attempts
    assert all(placed["interrupted"] == 0 for placed in attempts[1:ATTEMPTS]), attempts
    assert len(attempts) > ATTEMPTS and "missed" not in attempts[-1], attempts
    assert attempts[-1]["interrupted_after_effect"], attempts


@pytest.mark.parametrize("seed", [12, 17, 24])
def test_a_runtime_answering_the_listing_after_a_batch_once_it_has_read_the_batch_is_judged(seed):
    """The first listing after a batch waits behind the batch at a runtime that reads
    requests in order, the next ones do not: a kill whose effect's age spans that
    listing is judged against the run's first listings, not the next ones. Judged
    against the run's spans between listings, as before, such kills came late in every
    placement of a round and the scenario ended in error: on these seeds in every run,
    on seeds 1-10 in 10 of 20 runs at load 10-16 (the reference over MCP in 7 of 24 runs
    at load 10-13). Both rounds here draw six keys or more, so the first listing after
    their batch is read once effects were made."""
    rounds = placements(run(seed, TakesRequestsInOrder))
    counted = [attempts[-1] for attempts in rounds[1::2]]
    assert all("missed" not in placed and placed["interrupted_after_effect"] for placed in counted), rounds
    # Triggered by the first or second listing: the effect's age spans the first listing.
    assert all(placed["shown_by_listing"] <= 2 for placed in counted), rounds


def test_a_runtime_recording_its_effect_late_is_never_passed_when_every_kill_after_an_effect_is_late():
    """Every effect -> answer kill came after the runtime's record: no placement counts,
    each says why, each such round is placed ``LATE_ATTEMPTS`` times, and the scenario
    ends in error (or fails, if another kill found the defect), never a pass, and its
    resolution is none: a late kill landed nowhere the kit vouches for. Seed 2: judged by
    those late kills, the runtime passed."""
    ctx = context(2, LateAlwaysRecordsAfterEffect, LateAlwaysRecordsAfterEffect.CALL_TIMEOUT_S)
    with pytest.raises((Unjudgeable, ScenarioFailed)) as ended:
        kill_nemesis(ctx)
    if ended.type is Unjudgeable:
        assert "came too long after the effect it followed in every placement" in str(ended.value)
    assert ctx.evidence["resolution_ms"] is None, placements(ctx)
    for attempts in placements(ctx)[1::2]:
        late = [attempt for attempt in attempts if attempt["interrupted_after_effect"]]
        assert late and all(LATE in attempt["missed"] for attempt in late), attempts
        assert len(attempts) == LATE_ATTEMPTS, attempts


@pytest.mark.parametrize(
    "resolution, short, said",
    [
        (
            12.3,
            "resolution 12.3 ms",
            "Resolution: 12.3 ms. Each counted effect -&gt; answer kill came at most 12.3 ms after an effect",
        ),
        (None, "resolution none", "Resolution: none. No counted kill was shown to follow an effect"),
        ("12.3", None, None),  # a crafted report's value: not a figure, left to the evidence's facts
    ],
)
def test_report_md_and_html_say_the_resolution_under_the_status(resolution, short, said):
    """A reviewer reads what a result's kills could see beside its status, pass or not
    (report.html's summary line too: it folds a pass's evidence away)."""
    for status in ("passed", "failed"):
        result = ScenarioResult(entry("KILL-NEMESIS"), status, None, 0.1, "r", {"resolution_ms": resolution}, ())
        info = RunInfo("0.1.0", "4.0.0", "retryproof-harness/1", {"name": "n", "version": "1"}, "", (), (), 7, 8, "now")
        run = RunFinished(info, (result,), judge((result,)), 1.0)
        page, text = render_html(run), render_markdown(run)
        if said is None:
            assert "· resolution" not in page and "Resolution:" not in page and "Resolution:" not in text
            continue
        summary = page.split('<details id="s-KILL-NEMESIS"', 1)[1].split("</summary>", 1)[0]
        assert summary.endswith(f"</span> · {short}"), summary
        assert f"<p>{said}" in page, page
        shown = text.split(f"Status: **{status}**", 1)[1].split("\n\n")
        assert shown[1].startswith(said), shown[:3]
