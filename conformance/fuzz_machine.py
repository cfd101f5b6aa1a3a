"""FUZZ-MODEL's explorer: a Hypothesis state machine that chooses steps.

Each rule draws one step of ``conformance.fuzz_model`` and hands it to the driver,
which runs it against the harness and checks every invariant. Hypothesis does the
rest: it explores histories of submissions, variants, conflicts, legacy calls,
bursts, crashes at declared failpoints, SIGKILLs at seeded moments and restarts,
and shrinks a failing history to a minimal one. The steps of that minimal run are
what a replay file holds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from hypothesis import seed as fixed_seed
from hypothesis import settings as Settings
from hypothesis import strategies as st
from hypothesis.errors import FlakyFailure
from hypothesis.reporting import with_reporter
from hypothesis.stateful import RuleBasedStateMachine, get_state_machine_test, precondition, rule

from adapters.connection import Connection
from conformance.fuzz_model import EQUAL_VARIANTS, REPLAY_FORMAT, SUBMISSION_IDS, TASKS, Driver, ModelViolation
from conformance.fuzz_profiles import choose_profile

_ids = st.sampled_from(SUBMISSION_IDS)
_task_indexes = st.integers(0, len(TASKS) - 1)
# Mostly single calls; a burst of 2..8 is the concurrency probe.
_bursts = st.sampled_from((1, 1, 2, 8))
# A SIGKILL lands somewhere in a creation's few milliseconds of fsyncs.
_kill_delays_ms = st.integers(0, 25)


@dataclass
class FuzzOutcome:
    seed: int
    profile: str
    examples: int = 0
    seconds: float = 0.0
    #: Seconds from the start until the first violation was seen (before shrinking).
    seconds_to_first_failure: float | None = None
    violation: str | None = None
    flaky: bool = False
    steps: list[dict[str, Any]] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    hypothesis_report: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return self.violation is not None

    def replay_document(self, implementation: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The replay file: enough to re-run the minimal history against any harness."""
        return {
            "format": REPLAY_FORMAT,
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
    call_timeout: float = 10.0,
    max_examples: int | None = None,
) -> FuzzOutcome:
    """Explore histories against the harness behind ``connection`` (started, or
    started here). Every example is a history in its own namespace on that one
    harness, so examples do not see each other's tasks."""
    outcome = FuzzOutcome(seed=seed, profile=choose_profile(profile))
    started = time.monotonic()
    history: dict[str, Any] = {}

    class Machine(_FuzzMachine):
        def __init__(self) -> None:
            outcome.examples += 1
            super().__init__(Driver(connection, f"h{outcome.examples}", call_timeout))
            history["steps"], history["log"] = self.steps, self.driver.log

        def _failed(self) -> None:
            if outcome.seconds_to_first_failure is None:
                outcome.seconds_to_first_failure = time.monotonic() - started

    base = Settings.get_profile(outcome.profile)
    # One bug at a time: the replay file holds one minimal history.
    overrides: dict[str, Any] = {"report_multiple_bugs": False}
    if max_examples is not None:
        overrides["max_examples"] = max_examples
    test = fixed_seed(seed)(get_state_machine_test(Machine, settings=Settings(base, **overrides)))
    try:
        with with_reporter(outcome.hypothesis_report.append):
            test()
    except (ModelViolation, FlakyFailure) as exc:
        violation = exc if isinstance(exc, ModelViolation) else _first_violation(exc)
        if violation is None:
            raise
        outcome.violation = str(violation)
        outcome.flaky = isinstance(exc, FlakyFailure)
        outcome.steps, outcome.log = list(history.get("steps", [])), list(history.get("log", []))
    outcome.seconds = time.monotonic() - started
    return outcome


def _first_violation(group: BaseExceptionGroup) -> ModelViolation | None:
    for exc in group.exceptions:
        if isinstance(exc, ModelViolation):
            return exc
        if isinstance(exc, BaseExceptionGroup) and (found := _first_violation(exc)):
            return found
    return None


class _FuzzMachine(RuleBasedStateMachine):
    def __init__(self, driver: Driver):
        super().__init__()
        self.driver = driver
        self.steps: list[dict[str, Any]] = []

    def _failed(self) -> None:
        """Called when a step breaks an invariant (before Hypothesis shrinks)."""

    def _do(self, **step: Any) -> None:
        self.steps.append(step)
        try:
            self.driver.apply(step)
        except ModelViolation:
            self._failed()
            raise

    @rule(id=_ids, task=_task_indexes, variant_kind=st.sampled_from(EQUAL_VARIANTS), burst=_bursts)
    def submit(self, id: str, task: int, variant_kind: str, burst: int) -> None:
        self._do(step="submit", id=id, task=task, variant_kind=variant_kind, burst=burst)

    @precondition(lambda self: bool(self.driver.model.ok_task_ids))
    @rule(data=st.data())
    def conflict(self, data: st.DataObject) -> None:
        self._do(step="conflict", id=data.draw(st.sampled_from(sorted(self.driver.model.ok_task_ids)), label="id"))

    @precondition(lambda self: "legacy" in self.driver.capabilities)
    @rule()
    def legacy(self) -> None:
        self._do(step="legacy")

    @precondition(lambda self: bool(self.driver.crash_failpoints))
    @rule(data=st.data(), id=_ids, task=_task_indexes)
    def crash(self, data: st.DataObject, id: str, task: int) -> None:
        failpoint = data.draw(st.sampled_from(self.driver.crash_failpoints), label="failpoint")
        self._do(step="crash", failpoint=failpoint, id=id, task=task)

    @rule(id=_ids, task=_task_indexes, delay_ms=_kill_delays_ms)
    def kill(self, id: str, task: int, delay_ms: int) -> None:
        self._do(step="kill", id=id, task=task, delay_ms=delay_ms)

    @rule(graceful=st.booleans())
    def restart(self, graceful: bool) -> None:
        self._do(step="restart", graceful=graceful)
