"""Does the kit judge a third-party approval runtime correctly?

``approval_harness/harness.py`` is an approval runtime written from ``spec/`` alone, in
standard-library Python that imports nothing of this repository (see its README). In
``--mode correct`` recovery decides from effect evidence and the kit must pass all six
approval scenarios; in ``--mode p3-defect`` it carries the field report's P3 defect (a
failed completion audit turns a completed action into ``failed``, and recovery runs a
failed operation again), and the kit must fail P3-COMPLETION-AUDIT-FAULT and nothing
else.

``approval_harness/variants.py`` changes one method of the correct runtime per
variant: each is a hole the vendor's review found the kit passing, and the kit must
now fail (or, for a fault that never fired, end in error) exactly the scenarios named
in ``VARIANTS`` below, which are the only ones each run selects.

The kit runs once per harness, in the test's process, once per session.
"""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from kit import STDLIB_PYTHON, certify, once_per_session

from retryproof.spec import load_spec

HERE = Path(__file__).parent
HARNESS = HERE / "approval_harness" / "harness.py"
VECTORS = HERE.parent.parent / "spec" / "vectors" / "write-task-v1.json"
# The catalogue's approval scenarios; this module's runs select them all.
SCENARIOS = tuple(entry["id"] for entry in load_spec()["scenarios"] if "approval" in entry["needs"])
MODES = ("correct", "p3-defect")
VARIANTS_SCRIPT = HERE / "approval_harness" / "variants.py"
# variant -> the status each scenario it targets must end in (each run selects only these).
VARIANTS = {
    # fail fired once per process: P3's second operation never met the fault.
    "one-shot-fail": {"P3-COMPLETION-AUDIT-FAULT": "error"},
    "plain-crash-reads-absent": {"RECOVERY-UNKNOWN-EFFECT": "failed"},
    "dedupe-never-dedupes": {"RECOVERY-UNKNOWN-EFFECT": "failed"},
    "stale-only-once-dispatched": {"RECOVERY-STALE-REQUEST": "failed"},
    "audit-pending-never-shown": dict.fromkeys(
        ("P1-APPROVAL-AUDIT-FAULT", "P2-START-AUDIT-FAULT", "P3-COMPLETION-AUDIT-FAULT"), "failed"
    ),
    "stale-demotes-succeeded": {"RECOVERY-STALE-REQUEST": "failed"},
    # audit_pending reads false after a repair, so only list_audit shows the lost lines.
    "repair-forgets-the-line": dict.fromkeys(
        ("P1-APPROVAL-AUDIT-FAULT", "P2-START-AUDIT-FAULT", "P3-COMPLETION-AUDIT-FAULT", "RECOVERY-STALE-REQUEST"),
        "failed",
    ),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return once_per_session(tmp_path_factory, "independent-approval", run_every_harness)


def run_every_harness(root):
    """Run the kit against both modes and every variant, one after another, each in this
    process (kit.certify's ``in_process``: how the runtimes are judged is the point, and
    none of these runs has a FUZZ-MODEL or a hang); name -> (exit code, report.json,
    output). As nine processes at once the module took 6-7 CPU-s, so 4 (bench_suite.py -n 2, load 8-11)."""
    harnesses = {mode: (f"{STDLIB_PYTHON} {HARNESS} --mode {mode}", SCENARIOS) for mode in MODES}
    harnesses |= {
        variant: (f"{STDLIB_PYTHON} {VARIANTS_SCRIPT} {variant}", tuple(expected))
        for variant, expected in VARIANTS.items()
    }
    results = {}
    for name, (harness, only) in harnesses.items():
        done, report = certify(root / name, harness, "--only", ",".join(only), seed=1, in_process=True)
        assert report is not None, f"{name}: no report (exit {done.returncode}):\n{done.stdout}{done.stderr}"
        results[name] = (done.returncode, report, done.stdout + done.stderr)
    return results


def scenario(report, sid):
    return next(s for s in report["scenarios"] if s["id"] == sid)


def test_correct_runtime_passes_all_six_and_nothing_blocks(runs):
    # A run of six scenarios is partial, so its verdict cannot say conformant; that
    # none of the six blocks is what the run can say.
    code, report, output = runs["correct"]
    assert {s["id"]: s["status"] for s in report["scenarios"]} == dict.fromkeys(SCENARIOS, "passed"), output
    assert report["implementation"]["name"] == "independent-approval-correct"
    assert report["verdict"]["blocking"] == []
    assert code == 0, output


def test_correct_runtime_reconciles_the_completion_audit_fault_with_one_effect(runs):
    """What P3 passed on: the record kept "succeeded, audit pending", recovery reconciled."""
    _, report, _ = runs["correct"]
    evidence = scenario(report, "P3-COMPLETION-AUDIT-FAULT")["evidence"]
    assert evidence["operations"]["plain: after the fault"]["state"] == "succeeded"
    assert evidence["operations"]["plain: after the fault"]["audit_pending"] is True
    assert {r["outcome"] for r in evidence["recoveries"]} == {"reconciled"}
    assert evidence["effects"]["plain: after recovery"]["effects"] == 1


def test_p3_defect_fails_exactly_the_completion_audit_scenario(runs):
    code, report, output = runs["p3-defect"]
    expected = dict.fromkeys(SCENARIOS, "passed") | {"P3-COMPLETION-AUDIT-FAULT": "failed"}
    assert {s["id"]: s["status"] for s in report["scenarios"]} == expected, output
    assert report["verdict"]["conformant"] is False
    assert [entry["id"] for entry in report["verdict"]["blocking"]] == ["P3-COMPLETION-AUDIT-FAULT"]
    assert code == 1, output


def test_p3_defect_failure_names_the_second_effect(runs):
    """The report shows the seed's causal chain: failed after the fault, two effects after recovery."""
    _, report, _ = runs["p3-defect"]
    failed = scenario(report, "P3-COMPLETION-AUDIT-FAULT")
    assert "effect count 2" in failed["reason"]
    assert failed["evidence"]["operations"]["plain: after the fault"]["state"] == "failed"
    assert failed["evidence"]["effects"]["plain: after recovery"]["effects"] == 2
    assert "--mode p3-defect" in failed["reproduce"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_each_one_change_variant_is_caught(runs, variant):
    code, report, output = runs[variant]
    assert {s["id"]: s["status"] for s in report["scenarios"]} == VARIANTS[variant], output
    assert code == 1, output


def test_a_fault_that_did_not_fire_is_an_error_not_a_verdict_on_recovery(runs):
    _, report, _ = runs["one-shot-fail"]
    reason = scenario(report, "P3-COMPLETION-AUDIT-FAULT")["reason"]
    assert reason.startswith("execute (dedupe): the failpoint did not fire"), reason


def test_the_independent_harness_refuses_a_failpoint_it_cannot_honour(tmp_path):
    env = {
        "RETRYPROOF_STATE_DIR": str(tmp_path),
        "RETRYPROOF_FAILPOINTS": "approval.audit_completed=fail,approval.nowhere=crash",
    }
    done = subprocess.run(
        [sys.executable, str(HARNESS), "--mode", "correct"],
        input="",
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )
    assert done.returncode != 0
    assert "approval.nowhere=crash" in done.stderr
    assert done.stdout == ""


def load_harness():
    spec = importlib.util.spec_from_file_location("independent_approval_harness", HARNESS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_harness_digest_matches_every_golden_vector():
    """The harness's own RFC 8785 and write-task-v1 code, checked against the published vectors."""
    harness = load_harness()
    for case in json.loads(VECTORS.read_text())["cases"]:
        task = case["task"] if "task" in case else harness.parse_json(case["task_json"])
        if "error" in case:
            with pytest.raises(harness.OpError) as raised:
                harness.task_digest(task)
            assert raised.value.code == "invalid_request"
            assert str(raised.value).startswith(case["error"]["field"] + ":"), case["id"]
        else:
            assert harness.canonical(harness.canonical_task(task)) == case["canonical"], case["id"]
            assert harness.task_digest(task) == case["digest"], case["id"]


@pytest.mark.parametrize(
    ("number", "text"),
    [  # RFC 8785 appendix B and section 3.2.2.3 samples
        (0.0, "0"),
        (-0.0, "0"),
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (1e-7, "1e-7"),
        (1e-6, "0.000001"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (333333333.3333333, "333333333.3333333"),
        (-1.5, "-1.5"),
        (2.0, "2"),
        (9007199254740991, "9007199254740991"),
    ],
)
def test_harness_numbers_follow_rfc_8785(number, text):
    assert load_harness().canonical(number) == text


def test_harness_refuses_integers_without_an_rfc_8785_form():
    with pytest.raises(ValueError):
        load_harness().canonical(2**53)
