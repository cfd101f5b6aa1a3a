"""``--jobs N``: results in catalogue order whatever order they finish in, a scenario's
alone part never overlapping other work, and a run whose lines, statuses and verdict do
not depend on the number of jobs."""

from __future__ import annotations

import json
import random
import re
import shlex
import threading
import time

import pytest
from kit import REFERENCE, retryproof_here

from retryproof.conformance.catalogue import entry
from retryproof.conformance.context import Unjudgeable
from retryproof.conformance.options import REFERENCE_COMMAND, Options
from retryproof.conformance.runner import probe, run_one
from retryproof.conformance.scenarios import Scenario, registry
from retryproof.conformance.schedule import Overlap, StartOrder, Turn, in_order
from retryproof.spec.protocol import Hello


def test_results_come_back_in_the_given_order_however_they_finish():
    delays = [random.Random(7).uniform(0, 0.05) for _ in range(12)]
    delays.reverse()  # the first items finish last

    def compute(index: int, turn: Turn) -> int:
        time.sleep(delays[index])
        return index * 10

    assert list(in_order(list(range(12)), compute, jobs=4)) == [(index, index * 10) for index in range(12)]


def _overlaps(one: tuple[float, float], other: tuple[float, float]) -> bool:
    return one[0] < other[1] and other[0] < one[1]


def test_an_alone_part_overlaps_no_other_work_and_the_work_around_it_does():
    """Each item's shared work (all of an ordinary item, the work around an alone part)
    and each alone part are logged as spans: no alone part overlaps any other item's
    span of either kind, while the work around it runs beside short items. The alone
    items run one at a time, and the long one starts after them."""
    shared: dict[str, list[tuple[float, float]]] = {}
    alone_parts: dict[str, tuple[float, float]] = {}
    started: dict[str, float] = {}
    lock = threading.Lock()
    items = ["a", "b", "ALONE-1", "c", "LONG", "d", "ALONE-2", "e", "ALONE-3"]

    def work(item: str) -> None:
        began = time.monotonic()
        time.sleep(0.03)
        with lock:
            shared.setdefault(item, []).append((began, time.monotonic()))

    def compute(item: str, turn: Turn) -> str:
        with lock:
            started[item] = time.monotonic()
        work(item)
        if item.startswith("ALONE"):
            with turn.alone():
                began = time.monotonic()
                time.sleep(0.03)
                alone_parts[item] = (began, time.monotonic())
            work(item)
        return item

    results = list(
        in_order(items, compute, jobs=3, alone=lambda item: item.startswith("ALONE"), long=lambda item: item == "LONG")
    )
    assert [item for item, _ in results] == items
    assert set(alone_parts) == {"ALONE-1", "ALONE-2", "ALONE-3"}
    for item, part in alone_parts.items():
        others = [span for other, spans in shared.items() if other != item for span in spans]
        others += [span for other, span in alone_parts.items() if other != item]
        assert not [span for span in others if _overlaps(part, span)], f"{item}'s alone part had company"
    alone_spans = {f"ALONE-{n}": (started[f"ALONE-{n}"], shared[f"ALONE-{n}"][-1][1]) for n in (1, 2, 3)}
    short_spans = [span for item in "abcde" for span in shared[item]]
    for item, span in alone_spans.items():
        assert not [other for other, o in alone_spans.items() if other != item and _overlaps(span, o)]
    # The work before an alone part shares the machine.
    assert any(_overlaps(shared[item][0], short) for item in alone_spans for short in short_spans)
    assert started["LONG"] >= max(end for _, end in alone_spans.values())


def test_the_start_order_runs_alone_items_one_at_a_time_beside_short_ones_only():
    """Alone items first, one at a time; while one runs, short items only, and a worker
    with nothing short left waits; then the long ones before the short ones."""
    items = ["a", "ALONE-1", "LONG-1", "b", "ALONE-2", "LONG-2", "c"]
    order = StartOrder(items, alone=lambda item: item.startswith("ALONE"), long=lambda item: item.startswith("LONG"))

    def take() -> str:
        index = order.take()
        assert index is not None
        return items[index]

    assert [take(), take()] == ["ALONE-1", "a"]  # not ALONE-2 beside ALONE-1
    order.done(items.index("ALONE-1"))
    assert [take(), take(), take()] == ["ALONE-2", "b", "c"]
    got: list[str] = []
    waiter = threading.Thread(target=lambda: got.append(take()), daemon=True)
    waiter.start()
    time.sleep(0.05)
    assert got == []  # only long ones are left, and an alone one runs: the worker waits
    order.done(items.index("ALONE-2"))
    waiter.join(timeout=30)
    assert got == ["LONG-1"] and take() == "LONG-2"
    order.close()
    assert order.take() is None


