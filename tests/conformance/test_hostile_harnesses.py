"""The kit judges broken harnesses ``error`` or ``failed``, never ``passed``, in
bounded time (the timeouts below bound every wait)."""

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time

import pytest
from kit import STDLIB_PYTHON, UNUSED_PLUGINS, by_id, certify

from retryproof.conformance.fuzz.profiles import DEV, ENV_VAR
from retryproof.conformance.scenarios.retries import A4_IDS_PER_ROUND

FAKE = os.path.join(os.path.dirname(__file__), "fake_harness.py")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCENARIOS = "WT-CREATE,A2-RESPONSE-LOSS"


def run_kit(tmp_path, mode, *extra, start_timeout="2"):
    """In this process (kit.certify), a hanging harness too: the kit's own timeouts bound
    its waits, and should they not, the test's phase limit does (tests/phase_limit.py)."""
    harness = f"{STDLIB_PYTHON} {FAKE} {mode}"
    timeouts = ("--call-timeout", "1", "--start-timeout", start_timeout)
    done, report = certify(
        tmp_path, harness, "--only", SCENARIOS, *timeouts, *extra, seed=7, formats="md,json,junit", in_process=True
    )
    return done, by_id(report)


def test_honest_fake_passes_the_basics(tmp_path):
    """The control: the fakes' shared runtime is sound, so each defect below is the cause."""
    done, scenarios = run_kit(tmp_path, "honest")
    assert {s["status"] for s in scenarios.values()} == {"passed"}, done.stdout
    assert done.returncode == 0


#: A hang waits out its whole start timeout; a crash must have time to say why before it.
@pytest.mark.parametrize("mode, start_timeout", [("hang", "0.5"), ("crash-at-start", "2")])
def test_a_harness_that_never_shakes_hands_cannot_be_run(tmp_path, mode, start_timeout):
    done, scenarios = run_kit(tmp_path, mode, start_timeout=start_timeout)
    assert done.returncode == 2
    assert done.stderr.startswith("error: the harness failed its handshake")
    assert "Traceback" not in done.stderr
    assert not scenarios
    if mode == "crash-at-start":
        assert "cannot open the database" in done.stderr  # its stderr is the hint


@pytest.mark.parametrize(
    "mode, status, evidence",
    [
        ("garbage", "error", "unreadable line"),
        ("wrong-ids", "error", "not a call in flight"),
        ("hang-on-write", "error", "no response within 1s"),
        ("liar", "failed", "lost"),
        ("double-create", "failed", "a second task for one id"),
    ],
)
def test_a_misbehaving_harness_is_never_passed(tmp_path, mode, status, evidence):
    done, scenarios = run_kit(tmp_path, mode)
    assert done.returncode == 1, done.stdout + done.stderr
    judged = scenarios["A2-RESPONSE-LOSS"]
    assert judged["status"] == status
    assert evidence in judged["reason"]
    assert "passed" not in {s["status"] for s in scenarios.values()} or mode == "double-create"
    # every option that changes the scenario's behaviour is in the reproduce line
    assert judged["reproduce"].startswith(
        "retryproof run --only A2-RESPONSE-LOSS --seed 7 --call-timeout 1 --start-timeout 2 --harness "
    )
    assert "Traceback" not in done.stderr


def test_a_hung_harness_costs_one_timeout_per_pipelined_batch(tmp_path):
    """Eight pipelined calls to a harness that never answers: one deadline covers the
    batch (it used to be one full timeout per call, 8 s here)."""
    harness = f"{STDLIB_PYTHON} {FAKE} hang-on-write"
    _, report = certify(tmp_path, harness, "--only", "A4-CONCURRENT", "--call-timeout", "1", seed=7, in_process=True)
    judged = by_id(report)["A4-CONCURRENT"]
    assert judged["status"] == "error" and "8 calls got no answer" in judged["reason"]
    assert "one deadline for the whole batch" in judged["reason"]


@pytest.mark.parametrize(
    "mode, why",
    [
        ("honest", None),  # the control: the same runtime with the contract's line handling
        ("lenient-lines", "list_tasks"),  # PROTOCOL-R6: no args or an extra key is bad_message
        ("answers-blank-lines", "a whitespace-only line must be ignored"),  # PROTOCOL-R7
        ("trims-lines", 'line "\\u000b{\\"id\\": 0'),  # PROTOCOL-R7: a vertical tab is not JSON whitespace
    ],
)
def test_invalid_input_judges_how_lines_that_are_not_requests_are_answered(tmp_path, mode, why):
    done, scenarios = run_kit(tmp_path, mode, "--only", "INVALID-INPUT")
    judged = scenarios["INVALID-INPUT"]
    assert judged["status"] == ("passed" if why is None else "failed"), done.stdout
    assert why is None or why in judged["reason"], judged["reason"]


