"""Does the kit judge a third-party runtime correctly?

``node_harness/harness.js`` is a runtime written in Node.js from ``spec/`` alone (see
its README). Run clean, it should be conformant; run with ``--defect NAME`` it carries
one mistake, and the kit must fail exactly the scenarios that mistake violates, and
pass the neighbouring scenarios the mistake does not touch.

The clean run is the complete catalogue, FUZZ-MODEL included at the dev budget (much
of the run's CPU time): the kit must judge a third-party runtime's histories fairly too.
"""

import os
import shutil
from pathlib import Path

import pytest
from kit import certify, once_per_session

from retryproof.spec import load_spec

HARNESS = Path(__file__).parent / "node_harness" / "harness.js"

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None, reason="node is not on PATH: the independent Node.js runtime cannot run"
)

# The clean runtime declares neither approval nor multiprocess (node has no flock, so it
# offers no cross-process lock): every scenario needing one of them is skipped, naming it.
UNDECLARED = {
    scenario["id"]: missing
    for scenario in load_spec()["scenarios"]
    for missing in ("approval", "multiprocess")
    if missing in scenario["needs"]
}


def run_kit(tmp_path, *args, defect=None):
    """Run ``retryproof run`` against the Node runtime, in this process (kit.certify's
    ``in_process``: how the runtime is judged is the point; a process of its own cost the
    clean run 0.3-0.5 CPU-s more); return (exit code, report.json, output)."""
    command = f"node {HARNESS}" + (f" --defect {defect}" if defect else "")
    # The dev fuzz budget, named, so FUZZ-MODEL's settings are not the session's: this
    # checks that FUZZ-MODEL judges a third-party runtime fairly, not how deep it
    # explores (tests/conformance/test_fuzz_model.py does).
    env = {**os.environ, "RETRYPROOF_FUZZ_PROFILE": "retryproof-dev"}
    # Node reads and parses NODE_EXTRA_CA_CERTS's bundle at every start, before any of
    # the harness runs: with a system bundle that is half a start's CPU (0.03 of 0.06
    # CPU-s; the clean run starts node about 75 times), and this runtime opens no TLS
    # connection.
    env.pop("NODE_EXTRA_CA_CERTS", None)
    done, report = certify(tmp_path / "report", command, *args, formats="json", in_process=True, env=env)
    assert report is not None, f"no report (exit {done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done.returncode, report, done.stdout + done.stderr


def statuses(report):
    return {s["id"]: s["status"] for s in report["scenarios"]}


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory):
    return once_per_session(tmp_path_factory, "node-clean", run_kit)


def test_clean_runtime_passes_every_scenario_it_can_take_part_in(clean_run):
    _, report, output = clean_run
    status = statuses(report)
    assert {sid for sid, st in status.items() if st in ("failed", "error")} == set(), output
    assert {sid for sid, st in status.items() if st == "skipped"} == set(UNDECLARED), output
    for scenario in report["scenarios"]:
        if scenario["id"] in UNDECLARED:
            assert UNDECLARED[scenario["id"]] in scenario["reason"], scenario
        else:
            assert scenario["status"] == "passed", scenario
    assert report["implementation"]["name"] == "node-independent"
    assert "multiprocess" not in report["capabilities"] and "approval" not in report["capabilities"]


def test_clean_runtime_lists_undeclared_features_as_not_covered(clean_run):
    """A4-MULTIPROCESS and P0-CONSUMED need nothing else than an undeclared optional capability."""
    _, report, _ = clean_run
    not_covered = {entry["id"] for entry in report["verdict"]["not_covered"]}
    assert {"A4-MULTIPROCESS", "P0-CONSUMED"} <= not_covered


def test_clean_runtime_is_conformant(clean_run):
    """Lacking the optional approval and multiprocess features keeps a runtime
    conformant: those scenarios do not apply to it."""
    code, report, output = clean_run
    assert report["verdict"]["blocking"] == [], output
    assert report["verdict"]["complete"] is True
    assert report["verdict"]["conformant"] is True
    assert code == 0


# defect -> (scenarios it must fail, neighbouring scenarios it must still pass)
DEFECTS = {
    # The receipt is rebound to the conflicting request's digest, so the original
    # request is refused afterwards (CON-1: nothing is changed).
    "conflict-overwrites-digest": ({"CONFLICT-DIGEST"}, {"CONFLICT-SCHEMA", "A2-RESPONSE-LOSS", "WT-CREATE"}),
    # Resuming a reservation whose task object is absent takes a new number (REC-1).
    # Only those two scenarios resume such a reservation; adopting an existing task or
    # meeting a foreign one never allocates.
    "recovery-fresh-number": (
        {"CRASH-AFTER-RESERVE", "STALE-RESERVATION-DIAGNOSTICS"},
        {"CRASH-AFTER-TASK-WRITE", "PATH-OCCUPIED-CONFLICT", "TASK-MISSING-CONFLICT"},
    ),
    # Pipelined duplicates get in_progress at once instead of waiting and reusing (CONC-1).
    "busy-not-waiting": ({"A4-CONCURRENT"}, {"WT-CREATE", "A2-RESPONSE-LOSS", "RESTART-REUSE"}),
}


@pytest.mark.parametrize("defect", sorted(DEFECTS))
def test_each_defect_fails_exactly_the_scenarios_it_violates(tmp_path, defect):
    must_fail, must_pass = DEFECTS[defect]
    only = ",".join(sorted(must_fail | must_pass))
    code, report, output = run_kit(tmp_path, "--only", only, defect=defect)
    status = statuses(report)
    assert status == {**{sid: "failed" for sid in must_fail}, **{sid: "passed" for sid in must_pass}}, output
    assert report["verdict"]["conformant"] is False
    assert {entry["id"] for entry in report["verdict"]["blocking"]} == must_fail
    assert code == 1
    for scenario in report["scenarios"]:
        if scenario["status"] == "failed":
            assert f"--defect {defect}" in scenario["reproduce"], scenario["reproduce"]