@pytest.mark.parametrize("jobs", [1, 3])
def test_shared_items_take_their_turns_by_rank_whatever_the_jobs(jobs):
    """The shared items start in the order of their turns, ranked by ``turn`` then in
    the given order (``TAKE`` ranks after ``SHARE``), the same with one job as with
    three, one at a time; the results still come back in the given order. One job
    keeps the others in their places: only the shared ones move among their own."""
    items = ["a", "SHARE-1", "TAKE-1", "TAKE-2", "b", "SHARE-2", "c", "SHARE-3"]
    started: list[str] = []
    running: list[str] = []
    lock = threading.Lock()

    def compute(item: str, turn: Turn) -> str:
        with lock:
            started.append(item)
            running.append(item)
            assert sum(other[0].isupper() for other in running) <= 1, running  # one shared item at a time
        time.sleep(0.01)
        with lock:
            running.remove(item)
        return item.lower()

    results = list(
        in_order(
            items,
            compute,
            jobs=jobs,
            shared=lambda item: item.startswith(("SHARE", "TAKE")),
            turn=lambda item: int(item.startswith("TAKE")),
        )
    )
    assert results == [(item, item.lower()) for item in items]
    turns = [item for item in started if item[0].isupper()]
    assert turns == ["SHARE-1", "SHARE-2", "SHARE-3", "TAKE-1", "TAKE-2"]
    if jobs == 1:
        assert started == ["a", "SHARE-1", "SHARE-2", "SHARE-3", "b", "TAKE-1", "c", "TAKE-2"]


def test_an_exception_in_one_item_reaches_the_consumer_in_its_turn():

    def compute(index: int, turn: Turn) -> int:
        if index == 2:
            raise ValueError("item 2")
        return index

    results = in_order(list(range(5)), compute, jobs=2)
    assert [next(results), next(results)] == [(0, 0), (1, 1)]
    with pytest.raises(ValueError, match="item 2"):
        next(results)


def test_a_waiting_alone_part_goes_first_and_two_never_wait_for_each_other():
    """While alone parts wait for the machine, no item starts (on a busy pool they
    would wait for ever otherwise); two items asking for their alone parts at once
    both get them, one after the other, and only then does the latecomer start."""
    overlap = Overlap()
    events: list[str] = []
    both_running = threading.Barrier(2, timeout=30)

    def asker(name: str) -> None:
        with overlap.share() as turn:
            both_running.wait()  # while one waits to be alone, no item starts: the other would not
            with turn.alone():
                events.append(f"{name} alone")
                time.sleep(0.02)

    def latecomer() -> None:
        with overlap.share():
            events.append("latecomer")

    with overlap.share():  # an ordinary item runs: both alone parts wait for it
        askers = [threading.Thread(target=asker, args=(name,), daemon=True) for name in ("x", "y")]
        for thread in askers:
            thread.start()
        for _ in range(3000):  # bounded: 30 s
            if overlap._waiting_alone == 2:  # both let go of their shares and wait
                break
            time.sleep(0.01)
        else:
            raise AssertionError("the two alone parts were not both waiting within 30 s")
        late = threading.Thread(target=latecomer, daemon=True)
        late.start()
        time.sleep(0.05)
        assert events == []
    for thread in (*askers, late):
        thread.join(timeout=30)
        assert not thread.is_alive()
    assert sorted(events[:2]) == ["x alone", "y alone"] and events[2:] == ["latecomer"]