BROKEN = os.path.join(os.path.dirname(__file__), "broken_runtimes.py")


def test_a_harness_that_goes_silent_costs_a_few_deadlines_not_one_per_call(tmp_path):
    """A harness that never answers write_task (it used to hold a run for 1,009 s at
    default timeouts): a connection that missed a deadline gets nothing more, and
    after a few scenarios lost that way the rest are not started. Every scenario is
    accounted for, as error with its reason; none passed. Which scenarios are not run
    follows catalogue order, as with one job, whichever finished first. The claim is
    about how many deadlines are waited, not how long: half a second each (the harness
    answers every other call within milliseconds)."""
    harness = f"{sys.executable} -S {BROKEN} never-answers-write-task"
    options = ("--call-timeout", "0.5")
    done, report = certify(tmp_path / "jobs-2", harness, *options, "--jobs", "2", seed=7, in_process=True)
    assert done.returncode == 1, done.stderr
    scenarios = list(by_id(report).values())
    assert {s["status"] for s in scenarios} <= {"error", "skipped"}
    assert all(s["reason"] for s in scenarios)
    _, alone = certify(tmp_path / "jobs-1", harness, *options, "--jobs", "1", seed=7, in_process=True)
    assert {s["id"]: (s["status"], s["reason"]) for s in scenarios} == {
        s["id"]: (s["status"], s["reason"]) for s in by_id(alone).values()
    }
    silent = [s for s in scenarios if s["evidence"].get("missed_deadline")]
    # the third silent scenario in catalogue order stops the run
    assert len(silent) == 3, [s["id"] for s in silent]
    # one call timeout each: DURABILITY-TRACE asks untraced before it gives the traced call 6 of them
    assert {s["evidence"]["missed_deadline"] for s in silent} == {"write_task: no response within 0.5s"}
    unrun = [s for s in scenarios if s["reason"].startswith("not judged: the harness stopped answering in ")]
    assert len(unrun) + len(silent) == len(scenarios)
    # Within a silent scenario each connection waits out one deadline at most (a batch
    # of pipelined calls, or 8 processes racing, wait theirs together), never more.
    for scenario in silent:
        if scenario["id"] == "FUZZ-MODEL":  # its engine keeps no call list: the reason names the call
            assert scenario["evidence"]["missed_deadline"] in scenario["reason"]
            continue
        waited = [c for c in scenario["calls"] if "no response within" in c.get("message", "")]
        assert 1 <= len(waited) <= 8 * A4_IDS_PER_ROUND, waited  # a round's calls on one connection


def test_a_harness_that_ignores_the_state_directory_fails_isolation(tmp_path):
    """Its first list_tasks on a fresh state directory lists an earlier scenario's
    tasks; it used to pass, since every count is taken before and after."""
    done, scenarios = run_kit_env(
        tmp_path, "shared-state", extra=("--jobs", "1"), FAKE_SHARED_STATE=str(tmp_path / "shared.json")
    )
    assert scenarios["WT-CREATE"]["status"] == "passed"  # the first scenario sees an empty store
    judged = scenarios["A2-RESPONSE-LOSS"]
    assert judged["status"] == "failed" and judged["reason"].startswith("state not isolated"), judged["reason"]
    assert done.returncode == 1


def test_a_harness_runs_in_a_scratch_directory_never_the_users(tmp_path, monkeypatch):
    """The kit in this process, from the user's working directory (a harness it starts
    is a process either way)."""
    user = tmp_path / "user"
    user.mkdir()
    monkeypatch.chdir(user)
    done, scenarios = run_kit_env(tmp_path, "cwd-state")
    assert os.listdir(user) == []  # it wrote fake.json into its scratch working directory
    assert {s["status"] for s in scenarios.values()} == {"passed"}, done.stdout  # each scenario: a fresh one
    assert done.returncode == 0


