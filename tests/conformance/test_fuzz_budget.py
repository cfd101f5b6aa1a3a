"""FUZZ-MODEL's budget buys histories, not starts: each history ends the runtime's
process at most ``ENDS_PER_HISTORY`` times, the same seed explores the same histories
step for step, and a failure is shrunk without Hypothesis's own re-run of it."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from kit import REFERENCE

from retryproof.adapters.process import ProcessConnection
from retryproof.conformance.fuzz import machine, model, run_fuzz
from retryproof.conformance.fuzz.machine import ENDS_PER_HISTORY
from retryproof.conformance.fuzz.profiles import DEV

FAULTY = [*REFERENCE, "--fault", "recovery-new-number"]


def explore(monkeypatch, tmp_path, command: list[str], seed: int, examples: int) -> tuple[Any, dict, Counter]:
    """One exploration on a fresh state directory: its outcome, the steps each history
    ran (by namespace) and how often the runtime was started."""
    histories: dict[str, list[dict[str, Any]]] = {}
    starts: Counter = Counter()
    apply, start = machine.Driver.apply, ProcessConnection.start

    def recorded_apply(driver, step):
        histories.setdefault(driver.namespace, []).append(dict(step))
        return apply(driver, step)

    def counted_start(connection, failpoints=None):
        starts["armed" if failpoints else "clean"] += 1
        return start(connection, failpoints)

    monkeypatch.setattr(machine.Driver, "apply", recorded_apply)
    monkeypatch.setattr(ProcessConnection, "start", counted_start)
    state = tmp_path / f"state-{seed}-{len(list(tmp_path.iterdir()))}"
    state.mkdir()
    connection = ProcessConnection(command, str(state), call_timeout=10, start_timeout=20)
    try:
        outcome = run_fuzz(connection, seed=seed, profile=DEV, max_examples=examples)
    finally:
        connection.kill()
    monkeypatch.undo()
    return outcome, histories, starts


def ends(steps: list[dict[str, Any]]) -> int:
    return sum(step["step"] in ("crash", "kill", "restart") for step in steps)


def within_the_restart_budget(outcome: Any, histories: dict, starts: Counter) -> None:
    """Each history runs once (``test_a_history_drawn_again_runs_once``) and ends the
    runtime's process at most ``ENDS_PER_HISTORY`` times; every start is the first one, or
    one a step caused: a crash step two (armed, then clean), a restart one, which is the
    armed start of a crash right after it; nothing else starts the runtime."""
    assert not outcome.failed and len(histories) >= 6
    explored = [json.dumps(steps) for name, steps in histories.items() if name.startswith("h")]
    assert len(set(explored)) == len(explored) <= outcome.examples - outcome.repeated
    assert all(ends(steps) <= ENDS_PER_HISTORY for steps in histories.values())
    taken = [step["step"] for steps in histories.values() for step in steps]
    merged = sum(
        (first["step"], then["step"]) == ("restart", "crash")
        for steps in histories.values()
        for first, then in zip(steps, steps[1:], strict=False)
    )
    assert starts["armed"] == taken.count("crash")
    assert starts["clean"] == 1 + taken.count("crash") + taken.count("restart") - merged


def test_the_same_seed_explores_the_same_histories_within_the_restart_budget(monkeypatch, tmp_path):
    """Seed 7, whose histories restart more than seed 1's, so the budget's check has
    more to count: a test of its own explored seed 7 once beside seed 1's two."""
    first, histories, starts = explore(monkeypatch, tmp_path, REFERENCE, 7, examples=6)
    again, histories_again, _ = explore(monkeypatch, tmp_path, REFERENCE, 7, examples=6)
    within_the_restart_budget(first, histories, starts)
    assert not again.failed and histories == histories_again and first.repeated == again.repeated


def test_a_failure_is_shrunk_from_its_failing_step_and_not_run_again_by_hypothesis(monkeypatch, tmp_path):
    outcome, histories, _ = explore(monkeypatch, tmp_path, FAULTY, seed=0, examples=10)
    assert outcome.failed and not outcome.flaky
    assert [step["step"] for step in outcome.steps] == ["crash"]
    explored = [name for name in histories if name.startswith("h")]
    replays = [name for name in histories if name.startswith("s")]
    # The failing history's last step alone reproduced it: one replay, and Hypothesis's
    # re-run of the failing history ran no step.
    assert replays == ["s1"] and histories["s1"] == outcome.steps
    assert len(explored) == outcome.examples - outcome.repeated
    assert histories[explored[-1]][-1] == outcome.steps[0]
    again, histories_again, _ = explore(monkeypatch, tmp_path, FAULTY, seed=0, examples=10)
    assert again.steps == outcome.steps and histories_again.keys() == histories.keys()


