"""FUZZ-MODEL finds a recovery defect no scenario was written for, shrinks it to a
minimal history, and the replay file reproduces it on a fresh state directory;
the same file does not reproduce on the reference runtime."""

from __future__ import annotations

import json
import sys

import pytest

from adapters.process import ProcessConnection
from conformance.cli import main as cli
from conformance.fuzz import save_replay
from conformance.fuzz_machine import run_fuzz
from conformance.fuzz_profiles import CI, fuzz_settings

REFERENCE = [sys.executable, "-m", "reference_impl"]
FAULTY = [*REFERENCE, "--fault", "recovery-new-number"]


@pytest.fixture
def connection(tmp_path):
    opened = []

    def connect(command):
        conn = ProcessConnection(command, str(tmp_path))
        opened.append(conn)
        conn.start()
        return conn

    yield connect
    for conn in opened:
        conn.kill()


def test_ci_profile_inherits_hypothesis_ci_profile():
    from hypothesis import settings

    ci = fuzz_settings(CI)
    assert ci.derandomize and ci.database is None
    # Ours is a child of Hypothesis's own "ci" profile, which stays registered as is.
    assert settings.get_profile("ci").print_blob is True and ci.print_blob is True


def test_finds_recovery_new_number_and_the_replay_reproduces(connection, tmp_path, monkeypatch, capsys):
    outcome = run_fuzz(connection(FAULTY), seed=0, profile=CI)
    assert outcome.failed and not outcome.flaky, outcome.hypothesis_report
    assert "tasks under one submission id" in outcome.violation
    assert [step["step"] for step in outcome.steps] == ["crash"]
    assert outcome.steps[0]["failpoint"] == "write_task.after_task_write"

    monkeypatch.chdir(tmp_path)
    path = save_replay(outcome.replay_document({"name": "reference-fault-recovery-new-number"}))
    assert json.loads(open(path, encoding="utf-8").read())["steps"] == outcome.steps
    assert cli(["replay", path, "--harness", " ".join(FAULTY)]) == 1
    assert "REPRODUCED" in capsys.readouterr().out
    assert cli(["replay", path]) == 0  # the reference runtime
    assert "not reproduced" in capsys.readouterr().out


def test_replay_rejects_a_file_that_is_not_a_replay(tmp_path, capsys):
    bogus = tmp_path / "bogus.json"
    bogus.write_text('{"steps": []}')
    assert cli(["replay", str(bogus)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "hint:" in err and "Traceback" not in err