def test_a_huge_implementation_name_still_gives_a_report_and_a_bounded_replay_name(tmp_path):
    """A 3,200-character name used to end the run with ENAMETOOLONG on the replay file."""
    done, scenarios = run_kit_env(tmp_path, "double-create", FAKE_IMPLEMENTATION_NAME="é" * 3200, only="FUZZ-MODEL")
    assert "Traceback" not in done.stderr, done.stderr
    assert scenarios["FUZZ-MODEL"]["status"] == "failed"
    (replay,) = os.listdir(tmp_path / "out" / "replays")
    assert len(replay.encode()) <= 100
    with open(tmp_path / "out" / "replays" / replay) as handle:
        assert json.load(handle)["implementation"]["name"] == "é" * 3200  # kept whole inside
    assert done.returncode == 1


def run_kit_env(tmp_path, mode, only=SCENARIOS, extra=(), **env):
    """``run_kit`` with ``env`` added, in this process; FUZZ-MODEL at the budget named here,
    not at the session's."""
    done, report = certify(
        tmp_path / "out",
        f"{STDLIB_PYTHON} {FAKE} {mode}",
        "--only",
        only,
        "--call-timeout",
        "2",
        *extra,
        seed=7,
        in_process=True,
        env={**os.environ, **env, "PYTHONPATH": REPO, ENV_VAR: DEV},
    )
    return done, by_id(report)


#: Each start logs its pid (its process group's) and state directory, then becomes the
#: silent runtime: a shell, 1 ms a start where a Python wrapper cost 7.
RECORDING_WRAPPER = """echo "$$ $RETRYPROOF_STATE_DIR" >> {log}
exec {python} -S {broken} never-answers-write-task
"""
#: A4-MULTIPROCESS's callers in an interrupted run: the harness it started and two of its
#: own, each in a group of its own. The default eight were five more starts of the same.
CALLERS = "3"


def cli_run(harness, out):
    return [
        sys.executable,
        "-m",
        "retryproof.conformance.cli",
        "run",
        "--harness",
        harness,
        "--only",
        "A4-MULTIPROCESS",
        "--concurrency",
        CALLERS,
        "--call-timeout",
        "60",
        "--out",
        str(out),
    ]


def pytest_run(harness, out):
    return [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        *UNUSED_PLUGINS,
        "--retryproof-harness",
        harness,
        "--retryproof-only",
        "A4-MULTIPROCESS",
        "--retryproof-concurrency",
        CALLERS,
        "--retryproof-call-timeout",
        "60",
        "--retryproof-out",
        str(out),
    ]


