"""FUZZ-MODEL finds a recovery defect no scenario was written for, shrinks it to a
minimal history, and the replay file the run writes beside its report reproduces it on
a fresh state directory; the same file does not reproduce on the reference runtime."""

from __future__ import annotations

import json
import shlex
import sys

from conformance.cli import main as cli
from conformance.fuzz_profiles import CI, ENV_VAR, fuzz_settings

REFERENCE = [sys.executable, "-m", "reference_impl"]
FAULTY = [*REFERENCE, "--fault", "recovery-new-number"]


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
    assert cli(["run", "--harness", harness, "--only", "FUZZ-MODEL", "--seed", "0", "--out", str(out), "--format", "json"]) == 1
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
    assert cli(["replay", str(path)]) == 0  # the reference runtime
    assert "not reproduced" in capsys.readouterr().out


def test_replay_rejects_a_file_that_is_not_a_replay(tmp_path, capsys):
    bogus = tmp_path / "bogus.json"
    bogus.write_text('{"steps": []}')
    assert cli(["replay", str(bogus)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "hint:" in err and "Traceback" not in err
