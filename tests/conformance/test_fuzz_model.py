"""FUZZ-MODEL finds a recovery defect no scenario was written for, shrinks it to a
minimal history, and the replay file the run writes beside its report reproduces it on
a fresh state directory; the same file does not reproduce on the reference runtime."""

from __future__ import annotations

import json
import os
import shlex
import sys
from concurrent.futures import Future

import pytest
from kit import REFERENCE, STDLIB_PYTHON, by_id, certify

from retryproof.adapters.connection import Connection, Lost
from retryproof.conformance import validation
from retryproof.conformance.cli import main as cli
from retryproof.conformance.fuzz.model import Driver, HarnessSilent, ModelViolation, StepError, run_steps
from retryproof.conformance.fuzz.profiles import CI, DEV, ENV_VAR, fuzz_settings, without_local_constants
from retryproof.conformance.validation import LISTED_RECORDS, result_problem
from retryproof.spec import schema
from retryproof.spec.protocol import Failure, Success

FAULTY = [*REFERENCE, "--fault", "recovery-new-number"]
BROKEN = os.path.join(os.path.dirname(__file__), "broken_runtimes.py")


def test_ci_profile_inherits_hypothesis_ci_profile():
    from hypothesis import settings

    ci = fuzz_settings(CI)
    assert ci.derandomize and ci.database is None
    # Ours is a child of Hypothesis's own "ci" profile, which stays registered as is.
    assert settings.get_profile("ci").print_blob is True and ci.print_blob is True