def test_the_a4_races_are_declared_alone_and_the_restarting_scenarios_long():
    bound = registry()
    alone = {scenario_id for scenario_id, item in bound.items() if item.alone}
    assert alone == {"A4-CONCURRENT", "A4-MULTIPROCESS"}
    long = {scenario_id for scenario_id, item in bound.items() if item.long}
    assert {"FUZZ-MODEL", "KILL-NEMESIS", "RECOVERY-UNKNOWN-EFFECT"} <= long
    assert not long & alone


class _StopAtAlonePart:
    """A turn that ends the scenario where its alone part would begin."""

    asked = 0

    def alone(self):
        self.asked += 1
        raise Unjudgeable("stopped where the alone part begins")


@pytest.mark.parametrize("scenario_id", ["A4-CONCURRENT", "A4-MULTIPROCESS"])
def test_an_a4_race_is_all_inside_the_alone_part_and_its_setup_outside(scenario_id):
    """Stopped where its alone part begins, the scenario has listed the tasks before
    the races (its setup, harness starts included, shares the machine) and sent no
    write_task: every race is in the part."""
    options = Options(command=REFERENCE_COMMAND, target="", seed=3)
    turn = _StopAtAlonePart()
    result = run_one(entry(scenario_id), registry()[scenario_id], options, probe(options), turn=turn)
    assert (result.status, result.reason, turn.asked) == ("error", "stopped where the alone part begins", 1)
    ops = [call["op"] for call in result.calls]
    assert "write_task" not in ops and "list_tasks" in ops


def test_only_a_scenario_declared_alone_may_ask_to_be_alone():
    options = Options(command=REFERENCE_COMMAND, target="", seed=3)

    def asks_alone(ctx):  # not registered: @scenario would bind a second WT-CREATE
        with ctx.alone():
            pass

    result = run_one(
        entry("WT-CREATE"),
        Scenario(entry("WT-CREATE"), asks_alone),
        options,
        Hello.read({"capabilities": ["write_task"]}),
    )
    assert result.status == "error"
    assert "WT-CREATE asks to run alone but its @scenario does not say alone=True" in (result.reason or "")


def _run(tmp_path, jobs: int) -> tuple[list[str], dict]:
    out = tmp_path / f"jobs-{jobs}"
    done = retryproof_here(  # in this process: what it prints and reports is the same
        "run",
        *("--harness", shlex.join([*REFERENCE, "--fault", "no-idempotency"])),
        *("--only", "WT-CREATE,A2-RESPONSE-LOSS,A4-CONCURRENT,RESTART-REUSE,CONFLICT-DIGEST,LEGACY-NO-ID"),
        *("--seed", "5", "--jobs", str(jobs), "--out", str(out)),
    )
    assert done.returncode == 1, done.stdout + done.stderr  # the faulty runtime fails
    # Durations are the one thing allowed to differ.
    lines = [re.sub(r"\d+\.\d+s", "<s>", line) for line in done.stdout.splitlines() if not line.startswith("wrote ")]
    return lines, json.loads((out / "report.json").read_text())


@pytest.mark.parametrize("jobs", [3])
def test_a_parallel_run_prints_and_reports_what_a_serial_run_does(tmp_path, jobs):
    serial_lines, serial = _run(tmp_path, 1)
    parallel_lines, parallel = _run(tmp_path, jobs)
    assert parallel_lines == serial_lines
    assert [(s["id"], s["status"], s["reason"]) for s in parallel["scenarios"]] == [
        (s["id"], s["status"], s["reason"]) for s in serial["scenarios"]
    ]
    assert parallel["verdict"] == serial["verdict"]
    assert {s["id"]: s["status"] for s in serial["scenarios"]}["A2-RESPONSE-LOSS"] == "failed"


def test_jobs_must_be_a_positive_integer():
    done = retryproof_here("run", "--jobs", "0")
    assert done.returncode == 2
    assert "error: argument --jobs: 0 must be at least 1" in done.stderr and "Traceback" not in done.stderr


def test_jobs_default_to_one_more_than_the_usable_cpus():
    """A scenario waits on its harness much of its time, so one more job than CPUs keeps
    them busy: ``run`` and ``selftest`` both default to it."""
    from retryproof.conformance.cli import build_parser
    from retryproof.conformance.options import available_cpus

    for command in ("run", "selftest"):
        assert build_parser(command).parse_args([command]).jobs == available_cpus() + 1
