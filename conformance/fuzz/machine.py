"""FUZZ-MODEL's explorer: a Hypothesis state machine that chooses steps.

Each rule draws one step of ``retryproof.conformance.fuzz.model`` and hands it to the driver,
which runs it against the harness and checks every invariant. Hypothesis does the
rest: it explores histories of submissions, variants, conflicts, legacy calls,
bursts, crashes at declared failpoints, SIGKILLs at seeded moments and restarts,
and shrinks a failing history to a minimal one. The steps of that minimal run are
what a replay file holds.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from hypothesis import Phase
from hypothesis import seed as fixed_seed
from hypothesis import settings as Settings
from hypothesis import strategies as st
from hypothesis.reporting import with_reporter
from hypothesis.stateful import (
    RuleBasedStateMachine,
    get_state_machine_test,
    precondition,
    rule,
)

from retryproof.adapters.connection import Connection
from retryproof.conformance import replay_file
from retryproof.conformance.fuzz.model import (
    EQUAL_VARIANTS,
    SUBMISSION_IDS,
    TASKS,
    Driver,
    HarnessSilent,
    ModelViolation,
    run_probe,
    run_steps,
)
from retryproof.conformance.fuzz.profiles import choose_profile, without_local_constants
from retryproof.conformance.options import CALL_TIMEOUT_S, CONCURRENCY
from retryproof.conformance.outcome import HistoryEvent

_ids = st.sampled_from(SUBMISSION_IDS)
_task_indexes = st.integers(0, len(TASKS) - 1)
# Mostly single calls; a burst of 2..8 is the concurrency probe.
_bursts = st.sampled_from((1, 1, 2, 8))
# A SIGKILL lands somewhere in a creation's few milliseconds of fsyncs.
_kill_delays_ms = st.integers(0, 25)
#: The steps that end the runtime's process (and start it again) in one history. A
#: start costs what the runtime's imports cost (over a binding, an SDK: a large part
#: of a second), a call a few milliseconds, so the budget is spent on histories, each
#: with restarts in it, not on back-to-back starts of one history. Two, not one, though
#: one would save starts (the reference at seed 1: 12 instead of 20 of a run's ~97):
#: a user runs FUZZ-MODEL to find a recovery defect no scenario was written for, and
#: with one end a history can no longer crash, recover and crash again at points and on
#: ids it chose (the scenarios do so only where they were written to). At the dev budget
#: two ends found recovery-new-number at each of seeds 0-7, one end at 5 of them.
ENDS_PER_HISTORY = 2
_ENDS = ("crash", "kill", "restart")


@dataclass
class FuzzOutcome:
    seed: int
    profile: str
    examples: int = 0
    #: Examples whose history repeated one already run (or a part of one): not run again.
    repeated: int = 0
    seconds: float = 0.0
    #: Seconds from the start until the first violation was seen (before shrinking).
    seconds_to_first_failure: float | None = None
    #: The concurrency probe: the rounds it ran (up to one that broke an invariant), and
    #: the ``ids`` and ``burst`` of each round's race.
    probe: dict[str, int] = field(default_factory=dict)
    violation: str | None = None
    #: The checklist questions the minimal history's violation answers no.
    questions: tuple[str, ...] = ()
    #: The violation did not reappear when its history was replayed (timing).
    flaky: bool = False
    steps: list[dict[str, Any]] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    #: The minimal history's calls and faults as its last replay ran them, timed from
    #: ``history_began`` (``time.perf_counter``); empty when it did not fail again.
    history: tuple[HistoryEvent, ...] = ()
    history_began: float = 0.0
    hypothesis_report: list[str] = field(default_factory=list)  # what Hypothesis printed

    @property
    def failed(self) -> bool:
        return self.violation is not None

    def replay_document(self, implementation: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The replay file: enough to re-run the minimal history against any harness."""
        return {
            "format": replay_file.FORMAT,
            "scenario": "FUZZ-MODEL",
            "seed": self.seed,
            "profile": self.profile,
            "implementation": dict(implementation or {}),
            "violation": self.violation,
            "steps": self.steps,
        }