def _recorded_starts(monkeypatch) -> list[Any]:
    """The failpoints of every harness start from now on (None: a clean start)."""
    started: list[Any] = []
    start = ProcessConnection.start

    def recorded_start(connection, failpoints=None):
        started.append(dict(failpoints) if failpoints else None)
        return start(connection, failpoints)

    monkeypatch.setattr(ProcessConnection, "start", recorded_start)
    return started


@pytest.mark.parametrize(
    ("steps", "starts_seen", "checks"),
    [
        # The restart's start is the crash's armed one; its check runs on that process.
        (["submit", "restart", "crash"], [{"write_task.after_task_write": "crash"}, None], 3),
        # A restart that ends the history starts the runtime and is checked at its end.
        (["submit", "restart"], [None], 2),
        # Before any other step, it starts clean, as it always did.
        (["restart", "submit"], [None], 2),
    ],
)
def test_a_restart_starts_the_runtime_with_the_next_step(monkeypatch, tmp_path, steps, starts_seen, checks):
    language = {
        "submit": {"step": "submit", "id": "fz-a", "task": 0},
        "restart": {"step": "restart", "graceful": False},
        "crash": {"step": "crash", "failpoint": "write_task.after_task_write", "id": "fz-b", "task": 1},
    }
    checked = Counter()
    check = machine.Driver.check

    def counted_check(driver):
        checked[driver.namespace] += 1
        return check(driver)

    connection = ProcessConnection(REFERENCE, str(tmp_path), call_timeout=10, start_timeout=20)
    connection.start()
    started = _recorded_starts(monkeypatch)
    monkeypatch.setattr(machine.Driver, "check", counted_check)
    try:
        violation, log = model.run_steps(connection, [language[step] for step in steps], namespace="one")
    finally:
        connection.kill()
    assert violation is None, violation
    assert started == starts_seen and checked["one"] == checks
    assert sum(line.startswith("restart") for line in log) == 1


class _Applied:
    """A driver that records the steps it is given and runs nothing."""

    def __init__(self) -> None:
        self.applied: list[str] = []
        self.finished = 0

    def apply(self, step: dict[str, Any]) -> None:
        self.applied.append(step["step"])

    def finish(self) -> None:
        self.finished += 1


def test_a_history_drawn_again_runs_once():
    """Hypothesis draws some histories again (its first examples are often ten legacy
    calls each): a history that repeats one already run, whole or in part, runs nothing;
    one that repeats the beginning of one and then goes its own way runs every step, in
    order."""
    ran: set[str] = set()

    def history(*steps: str) -> tuple[machine._FuzzMachine, _Applied]:
        driver = _Applied()
        explorer = machine._FuzzMachine(driver, ran)  # type: ignore[arg-type]
        for step in steps:
            explorer._do(step=step)
        explorer.teardown()
        return explorer, driver

    assert history("legacy", "legacy", "restart")[1].applied == ["legacy", "legacy", "restart"]
    assert history("legacy", "legacy", "restart")[1].applied == []
    assert history("legacy", "legacy")[1].applied == []
    assert history("legacy", "restart")[1].applied == ["legacy", "restart"]
    _, driver = history("legacy", "legacy", "restart", "legacy")
    assert driver.applied == ["legacy", "legacy", "restart", "legacy"] and driver.finished == 1


def test_a_restart_whose_check_fails_on_the_armed_start_leaves_the_harness_clean(monkeypatch, tmp_path):
    steps = [
        {"step": "submit", "id": "fz-a", "task": 0},
        {"step": "restart", "graceful": True},
        {"step": "crash", "failpoint": "write_task.after_task_write", "id": "fz-b", "task": 1},
    ]
    checks = Counter()
    check = machine.Driver.check

    def failing_second_check(driver):
        checks["n"] += 1
        if checks["n"] == 2:  # the restart's, on the start armed for the crash
            raise model.ModelViolation("a task went missing at the restart")
        return check(driver)

    connection = ProcessConnection(REFERENCE, str(tmp_path), call_timeout=10, start_timeout=20)
    connection.start()
    started = _recorded_starts(monkeypatch)
    monkeypatch.setattr(machine.Driver, "check", failing_second_check)
    try:
        violation, log = model.run_steps(connection, steps, namespace="one")
        assert violation is not None and violation.questions == ("Q1",)
        assert started == [{"write_task.after_task_write": "crash"}, None]  # then restarted clean
        assert log == ["submit one.fz-a (same): created " + log[0].split()[-1], "restart (graceful)"]
    finally:
        connection.kill()
