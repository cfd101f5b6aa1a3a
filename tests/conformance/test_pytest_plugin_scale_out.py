"""The pytest plugin scaled out as ``retryproof run`` is: under pytest-xdist a scenario's
alone part has the machine to itself (``schedule.Turns``), and ``--retryproof-shard K/N`` writes
shard reports that ``retryproof merge`` joins, mixed with the CLI's, into the whole run.
"""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import subprocess
import sys
import threading
import time

import pytest
import sharded
from kit import REFERENCE, retryproof_here

from retryproof import spec
from retryproof.conformance.fuzz.profiles import DEV, ENV_VAR
from retryproof.conformance.records import Shard
from retryproof.conformance.runner import select
from retryproof.conformance.schedule import NoTurn, Turns

ALONE = ("A4-CONCURRENT", "A4-MULTIPROCESS")
#: Enough ordinary scenarios that both workers run some, around every run-alone one.
ORDINARY = ("WT-CREATE", "A2-RESPONSE-LOSS", "RESTART-REUSE", "CONFLICT-DIGEST", "LEGACY-NO-ID", "NORMALIZED-EQUAL")
#: The statuses of ALONE and ORDINARY against the reference without idempotency, in catalogue order.
FAULTY = [
    ("WT-CREATE", "passed"),
    ("A2-RESPONSE-LOSS", "failed"),
    ("A4-CONCURRENT", "failed"),
    ("A4-MULTIPROCESS", "failed"),
    ("RESTART-REUSE", "failed"),
    ("CONFLICT-DIGEST", "failed"),
    ("NORMALIZED-EQUAL", "failed"),
    ("LEGACY-NO-ID", "passed"),
]