def run_fuzz(
    connection: Connection,
    seed: int,
    profile: str | None = None,
    call_timeout: float = CALL_TIMEOUT_S,
    max_examples: int | None = None,
    shrink_budget_s: float = 30.0,
    probe_width: int = CONCURRENCY,
) -> FuzzOutcome:
    """Explore histories against the harness behind ``connection`` (started, or
    started here). Every example is a history in its own namespace on that one
    harness, so examples do not see each other's tasks.

    First, whatever the seed, the concurrency probe (``run_probe``) races bursts of
    ``probe_width`` on fresh ids: a race it catches is the outcome (its own one-step
    minimal history) and nothing is explored, since exploring would only look for it
    again by luck.

    Hypothesis generates; the first failing history is then shrunk here, by deleting
    steps while the violation persists (``shrink``), within ``shrink_budget_s``.
    Hypothesis's own shrinker would replay hundreds of variants, each restarting
    real processes; deleting whole steps reaches a minimal history in a few replays.
    Raises ``HarnessSilent`` when a call the model needs got no answer: exploring on
    would judge nothing.
    """
    outcome = FuzzOutcome(seed=seed, profile=choose_profile(profile))
    started = time.monotonic()
    rounds, steps, violation, log = run_probe(connection, probe_width, call_timeout)
    outcome.probe = {"rounds": rounds, "ids": steps[0]["ids"], "burst": steps[0]["burst"]}
    if violation is not None:
        outcome.seconds_to_first_failure = time.monotonic() - started
        return _failed(outcome, steps, violation, log, started)
    first_failure: dict[str, Any] = {}
    silent: list[HarnessSilent] = []
    previous: list[Driver] = []  # the last history's driver: the next one starts from its listing
    ran: set[str] = set()  # every history run so far, and each of its beginnings (``_FuzzMachine._key``)

    class Machine(_FuzzMachine):
        def __init__(self) -> None:
            # Hypothesis runs a failing history once more before it raises; ``shrink``
            # replays it anyway, so that run only goes through the motions (``_do``).
            self.replaying = bool(first_failure)
            outcome.examples += not self.replaying
            try:
                driver = Driver(
                    connection,
                    f"h{outcome.examples}" + "r" * self.replaying,
                    call_timeout,
                    after=previous.pop() if previous else None,
                )
            except HarnessSilent as error:
                self._silent(error)
                raise
            previous.append(driver)
            super().__init__(driver, ran)

        def _failed(self, violation: ModelViolation) -> None:
            if not first_failure:
                outcome.seconds_to_first_failure = time.monotonic() - started
                first_failure.update(steps=list(self.steps), violation=violation, log=list(self.driver.log))

        def _silent(self, error: HarnessSilent) -> None:
            silent.append(error)

        def _repeated(self) -> None:
            outcome.repeated += 1

    overrides: dict[str, Any] = {"phases": (Phase.explicit, Phase.reuse, Phase.generate), "report_multiple_bugs": False}
    if max_examples is not None:
        overrides["max_examples"] = max_examples
    test = fixed_seed(seed)(
        get_state_machine_test(Machine, settings=Settings(Settings.get_profile(outcome.profile), **overrides))
    )
    try:
        with without_local_constants(), with_reporter(lambda text: outcome.hypothesis_report.append(str(text))):
            test()
    except Exception:
        # Hypothesis re-runs a failing example, so what it raises last may differ
        # from what was seen first (Flaky); the first silence or violation decides.
        if silent:
            raise silent[0] from None
        if not first_failure:
            raise
    if first_failure:
        steps, violation, log, outcome.flaky = shrink(
            connection,
            first_failure["steps"],
            first_failure["violation"],
            first_failure["log"],
            call_timeout,
            shrink_budget_s,
        )
        return _failed(outcome, steps, violation, log, started)
    outcome.seconds = time.monotonic() - started
    return outcome


