"""The selftest makes a runtime's handshake when the first of its scenarios starts
(``selftest.run_all``), on the scenarios' threads: once per runtime, however many of
its scenarios start together, and a runtime whose handshake fails costs only itself."""

from __future__ import annotations

import threading
from collections import Counter

from retryproof.conformance import runner
from retryproof.conformance.commands.selftest import Runtime, judge, run_all
from retryproof.conformance.scenarios import registry


def test_each_runtime_shakes_hands_once_and_a_failed_handshake_costs_only_its_runtime(monkeypatch):
    shaken: Counter[str] = Counter()
    lock = threading.Lock()
    original = runner.handshake

    def counted(options):
        with lock:
            shaken[options.command[-1]] += 1
        return original(options)

    monkeypatch.setattr(runner, "handshake", counted)
    runtimes = [
        # Two killers, started on two jobs at once: one handshake between them.
        Runtime("digest-ignored", "conflicts go unnoticed", ("CONFLICT-DIGEST", "INVALID-INPUT")),
        Runtime("no-such-variant", "the harness exits at its start", ("CONFLICT-DIGEST", "NORMALIZED-EQUAL")),
    ]
    outcomes = run_all(runtimes, seed=0, jobs=2)

    assert shaken == {"digest-ignored": 1, "no-such-variant": 1}
    assert outcomes["digest-ignored"]["results"]["CONFLICT-DIGEST"]["status"] == "failed"
    assert outcomes["digest-ignored"]["results"]["INVALID-INPUT"]["status"] == "passed"
    broken = outcomes["no-such-variant"]
    assert broken["results"] == {} and "failed its handshake" in broken["error"]
    assert judge(runtimes[1], broken) == [f"no-such-variant: the kit could not run it: {broken['error']}"]


def test_the_marks_come_from_the_scenarios_not_from_a_runtime():
    """The selftest orders the scenarios of runtimes whose handshakes have not
    happened yet by ``runner.Marks``, which ``Run`` itself schedules by."""
    ids = {item.id: item for item in runner.select((), ())}
    marks = runner.Marks(registry(), through_binding=False)
    assert marks.alone(ids["A4-CONCURRENT"]) and not marks.alone(ids["WT-CREATE"])
    assert marks.long(ids["FUZZ-MODEL"]) > marks.long(ids["STALE-RESERVATION-DIAGNOSTICS"]) > 0
    assert marks.shared(ids["WT-CREATE"]) and not marks.shared(ids["A2-RESPONSE-LOSS"])  # takes_server: bindings only
    assert runner.Marks(registry(), through_binding=True).shared(ids["A2-RESPONSE-LOSS"])
    assert not runner.Marks(registry(), through_binding=False, share=False).shared(ids["WT-CREATE"])


def test_a_killer_without_a_result_counts_as_survived():
    """A faulty runtime is judged on every declared killer: one its run has no result
    for (a run ended before it) killed nothing, and says so."""
    runtime = Runtime("digest-ignored", "conflicts go unnoticed", ("CONFLICT-DIGEST", "INVALID-INPUT"))
    killed = {"status": "failed", "reason": "a conflict answered created", "reproduce": ""}
    outcome = {"error": None, "results": {"CONFLICT-DIGEST": killed}}
    assert judge(runtime, outcome) == [
        "digest-ignored survived INVALID-INPUT (not run), the scenario aimed at its defect"
    ]
    outcome["results"]["INVALID-INPUT"] = {**killed, "status": "passed"}
    assert judge(runtime, outcome) == [
        "digest-ignored survived INVALID-INPUT (passed), the scenario aimed at its defect"
    ]
    outcome["results"]["INVALID-INPUT"] = killed
    assert judge(runtime, outcome) == []


def test_the_hello_validator_is_built_while_the_harness_starts(monkeypatch):
    """``runner.handshake`` builds the hello's validator on another thread while the
    harness starts, not after its hello: the harness's start here returns only once the
    validator was built, which a handshake building it afterwards never lets happen
    (its start then gives up waiting, and the test says so)."""
    from retryproof.adapters.process import ProcessConnection
    from retryproof.conformance.options import REFERENCE_COMMAND, Options

    built = threading.Event()
    where: list[bool] = []
    original_prepare, original_start = runner.prepare, ProcessConnection.start

    def prepare(op):
        where.append(threading.current_thread() is threading.main_thread())
        original_prepare(op)
        built.set()

    def start(self, *args, **kwargs):
        hello = original_start(self, *args, **kwargs)
        assert built.wait(30), "the validator was not built while the harness started"
        return hello

    monkeypatch.setattr(runner, "prepare", prepare)
    monkeypatch.setattr(ProcessConnection, "start", start)
    hello, kept = runner.handshake(Options(command=REFERENCE_COMMAND, target="", seed=0))
    assert kept is not None
    kept.end()
    assert where == [False] and hello.implementation["name"] == "reference"
