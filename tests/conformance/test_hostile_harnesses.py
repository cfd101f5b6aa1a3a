"""The kit judges broken harnesses ``error`` or ``failed``, never ``passed``, in
bounded time (the timeouts below bound every wait)."""

import json
import os
import subprocess
import sys

import pytest

FAKE = os.path.join(os.path.dirname(__file__), "fake_harness.py")
SCENARIOS = "WT-CREATE,A2-RESPONSE-LOSS"


def run_kit(tmp_path, mode, *extra):
    harness = f"{sys.executable} {FAKE} {mode}"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "retryproof.conformance.cli",
            "run",
            "--harness",
            harness,
            "--only",
            SCENARIOS,
            "--seed",
            "7",
            "--call-timeout",
            "1",
            "--start-timeout",
            "2",
            "--out",
            str(tmp_path),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    report = tmp_path / "report.json"
    statuses = {s["id"]: s for s in json.loads(report.read_text())["scenarios"]} if report.exists() else {}
    return done, statuses


def test_honest_fake_passes_the_basics(tmp_path):
    """The control: the fakes' shared runtime is sound, so each defect below is the cause."""
    done, scenarios = run_kit(tmp_path, "honest")
    assert {s["status"] for s in scenarios.values()} == {"passed"}, done.stdout
    assert done.returncode == 0


@pytest.mark.parametrize("mode", ["hang", "crash-at-start"])
def test_a_harness_that_never_shakes_hands_cannot_be_run(tmp_path, mode):
    done, scenarios = run_kit(tmp_path, mode)
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
    harness = f"{sys.executable} {FAKE} hang-on-write"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "retryproof.conformance.cli",
            "run",
            "--harness",
            harness,
            "--only",
            "A4-CONCURRENT",
            "--seed",
            "7",
            "--call-timeout",
            "1",
            "--out",
            str(tmp_path),
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    judged = json.loads((tmp_path / "report.json").read_text())["scenarios"][0]
    assert judged["status"] == "error" and "8 calls got no answer" in judged["reason"]
    assert "one deadline for the whole batch" in judged["reason"]


@pytest.mark.parametrize(
    "mode, why",
    [
        ("honest", None),  # the control: the same runtime with the contract's line handling
        ("lenient-lines", "list_tasks"),  # PROTOCOL-R6: no args or an extra key is bad_message
        ("answers-blank-lines", "a whitespace-only line must be ignored"),  # PROTOCOL-R7
    ],
)
def test_invalid_input_judges_how_lines_that_are_not_requests_are_answered(tmp_path, mode, why):
    done, scenarios = run_kit(tmp_path, mode, "--only", "INVALID-INPUT")
    judged = scenarios["INVALID-INPUT"]
    assert judged["status"] == ("passed" if why is None else "failed"), done.stdout
    assert why is None or why in judged["reason"], judged["reason"]