def test_finds_recovery_new_number_and_the_replay_reproduces(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(ENV_VAR, CI)
    out = tmp_path / "report"
    harness = shlex.join(FAULTY)
    assert (
        cli(["run", "--harness", harness, "--only", "FUZZ-MODEL", "--seed", "0", "--out", str(out), "--format", "json"])
        == 1
    )
    [result] = json.loads((out / "report.json").read_text(encoding="utf-8"))["scenarios"]
    assert result["status"] == "failed" and "tasks under one submission id" in result["reason"]
    steps = result["evidence"]["replay"]["steps"]
    assert [step["step"] for step in steps] == ["crash"]
    assert steps[0]["failpoint"] == "write_task.after_task_write"

    [path] = (out / "replays").iterdir()
    assert json.loads(path.read_text(encoding="utf-8"))["steps"] == steps
    capsys.readouterr()
    assert cli(["replay", str(path), "--harness", harness]) == 1
    assert "REPRODUCED" in capsys.readouterr().out
    assert cli(["replay", str(path), "--harness", shlex.join(REFERENCE)]) == 0  # the reference runtime
    assert "not reproduced" in capsys.readouterr().out
    assert cli(["replay", str(path)]) == 2  # the file records the faulty runtime, not the bundled reference
    assert "records a run of implementation" in capsys.readouterr().err


def test_replay_rejects_a_file_that_is_not_a_replay(tmp_path, capsys):
    bogus = tmp_path / "bogus.json"
    bogus.write_text('{"steps": []}')
    assert cli(["replay", str(bogus)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "hint:" in err and "Traceback" not in err


class _Stub:
    """An in-process connection answering from a table: op -> reply (or a callable)."""

    alive = True
    hello = {"capabilities": ["write_task"], "failpoints": []}
    missed_deadline = None
    # What a harness connection says of itself (adapters.connection.Connection's defaults).
    task_model = Connection.task_model
    normalizes = Connection.normalizes
    settles_in_flight = Connection.settles_in_flight

    def __init__(self, **replies):
        self.replies = replies
        self.ops = []

    def call(self, op, args=None, timeout=None):
        self.ops.append(op)
        reply = self.replies[op]
        return reply() if callable(reply) else reply

    def submit(self, op, args):
        pending = Future()  # as Connection.submit returns; answered when waited for
        pending.set_result(op)
        return pending

    def wait(self, pending, timeout=None):
        return self.call(pending.result())

    def exit_statuses(self):
        return [None]  # one process, running


def _no_tasks():
    return Success(1, {"tasks": []})


def test_an_indeterminate_answer_is_no_violation_and_silence_is_no_failure():
    """FUZZ-MODEL classifies by the outcome model: info is never a violation, and a
    harness that stops answering is an error (nothing to judge), never failed."""
    step = {"step": "submit", "id": "fz-a", "task": 0, "variant_kind": "same", "burst": 1}
    # io_error may follow the effect (outcome model: info): state is still checked, nothing is judged failed
    Driver(_Stub(write_task=Failure(1, "io_error", "EIO"), list_tasks=_no_tasks), "h").apply(step)
    # list_tasks, the authoritative state, unanswered: nothing can be judged
    answers = iter([_no_tasks()])
    silent = _Stub(
        write_task=Failure(1, "io_error", "EIO"), list_tasks=lambda: next(answers, Lost("timed out after 1 s"))
    )
    with pytest.raises(HarnessSilent, match="list_tasks"):
        Driver(silent, "h").apply(step)


def test_fuzz_model_stops_at_the_first_missed_deadline():
    """A write_task that timed out used to count as indeterminate and exploring went
    on, one full timeout per new call (711 s against a harness silent on write_task)."""
    step = {"step": "submit", "id": "fz-a", "task": 0, "variant_kind": "same", "burst": 1}
    silent = _Stub(write_task=Lost("no response within 10s"), list_tasks=_no_tasks)

    def deadline_missed():
        silent.missed_deadline = "write_task: no response within 10s"
        return Lost("no response within 10s")

    silent.replies["write_task"] = deadline_missed
    driver = Driver(silent, "h")
    with pytest.raises(HarnessSilent, match="write_task: no response within 10s"):
        driver.apply(step)
    assert silent.ops == ["list_tasks", "write_task"]  # nothing after the silence


def test_fuzz_model_settles_in_flight_by_retrying_and_judges_only_one_that_never_settles():
    """Over a binding an in_flight answer (the IETF draft's 409) wrote nothing: the
    driver retries it, as A4 does, and judges the retry; one that is still in flight
    when the bound (the call timeout) has passed is a rejection of the same request."""
    step = {"step": "submit", "id": "fz-a", "task": 0, "variant_kind": "same", "burst": 1}
    busy = Failure(1, "in_flight", "a request with this key is in flight")
    replies = iter([busy, busy])
    settling = _Stub(write_task=lambda: next(replies, Failure(1, "io_error", "EIO")), list_tasks=_no_tasks)
    settling.settles_in_flight = True
    Driver(settling, "h", call_timeout=5).apply(step)
    assert settling.ops.count("write_task") == 3  # two retries, the second judged (info: no violation)
    stuck = _Stub(write_task=busy, list_tasks=_no_tasks)
    stuck.settles_in_flight = True
    with pytest.raises(ModelViolation, match="the same request was rejected: error in_flight"):
        Driver(stuck, "h", call_timeout=0.3).apply(step)
    assert stuck.ops.count("write_task") > 2
    # A harness has no in_flight to settle (it must wait for the holder): judged at once.
    harness = _Stub(write_task=busy, list_tasks=_no_tasks)
    with pytest.raises(ModelViolation, match="rejected"):
        Driver(harness, "h", call_timeout=5).apply(step)
    assert harness.ops.count("write_task") == 1


def test_a_replay_sends_no_normalization_variant_to_a_runtime_that_does_not_compare_by_write_task_v1():
    steps = [{"step": "submit", "id": "fz-a", "task": 0, "variant_kind": "nfd", "burst": 1}]
    own_bytes = _Stub(list_tasks=_no_tasks)
    own_bytes.normalizes = False
    with pytest.raises(StepError, match="step 0 \\(submit\\): variant_kind: nfd is another request"):
        run_steps(own_bytes, steps)
    assert own_bytes.ops == ["list_tasks"]  # refused before any step ran


def test_every_success_is_checked_against_its_schema_once(monkeypatch):
    from retryproof.conformance.fuzz import model

    checked: list[str] = []
    monkeypatch.setattr(model, "result_problem", lambda op, result: checked.append(op) or result_problem(op, result))
    step = {"step": "submit", "id": "fz-a", "task": 0, "variant_kind": "same", "burst": 1}
    driver = Driver(_Stub(write_task=Success(1, {"disposition": "created"}), list_tasks=_no_tasks), "h")
    with pytest.raises(ModelViolation, match="violates its schema"):
        driver.apply(step)
    assert checked == ["list_tasks", "write_task"]  # where the call was recorded, not again where it was judged
    assert driver.history[-1].kind == "info"


def test_a_garbled_success_is_indeterminate_and_one_seed_gives_one_verdict(tmp_path):
    """A success that violates its result schema is ``info`` in FUZZ-MODEL's history, as
    the outcome model says (it was recorded ``ok``, and only judged later): FUZZ-MODEL
    fails on it, the call keeps what it answered, and the same seed gives the same verdict."""
    harness = f"{sys.executable} -S {BROKEN} reuse-without-idempotent"
    problem = 'write_task result violates its schema at (result) (rule required): "idempotent" is missing'
    verdicts = []
    for run in ("first", "second"):
        done, report = certify(
            tmp_path / run, harness, "--only", "FUZZ-MODEL", in_process=True, env={**os.environ, ENV_VAR: DEV}
        )
        judged = by_id(report)["FUZZ-MODEL"]
        assert done.returncode == 1 and judged["status"] == "failed" and problem in judged["reason"], judged["reason"]
        writes = [call for call in judged["calls"] if call["op"] == "write_task"]
        garbled = [call for call in writes if "idempotent" not in call]  # the defect drops it from every reuse
        assert garbled and {call["disposition"] for call in garbled} == {"reused"}
        assert all(call["kind"] == "info" and call["message"] == problem for call in garbled)
        assert all(call["kind"] == "ok" for call in writes if call not in garbled)
        verdicts.append((judged["status"], judged["reason"]))
    assert verdicts[0] == verdicts[1]


def test_a_listed_record_is_validated_once_and_a_bad_one_still_named_by_its_own_index(monkeypatch):
    # Ids of this test's own, so no earlier test in the worker has made them known valid.
    record = {
        "task_id": "T-once",
        "task_path": "tasks/T-once.json",
        "client_submission_id": "fz-once",
        "request_digest": "x",
    }
    valid = {**record, "request_digest": "sha256:" + "0" * 64}
    fresh = {**valid, "task_id": "T-once-2"}
    checked: list[object] = []
    validator = validation._validator("list_tasks")

    class Counting:
        def iter_errors(self, instance):
            checked.append(instance)
            return validator.iter_errors(instance)

    monkeypatch.setattr(validation, "_validator", lambda op: Counting())
    assert result_problem("list_tasks", {"tasks": [valid]}) is None  # now known valid
    assert result_problem("list_tasks", {"tasks": [valid, fresh]}) is None
    assert checked[-1] == {"tasks": [fresh]}  # the known record was not validated again
    monkeypatch.undo()
    problem = result_problem("list_tasks", {"tasks": [valid, {**valid, "task_id": ""}, record]})
    assert problem is not None and problem.startswith("list_tasks result violates its schema at tasks/1/task_id")
    assert result_problem("list_tasks", {"tasks": [valid, valid]}) is None
    assert result_problem("list_tasks", {"tasks": "none"}) is not None  # the envelope is always validated


def test_the_schema_of_a_listing_judges_each_record_alone():
    # What lets result_problem validate only the records it has not seen valid: no rule
    # on the list as a whole (minItems, uniqueItems, contains, ...).
    for op, field in LISTED_RECORDS.items():
        listing = schema("harness-response")["$defs"][f"{op}_result"]["properties"][field]
        assert set(listing) <= {"type", "items", "description"}, listing


def test_an_exploration_draws_from_no_local_constants_and_gives_them_back():
    from hypothesis.internal.conjecture import providers

    collect = providers._get_local_constants
    with without_local_constants(), without_local_constants():  # held by two explorations at once
        assert len(providers._get_local_constants()) == 0
    assert providers._get_local_constants is collect


def test_a_silent_harness_ends_fuzz_model_in_error(tmp_path):
    fake = f"{STDLIB_PYTHON} {os.path.join(os.path.dirname(__file__), 'fake_harness.py')} hang-on-write"
    _, report = certify(tmp_path, fake, "--only", "FUZZ-MODEL", "--call-timeout", "1", env={**os.environ, ENV_VAR: DEV})
    judged = by_id(report)["FUZZ-MODEL"]
    assert judged["status"] == "error" and "FUZZ-MODEL stopped" in judged["reason"], judged["reason"]


def test_a_failure_that_does_not_replay_keeps_the_history_that_failed(monkeypatch):
    """A timing-dependent failure (a SIGKILL that landed in a window once) does not fail
    again when replayed: its minimal history used to be [], so the report showed no
    history at all. The history and log of the run that failed are kept instead."""
    from retryproof.conformance.fuzz import machine

    monkeypatch.setattr(machine, "run_steps", lambda *args, **kwargs: (None, ["replayed: no violation"]))
    steps = [{"step": "kill", "id": "a", "task": 0, "delay_ms": 3}, {"step": "restart", "graceful": False}]
    violation = ModelViolation("lost an acknowledged task")
    log = ["kill for a: ok created T-1; after restart, retry: ok created T-2", "restart (SIGKILL)"]
    kept, found, history, flaky = machine.shrink(None, steps, violation, log, call_timeout=1, budget_s=5)
    assert (kept, found, history, flaky) == (steps, violation, log, True)