def _failed(
    outcome: FuzzOutcome, steps: list[dict[str, Any]], violation: ModelViolation, log: list[str], started: float
) -> FuzzOutcome:
    """``outcome`` with the minimal history that broke an invariant."""
    outcome.steps, outcome.log = steps, log
    outcome.violation, outcome.questions = str(violation), violation.questions
    outcome.history, outcome.history_began = violation.history, violation.began
    outcome.seconds = time.monotonic() - started
    return outcome


def shrink(
    connection: Connection,
    steps: list[dict[str, Any]],
    violation: ModelViolation,
    log: list[str],
    call_timeout: float,
    budget_s: float,
) -> tuple[list[dict[str, Any]], ModelViolation, list[str], bool]:
    """The failing step alone, if it breaks an invariant by itself; else delete steps,
    last first, while the history still breaks one.

    Returns ``(steps, violation, log, flaky)``; ``flaky`` when even the unshrunk
    history did not fail again (the failure depended on timing, like a SIGKILL
    landing in a window a few milliseconds wide): then the history and ``log`` are
    those of the run that failed, unshrunk, so the report still shows what happened.
    """
    deadline = time.monotonic() + budget_s
    replays = 0

    def fails(candidate: list[dict[str, Any]]) -> tuple[ModelViolation, list[str]] | None:
        nonlocal replays
        replays += 1
        found, log = run_steps(connection, candidate, namespace=f"s{replays}", call_timeout=call_timeout)
        return (found, log) if found else None

    # The step that broke the invariant is often the whole story (one crash at one
    # failpoint): one replay of it alone settles that, where deleting the steps before
    # it one by one would replay, and restart the runtime for, each shorter prefix.
    if len(steps) > 1:
        alone = fails(steps[-1:])
        if alone is not None:
            return steps[-1:], alone[0], alone[1], False
    confirmed = fails(steps)
    if confirmed is None:
        return steps, violation, log, True
    index = len(steps) - 1
    while index >= 0 and time.monotonic() < deadline:
        candidate = steps[:index] + steps[index + 1 :]
        result = fails(candidate) if candidate else None
        if result is not None:
            steps, confirmed = candidate, result
        index -= 1
    return steps, confirmed[0], confirmed[1], False