@pytest.mark.parametrize(
    "command, signum, status, last_words",
    [
        (cli_run, signal.SIGTERM, 143, "interrupted"),
        (cli_run, signal.SIGINT, 130, "interrupted"),
        (pytest_run, signal.SIGTERM, pytest.ExitCode.INTERRUPTED, "Interrupted: SIGTERM"),
    ],
    ids=["cli-SIGTERM", "cli-SIGINT", "pytest-SIGTERM"],
)
def test_an_interrupted_run_ends_every_harness_group_and_keeps_earlier_reports(
    tmp_path, command, signum, status, last_words
):
    """SIGTERM (a cancelled CI job) used to leave harness process groups and a state
    directory behind; SIGINT during A4-MULTIPROCESS left 4 groups."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.json").write_text('{"earlier": true}\n')
    log = tmp_path / "starts.log"
    wrapper = tmp_path / "wrapper.sh"
    quoted = {"log": shlex.quote(str(log)), "python": shlex.quote(sys.executable), "broken": shlex.quote(BROKEN)}
    wrapper.write_text(RECORDING_WRAPPER.format(**quoted))
    kit = subprocess.Popen(
        command(f"sh {wrapper}", out),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:
        deadline = time.monotonic() + 60
        every_start = 1 + int(CALLERS)  # the probe's and the callers'
        while time.monotonic() < deadline and len(started(log)) < every_start:
            time.sleep(0.1)
        assert len(started(log)) == every_start, started(log)
        time.sleep(0.5)  # every process's write_task calls are in flight, each process in its own group
        kit.send_signal(signum)
        stdout, stderr = kit.communicate(timeout=60)
    finally:
        kit.kill()
    assert kit.returncode == status, stdout + stderr
    assert last_words in stdout + stderr
    assert "Exception in thread" not in stderr, stderr
    if command is cli_run:
        assert stderr.strip().endswith("interrupted") and "Traceback" not in stderr, stderr
    assert (out / "report.json").read_text() == '{"earlier": true}\n'
    assert sorted(os.listdir(out)) == ["report.json"]
    for pid, state_dir in started(log):
        assert not os.path.exists(state_dir)
        assert group_gone(pid), f"harness group {pid} outlived the run"


def started(log):
    if not log.exists():
        return []
    return [(int(pid), path) for pid, path in (line.split(" ", 1) for line in log.read_text().splitlines())]


def group_gone(pgid):
    deadline = time.monotonic() + 10  # an orphaned group's leader is reaped by init, not at once
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def test_noise_in_a_pipelined_batch_is_the_reason_at_once_and_in_the_evidence(tmp_path):
    """Answers under ids nobody asked for (one per call of the race, eight at least):
    they used to be dropped, and the batch said "8 of 8 calls got no answer" after the
    whole timeout."""
    done, scenarios = run_kit_env(tmp_path, "wrong-ids-on-write", only="A4-CONCURRENT")
    judged = scenarios["A4-CONCURRENT"]
    assert judged["status"] == "error"
    assert "which is not a call in flight" in judged["reason"], judged["reason"]
    assert "no response within" not in json.dumps(judged)  # ended by the noise, not by a deadline
    assert len(judged["evidence"]["protocol_noise"]) >= 8
    assert all("answer for id" in line for line in judged["evidence"]["protocol_noise"])
    assert done.returncode == 1


def test_a_task_path_that_leaves_the_state_directory_fails(tmp_path):
    harness = f"{sys.executable} -S {BROKEN} escaping-task-path"
    done, report = certify(tmp_path, harness, "--only", "WT-CREATE", seed=7, in_process=True)
    judged = by_id(report)["WT-CREATE"]
    assert judged["status"] == "failed" and "task_path" in judged["reason"], judged["reason"]
    assert done.returncode == 1


def test_a_process_that_outlives_its_harness_is_named_never_waited_on(tmp_path, monkeypatch):
    """Each start leaves a setsid grandchild holding the harness's stdout and stderr:
    stopping the harness used to hang the kit forever."""
    left = tmp_path / "survivors"
    # A stop waits this long for the pipes that the grandchild holds for 60 s: a second
    # (the kit's grace) showed no more than a fifth of one.
    monkeypatch.setattr("retryproof.adapters.process.PIPE_GRACE_S", 0.2)
    try:
        done, scenarios = run_kit_env(
            tmp_path, "leaves-survivor", only="WT-CREATE", FAKE_SURVIVOR_S="60", FAKE_SURVIVOR_PIDS=str(left)
        )
        judged = scenarios["WT-CREATE"]
        assert judged["status"] == "passed"
        (survivor,) = judged["evidence"]["survivors"]
        assert "fake_harness.py leaves-survivor" in survivor["command"]
        assert done.returncode == 0
    finally:
        # Every start left one, the handshake's too (named in no scenario's evidence).
        for pid in left.read_text().split() if left.exists() else ():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)


def test_an_interrupt_while_racing_callers_start_leaves_none_waiting(monkeypatch):
    """in_parallel releases its callers with a barrier: an interrupt between their starts
    used to leave the started ones waiting for partners forever, so an interrupted kit
    printed `interrupted` and then never exited (its threads are not daemons)."""
    import threading

    from retryproof.conformance.catalogue import entry
    from retryproof.conformance.context import Context
    from retryproof.spec.protocol import Hello, Success

    class Answering:
        def call(self, op, args=None, timeout=None, *, args_json=None):
            return Success(1, {})

        def exit_statuses(self):
            return [None]

    context = Context(entry("A4-MULTIPROCESS"), Answering, Hello.read({}), 1, 8)
    started = []
    real_start = threading.Thread.start

    def start(thread):
        if len(started) == 3:
            raise KeyboardInterrupt  # the signal handler's exception, on the scenario's thread
        started.append(thread)
        real_start(thread)

    monkeypatch.setattr(threading.Thread, "start", start)
    with pytest.raises(KeyboardInterrupt):
        context.in_parallel([Answering() for _ in range(8)], [("list_tasks", {})])
    monkeypatch.undo()
    for thread in started:
        thread.join(10)
        assert not thread.is_alive(), "a caller still waits at the barrier"


def test_kill_nemesis_against_a_runtime_that_never_answers_is_an_error_like_every_scenario(tmp_path):
    """It used to fail it for liveness after five rounds of kills, where every other
    scenario says error: the kit could not judge a runtime that answers nothing."""
    harness = f"{STDLIB_PYTHON} {FAKE} hang-on-write"
    done, report = certify(tmp_path, harness, "--only", "KILL-NEMESIS", "--call-timeout", "1", seed=7, in_process=True)
    judged = by_id(report)["KILL-NEMESIS"]
    assert judged["status"] == "error", judged["reason"]
    assert "none of the 8 calibration calls, before any kill, got an answer" in judged["reason"]