def _queued(path: str) -> bool:
    """Whether a run-alone turn holds ``path`` (the queue lock file) exclusively."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def _until(condition, what: str, bound_s: float = 30.0) -> None:
    for _ in range(int(bound_s / 0.01)):
        if condition():
            return
        time.sleep(0.01)
    raise AssertionError(f"{what} did not happen within {bound_s} s")


def test_items_share_the_machine_and_an_alone_part_has_it_to_itself(tmp_path):
    """Each ``Turns`` stands for a worker (flock locks belong to open files, so two in
    one process contend as two workers do)."""
    one, two, impatient = Turns(str(tmp_path), wait_s=30), Turns(str(tmp_path), wait_s=0.05), Turns(str(tmp_path), 0.05)
    first, second = one.take(), two.take()  # items run side by side
    with pytest.raises(
        NoTurn, match="no turn: it runs alone, and other pytest-xdist workers' tests kept the machine for 0.05 s"
    ):
        with two.alone():  # the other item's share is in the way
            pass
    first.close()
    with two.alone():
        with pytest.raises(NoTurn, match="scenarios' alone parts kept the machine to themselves for 0.05 s"):
            impatient.take()
    impatient.take().close()  # the alone part is over: items start again
    second.close()


def test_a_waiting_alone_part_goes_first(tmp_path):
    """flock by itself would let each new shared holder in past a waiting exclusive one,
    and a busy worker pool would keep an alone part waiting for ever."""
    one, two, impatient = Turns(str(tmp_path), wait_s=30), Turns(str(tmp_path), wait_s=30), Turns(str(tmp_path), 0.05)
    running, asking = one.take(), two.take()
    entered: list[bool] = []

    def alone_part() -> None:
        with two.alone():
            entered.append(True)

    waiter = threading.Thread(target=alone_part, daemon=True)
    waiter.start()
    _until(lambda: _queued(two.queue), "the alone part queueing")
    with pytest.raises(NoTurn):
        impatient.take()  # only shares are held, yet a new item waits
    running.close()
    waiter.join(timeout=30)
    assert entered, "the alone part did not come once the machine was free"
    asking.close()


def test_a_worker_that_dies_holds_no_turn(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from retryproof.conformance.schedule import Turns;"
         f"turns = Turns({str(tmp_path)!r}); turns.take(); part = turns.alone(); part.__enter__();"
         "print('held', flush=True); time.sleep(120)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(NoTurn):
            Turns(str(tmp_path), wait_s=0.05).take()
    finally:
        holder.kill()
        holder.wait(timeout=30)
    Turns(str(tmp_path), wait_s=30).take().close()


def test_under_xdist_one_report_set_and_an_alone_part_overlaps_no_other_test(pytester):
    """``pytest -n 2`` against a runtime without idempotency, one session for two claims.
    The controller writes one report set from every worker: the scenarios spread over the
    two workers under the controller's random seed, and the verdict section and the reports
    are one run's, in catalogue order. And no other test runs, and no other harness
    starts, while an alone part runs, failing or not: pytest's own start and stop times of
    every test's call (logged by a plugin of the session's own), the span of every alone
    part with the test it ran in, and the time every harness process started, with the
    scenario whose scratch folder it was given. The wrapper is a shell (a Python one cost
    each of the run's 18 starts about 10 ms of CPU more), and the runtime it becomes starts
    without ``site``, as the kit starts the reference. The controller runs in this process (pytester's own): the claims are
    about its workers, processes either way, and the reports it writes."""
    calls, parts, starts = pytester.path / "calls.log", pytester.path / "parts.log", pytester.path / "starts.log"
    # A plugin, whose hooks see every test (a conftest's see only the tests below it),
    # that the workers import as the controller does, from the session's folder.
    pytester.makeconftest('pytest_plugins = ["timeline"]')
    pytester.makepyfile(
        timeline=f"""
        import contextlib, json, os, time
        from retryproof.conformance import schedule

        worker = None
        held = schedule.Turns.alone

        @contextlib.contextmanager
        def logged(turns):
            with held(turns):
                began = time.time()
                try:
                    yield
                finally:
                    with open({str(parts)!r}, "a") as log:
                        test = os.environ["PYTEST_CURRENT_TEST"].rsplit(" ", 1)[0]
                        log.write(json.dumps([test, began, time.time()]) + "\\n")

        def pytest_configure(config):
            # by workerinput, not by PYTEST_XDIST_WORKER: this session's controller inherits
            # that variable when the outer test session runs under xdist too
            global worker
            worker = getattr(config, "workerinput", {{}}).get("workerid")
            if worker:  # not in the controller, which is the outer test's own process
                schedule.Turns.alone = logged

        def pytest_runtest_logreport(report):
            if report.when == "call" and worker:  # on a worker, where the test ran
                with open({str(calls)!r}, "a") as log:
                    log.write(json.dumps([report.nodeid, report.start, report.stop, worker]) + "\\n")
        """,
        test_own="def test_own_one(): pass\ndef test_own_two(): pass\n",
    )
    wrapper = pytester.path / "wrapper.sh"
    # The state directory is state/ in the scenario's (or the probe's) scratch folder.
    wrapper.write_text(
        f"scratch=${{RETRYPROOF_STATE_DIR%/*}}\n"
        f'printf \'%s %s\\n\' "$EPOCHREALTIME" "${{scratch##*/}}" >> {shlex.quote(str(starts))}\n'
        f"exec {shlex.join([*REFERENCE, '--fault', 'no-idempotency'])}\n"
    )
    out = pytester.path / "reports"
    result = pytester.runpytest(
        "-n", "2", "-p", "no:cacheprovider", "--retryproof-harness", f"bash {wrapper}",
        "--retryproof-only", ",".join(ALONE + ORDINARY), "--retryproof-out", str(out), "-rf",
    )  # fmt: skip
    report = json.loads((out / "report.json").read_text())
    assert [(s["id"], s["status"]) for s in report["scenarios"]] == FAULTY, result.stdout.str()  # catalogue order
    result.assert_outcomes(passed=2 + 2, failed=6)  # the session's own two tests pass
    text = result.stdout.str()
    seed = int(text.split("retryproof: seed ")[1].split(",")[0])
    written = sorted(os.listdir(out))
    assert text.count("retryproof verdict") == 1 and text.count("wrote ") == len(written)
    result.stdout.fnmatch_lines(["*2 workers*", "*NOT CONFORMANT*", "  blocking A2-RESPONSE-LOSS: failed: *"])
    assert not list(spec.validator("report").iter_errors(report))
    assert report["seed"] == seed
    assert all(f"--seed {seed}" in s["reproduce"] for s in report["scenarios"] if s["status"] == "failed")
    assert {"junit.xml", "report.json", "report.md"} <= set(written)  # one set, by the controller
    logged = calls.read_text().splitlines()
    spans = {}
    for line in logged:
        nodeid, start, stop, worker = json.loads(line)
        spans[nodeid] = (start, stop, worker)
    assert len(spans) == len(logged) == len(ALONE + ORDINARY) + 2  # every call once, by the worker that ran it
    assert {worker for _, _, worker in spans.values()} == {"gw0", "gw1"}  # the run was spread
    harness_starts = [
        (float(when), folder) for when, folder in (line.split() for line in starts.read_text().splitlines())
    ]
    # each start named its scratch folder (the check below would pass on empty names)
    assert len(harness_starts) > len(ALONE + ORDINARY), harness_starts
    assert all(folder.startswith("retryproof-") for _, folder in harness_starts), harness_starts
    alone_parts = [json.loads(line) for line in parts.read_text().splitlines()]
    assert sorted(test for test, _, _ in alone_parts) == sorted(f"retryproof::{scenario}" for scenario in ALONE)
    for test, start, stop in alone_parts:
        own_start, own_stop, _ = spans[test]
        assert own_start <= start <= stop <= own_stop  # the part is its test's
        for other, (other_start, other_stop, _) in spans.items():
            if other != test:
                assert other_stop <= start or other_start >= stop, f"{other} ran beside the alone part of {test}"
        during = {folder for when, folder in harness_starts if start <= when <= stop}
        scenario = test.removeprefix("retryproof::")
        others = [f"retryproof-{other.lower()}-" for other in ALONE + ORDINARY if other != scenario]
        assert not [folder for folder in during if folder.startswith(("retryproof-probe-", *others))], during


def test_an_alone_part_that_gets_no_turn_is_an_error_not_a_gap(pytester):
    """A worker's test that holds the machine past the wait: the scenario's races are
    not run beside it, and the report says so as an ``error`` (the wait is cut to half
    a second here; it is an hour by default). The controller runs in this process; the
    holder, a conftest (a worker's sys.path is this interpreter's, without the session's
    folder, so ``-p holder`` would not import there), acts only in the worker."""
    seen = pytester.path / "seen"
    pytester.makeconftest(
        f"""
        import fcntl, os, threading, time
        import pytest
        from retryproof.conformance.pytest_plugin import STATE
        from retryproof.conformance.schedule import Turns

        def queued(path):
            fd = os.open(path, os.O_RDWR | os.O_CREAT)
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                return False
            except BlockingIOError:
                return True
            finally:
                os.close(fd)

        def hold(turn, turns):
            # until the run-alone scenario has queued and given up (bounded), then let go
            with open({str(seen)!r}, "a") as log:
                for wanted in (True, False):
                    for _ in range(3000):
                        if queued(turns.queue) is wanted:
                            log.write(f"queued={{wanted}} ")
                            break
                        time.sleep(0.01)
            turn.close()

        @pytest.hookimpl(trylast=True)
        def pytest_configure(config):
            if not hasattr(config, "workerinput"):
                return  # the controller runs no test
            config.stash[STATE].turns.wait_s = 0.5
            turns = Turns(config.workerinput["retryproof_turns"])
            threading.Thread(target=hold, args=(turns.take(), turns), daemon=True).start()
        """
    )
    out = pytester.path / "reports"
    result = pytester.runpytest(
        "-n", "1", "-p", "no:cacheprovider", "--retryproof", "--retryproof-only", "A4-CONCURRENT",
        "--retryproof-out", str(out), "-rf",
    )  # fmt: skip
    assert seen.read_text().split() == ["queued=True", "queued=False"]
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["A4-CONCURRENT error (the kit could not judge): no turn: it runs alone, *"])
    [scenario] = json.loads((out / "report.json").read_text())["scenarios"]
    assert scenario["status"] == "error"
    assert scenario["reason"] == (
        "no turn: it runs alone, and other pytest-xdist workers' tests kept the machine for 0.5 s"
    )
    assert "write_task" not in [call["op"] for call in scenario["calls"]]  # no race ran beside the holder


def _report(path) -> dict:
    return json.loads((path / "report.json").read_text())


def test_plugin_shards_merge_into_the_whole_run_also_mixed_with_cli_shards(pytester, shard_runs, tmp_path, monkeypatch):
    """Shard 1/2 from the plugin under xdist, 2/2 from the plugin in one process and from
    ``retryproof run``: both merges give the scenarios, statuses and verdict of the whole
    ``retryproof run``, FUZZ-MODEL included (each shard on its half of the budget). The
    whole run and the CLI's shard are ``shard_runs``, which test_shard_merge reads too.
    One xdist worker is enough here: the controller writes the shard's reports from what
    its workers send either way, and two workers sharing one report set is the test
    above's. Both sessions run in this process (pytester's own), the xdist one's worker
    in a process of its own: a claim about what a shard writes, not about its process."""
    monkeypatch.setenv(ENV_VAR, DEV)
    common = (
        "--retryproof-harness",
        sharded.HARNESS,
        "--retryproof-only",
        sharded.ONLY,
        "--retryproof-seed",
        str(sharded.SEED),
        "-p",
        "no:cacheprovider",
    )
    plugin = {
        "one": pytester.runpytest("-n", "1", *common, "--retryproof-shard", "1/2", "--retryproof-out", "one"),
        "two": pytester.runpytest(*common, "--retryproof-shard", "2/2", "--retryproof-out", "two"),
    }
    for name, result in plugin.items():
        assert result.ret == 1, result.stdout.str()  # the faulty runtime fails in both halves
        result.stdout.fnmatch_lines(
            [f"*retryproof: seed 9, shard {'1' if name == 'one' else '2'}/2, target --harness*"]
        )
    one, two = _report(pytester.path / "one"), _report(pytester.path / "two")
    assert (one["shard"], two["shard"]) == ({"index": 1, "count": 2}, {"index": 2, "count": 2})
    for report, index in ((one, 1), (two, 2)):  # what run --shard K/2 holds
        assert [s["id"] for s in report["scenarios"]] == [
            e.id for e in select(sharded.ONLY.split(","), (), Shard(index, 2))
        ]
    fuzz = next(s for s in one["scenarios"] if s["id"] == "FUZZ-MODEL")
    assert "--shard 1/2" in fuzz["reproduce"] and fuzz["evidence"]["fuzz"]["shard"] == "1/2"

    whole = _report(shard_runs / "whole")
    for name, paths in {
        "plugin": (pytester.path / "one", pytester.path / "two"),
        "mixed": (pytester.path / "one", shard_runs / "two"),
    }.items():
        done = retryproof_here("merge", *(str(path / "report.json") for path in paths), "--out", str(tmp_path / name))
        assert done.returncode == 1, done.stdout + done.stderr  # the whole run's exit code
        merged = _report(tmp_path / name)
        assert [(s["id"], s["status"]) for s in merged["scenarios"]] == [
            (s["id"], s["status"]) for s in whole["scenarios"]
        ]
        for key in ("conformant", "complete", "headline", "exit_code"):
            assert merged["verdict"][key] == whole["verdict"][key], (name, key)
        assert [b["id"] for b in merged["verdict"]["blocking"]] == [b["id"] for b in whole["verdict"]["blocking"]]
        assert merged["verdict"]["blocking"], "the faulty runtime must not pass"