class _FuzzMachine(RuleBasedStateMachine):
    #: Whether this is Hypothesis's re-run of a history already seen to fail: its steps
    #: are recorded, not run.
    replaying = False

    def __init__(self, driver: Driver, ran: set[str] | None = None):
        super().__init__()
        self.driver = driver
        self.steps: list[dict[str, Any]] = []
        #: The histories run before this one, and their beginnings (``_key``).
        self.ran = set() if ran is None else ran
        #: How many of ``steps`` ran: the rest, while they repeat the beginning of a
        #: history already run, wait (``_do``).
        self.applied = 0

    def _failed(self, violation: ModelViolation) -> None:
        """Called when a step breaks an invariant."""

    def _silent(self, error: HarnessSilent) -> None:
        """Called when a step got no answer it could be judged by."""

    def _repeated(self) -> None:
        """Called when a whole history repeated (the beginning of) one already run."""

    def _ends_left(self) -> bool:
        return sum(step["step"] in _ENDS for step in self.steps) < ENDS_PER_HISTORY

    def _used(self) -> set[str]:
        """The ids this history's steps sent a call for (where ``Driver`` adds them to
        ``model.attempted``), read from the steps alone: a history whose steps wait
        (``_do``) draws as one whose steps ran, and so does Hypothesis's re-run."""
        return {step["id"] for step in self.steps if step["step"] in ("submit", "crash", "kill")}

    @staticmethod
    def _key(steps: list[dict[str, Any]]) -> str:
        return json.dumps(steps, sort_keys=True)

    def _do(self, **step: Any) -> None:
        """Take a step. Hypothesis draws some histories more than once (its first
        examples are often the same: ten legacy calls); the steps run once each. While
        the history so far repeats the beginning of one already run, its steps wait;
        once it goes its own way, they run, in order, before the new step. A history
        that repeats one whole (or part of one) runs nothing: on a fresh namespace of
        the same runtime, it would make the same calls to the same checks."""
        self.steps.append(step)
        if self.replaying or self._key(self.steps) in self.ran:
            return
        while self.applied < len(self.steps):
            waiting = self.steps[self.applied]
            self.applied += 1
            self._judged(partial(self.driver.apply, waiting))

    def teardown(self) -> None:
        if self.replaying:
            return
        if self.steps and self.applied == 0:
            self._repeated()
        for end in range(1, len(self.steps) + 1):
            self.ran.add(self._key(self.steps[:end]))
        self._judged(self.driver.finish)

    def _judged(self, run: Callable[[], None]) -> None:
        """``run``, telling ``_failed`` or ``_silent`` what it raised."""
        try:
            run()
        except ModelViolation as violation:
            self._failed(violation)
            raise
        except HarnessSilent as error:
            self._silent(error)
            raise

    @rule(id=_ids, task=_task_indexes, variant_kind=st.sampled_from(EQUAL_VARIANTS), burst=_bursts)
    def submit(self, id: str, task: int, variant_kind: str, burst: int) -> None:
        # A kind the runtime does not treat as the same request (a tool that does not
        # claim write-task-v1 compares its own bytes) is sent as the same task; the
        # draw stays as it is, so a harness's histories are the same for a seed.
        sent = variant_kind if variant_kind in self.driver.equal_variants else "same"
        self._do(step="submit", id=id, task=task, variant_kind=sent, burst=burst)

    # Preconditions and draws depend only on the steps taken, never on what the
    # runtime answered: a SIGKILL's timing varies, and Hypothesis needs the same
    # choices to mean the same history.
    @precondition(lambda self: bool(self._used()))
    @rule(data=st.data())
    def conflict(self, data: st.DataObject) -> None:
        used = [i for i in SUBMISSION_IDS if i in self._used()]
        self._do(step="conflict", id=data.draw(st.sampled_from(used), label="id"))

    @precondition(lambda self: "legacy" in self.driver.hello.capabilities)
    @rule()
    def legacy(self) -> None:
        self._do(step="legacy")

    @precondition(lambda self: bool(self.driver.crash_failpoints) and self._ends_left())
    @rule(data=st.data(), task=_task_indexes)
    def crash(self, data: st.DataObject, task: int) -> None:
        failpoint = data.draw(st.sampled_from(self.driver.crash_failpoints), label="failpoint")
        # A write_task failpoint lies on the path of a first creation; on an id already
        # committed it is never reached, so fresh ids come first while any are left.
        fresh = [i for i in SUBMISSION_IDS if i not in self._used()]
        self._do(
            step="crash",
            failpoint=failpoint,
            id=data.draw(st.sampled_from(fresh or SUBMISSION_IDS), label="id"),
            task=task,
        )

    # A SIGKILL at a random moment lands in a window by timing, so the history it
    # makes replays only by luck; runtimes that declare crash failpoints are crashed
    # at exactly those points instead, and random kills are for runtimes without them.
    @precondition(lambda self: not self.driver.crash_failpoints and self._ends_left())
    @rule(id=_ids, task=_task_indexes, delay_ms=_kill_delays_ms)
    def kill(self, id: str, task: int, delay_ms: int) -> None:
        self._do(step="kill", id=id, task=task, delay_ms=delay_ms)

    @precondition(lambda self: self._ends_left())
    @rule(graceful=st.booleans())
    def restart(self, graceful: bool) -> None:
        self._do(step="restart", graceful=graceful)
