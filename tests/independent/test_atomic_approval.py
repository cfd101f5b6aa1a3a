"""Is an approval-only runtime that rolls a step back with its audit row certified, and
only for approval flows?

``atomic_approval/harness.py`` is an approval runtime written from ``spec/`` alone, in
standard-library Python importing nothing of this repository: it declares ``approval``
and no ``write_task``, and writes every step and its audit row in one SQLite
transaction, so an audit fault rolls both back (APPROVAL-R26). ``--mode correct`` must be
CONFORMANT for approval flows only, through the six approval scenarios, with every
write_task scenario not covered and no checklist question answered yes. Its two faulty
modes must be failed by the scenarios aimed at them: ``rerun-after-rollback`` (the field
report's P3 chain in a transactional store) by P3-COMPLETION-AUDIT-FAULT alone,
``rerun-interrupted`` (recovery runs every interrupted executor again) by P3 and by
RECOVERY-UNKNOWN-EFFECT, whose reason names every executor it caught. The rollback is
the only way out of an owed audit: ``audit-after-commit`` (the row in a transaction of
its own, its failure reported but the step kept with nothing owed) hides a step, and
every audit-fault scenario fails it.

Each mode is one full-catalogue run; the write_task scenarios skip without starting a
process. The four runs (the correct mode's with every report format and a step summary)
run one after another in this process (``kit.certify``'s ``in_process``: how they are
judged is the point, and none of these runs has a FUZZ-MODEL or a hang), which saves
four kit start-ups.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from kit import STDLIB_PYTHON, by_id, certify, once_per_session, retryproof_here

from retryproof.spec import load_spec

HERE = Path(__file__).parent
HARNESS = HERE / "atomic_approval" / "harness.py"
VECTORS = HERE.parent.parent / "spec" / "vectors" / "approval-request.json"
APPROVAL = {entry["id"] for entry in load_spec()["scenarios"] if "approval" in entry["needs"]}
TASK_CREATION = {entry["id"] for entry in load_spec()["scenarios"]} - APPROVAL
MODES = ("correct", "rerun-after-rollback", "rerun-interrupted", "audit-after-commit")
SCOPE = "approval only: write_task not offered, not certified"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return once_per_session(tmp_path_factory, "independent-atomic", run_every_mode)


def run_every_mode(root):
    """mode -> (exit code, report.json, console output, {file name: text})."""
    summary = root / "step-summary.md"
    environment = {**os.environ, "GITHUB_STEP_SUMMARY": str(summary)}

    def one(mode):
        out = root / mode
        out.mkdir()
        correct = mode == "correct"
        formats = "json,md,html,junit,badge" if correct else "json"
        command = f"{STDLIB_PYTHON} {HARNESS} --mode {mode}"
        done, report = certify(out, command, formats=formats, in_process=True, env=environment if correct else None)
        assert report is not None, f"{mode}: no report (exit {done.returncode}):\n{done.stdout}{done.stderr}"
        files = {path.name: path.read_text() for path in out.iterdir() if path.is_file()}
        return done.returncode, report, done.stdout, files

    results = {mode: one(mode) for mode in MODES}
    results["correct"][3]["step-summary.md"] = summary.read_text()
    return results


def statuses(report):
    return {sid: scenario["status"] for sid, scenario in by_id(report).items()}


def test_the_atomic_runtime_is_certified_for_approval_flows_only(runs):
    code, report, output, _ = runs["correct"]
    assert statuses(report) == dict.fromkeys(APPROVAL, "passed") | dict.fromkeys(TASK_CREATION, "skipped"), output
    verdict = report["verdict"]
    assert verdict["conformant"] and verdict["complete"] and code == 0, output
    assert verdict["headline"] == f"CONFORMANT ({SCOPE})"
    assert verdict["tool_paths"] == {"write_task": "not offered", "approval": "certified"}
    assert {entry["id"] for entry in verdict["not_covered"]} == TASK_CREATION
    assert report["capabilities"] == ["approval"]


def test_without_write_task_no_checklist_question_is_answered(runs):
    """A certificate for approval flows says nothing about task creation (VERDICT-R18)."""
    _, report, _, _ = runs["correct"]
    assert {answer["id"]: answer["answer"] for answer in report["checklist"]} == {
        f"Q{number}": "unanswered" for number in range(1, 8)
    }


def test_every_report_format_names_the_tool_paths(runs):
    code, _, output, files = runs["correct"]
    line = "Tool paths: write_task not offered · approval certified"
    assert line in output and f"CONFORMANT ({SCOPE})" in output
    assert r"Tool paths: write\_task not offered · approval certified" in files["report.md"]
    assert r"Tool paths: write\_task not offered · approval certified" in files["step-summary.md"]
    assert f'<small id="tool-paths">{line}</small>' in files["report.html"]
    properties = {p.get("name"): p.get("value") for p in ET.fromstring(files["junit.xml"]).iter("property")}
    assert properties["tool_paths"] == "write_task not offered, approval certified"
    assert properties["verdict"] == f"CONFORMANT ({SCOPE})"
    assert json.loads(files["badge.json"])["message"] == "conformant (approval only)"


def test_a_report_claiming_task_creation_certified_is_invalid(runs, tmp_path):
    """validate-report recomputes the tool paths from the capabilities and statuses."""
    report = json.loads(json.dumps(runs["correct"][1]))
    report["verdict"]["tool_paths"]["write_task"] = "certified"
    forged = tmp_path / "report.json"
    forged.write_text(json.dumps(report))
    done = retryproof_here("validate-report", str(forged))
    assert done.returncode == 1 and "verdict/tool_paths" in done.stdout + done.stderr, done.stdout + done.stderr


def test_a_rolled_back_start_leaves_an_approved_operation_that_executes_once(runs):
    evidence = by_id(runs["correct"][1])["P2-START-AUDIT-FAULT"]["evidence"]
    after_fault = evidence["operations"]["after the fault"]
    assert (after_fault["state"], after_fault["audit_pending"]) == ("approved", False)
    assert [line["event"] for line in evidence["audit"]["after the fault"]] == ["approved"]
    assert [(r["outcome"], r["state"]) for r in evidence["recoveries"]] == [("nothing_to_do", "approved")]
    assert evidence["effects"]["after execute in a new process"]["effects"] == 1


def test_a_rolled_back_completion_is_recovered_as_an_unknown_effect(runs):
    """Plain reconciled with no new call, dedupe called once more, opaque needs verification."""
    evidence = by_id(runs["correct"][1])["P3-COMPLETION-AUDIT-FAULT"]["evidence"]
    for executor in ("plain", "dedupe", "opaque"):
        after_fault = evidence["operations"][f"{executor}: after the fault"]
        assert (after_fault["state"], after_fault["audit_pending"]) == ("executing", False)
    assert [r["outcome"] for r in evidence["recoveries"]] == ["reconciled", "reconciled", "needs_verification"]
    calls = {executor: evidence["effects"][f"{executor}: after recovery"] for executor in ("plain", "dedupe", "opaque")}
    assert {executor: (c["effects"], c["executor_calls"]) for executor, c in calls.items()} == {
        "plain": (1, 1),
        "dedupe": (1, 2),
        "opaque": (1, 1),
    }
    repaired = {line["event"]: line["repaired"] for line in evidence["audit"]["plain: after recovery"]}
    assert repaired["execution_completed"] is True  # the only line that repairs an earlier attempt's


def test_a_rerun_after_a_rolled_back_completion_fails_p3_alone(runs):
    code, report, output, _ = runs["rerun-after-rollback"]
    expected = dict.fromkeys(APPROVAL, "passed") | dict.fromkeys(TASK_CREATION, "skipped")
    assert statuses(report) == expected | {"P3-COMPLETION-AUDIT-FAULT": "failed"}, output
    failed = by_id(report)["P3-COMPLETION-AUDIT-FAULT"]
    assert failed["reason"].startswith("plain: new-process recovery made the effect count 2")
    assert failed["evidence"]["operations"]["plain: after the fault"]["state"] == "failed"
    assert report["verdict"]["tool_paths"] == {"write_task": "not offered", "approval": "not certified"}
    assert report["verdict"]["headline"] == "NOT CONFORMANT" and code == 1


def test_recovery_unknown_effect_names_every_executor_it_caught(runs):
    code, report, output, _ = runs["rerun-interrupted"]
    failed = {sid for sid, status in statuses(report).items() if status == "failed"}
    assert failed == {"P3-COMPLETION-AUDIT-FAULT", "RECOVERY-UNKNOWN-EFFECT"}, output
    reason = by_id(report)["RECOVERY-UNKNOWN-EFFECT"]["reason"]
    assert "opaque: recovery after a crash following the effect made the effect count 2" in reason
    assert "plain: recovery after a crash following the effect made the effect count 2" in reason
    assert "dedupe: the dedupe executor, called again under the same key, finds its effect" in reason
    assert code == 1


def test_a_step_kept_without_its_line_or_a_debt_is_a_hidden_step(runs):
    code, report, output, _ = runs["audit-after-commit"]
    failed = {sid for sid, status in statuses(report).items() if status == "failed"}
    assert failed == APPROVAL - {"P0-CONSUMED", "RECOVERY-UNKNOWN-EFFECT"}, output
    reason = by_id(report)["P2-START-AUDIT-FAULT"]["reason"]
    assert reason.startswith("after the fault: the audit append failed and the operation is executing")
    assert "or it rolls back with its line to approved" in reason
    assert code == 1


def load_harness():
    spec = importlib.util.spec_from_file_location("independent_atomic_harness", HARNESS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_harness_request_digest_matches_every_approval_vector(tmp_path):
    """propose through the harness's own line handling, one vector per operation key."""
    harness = load_harness()
    runtime = harness.Runtime(str(tmp_path), {}, "correct")
    for case in json.loads(VECTORS.read_text())["cases"]:
        args = f'{{"operation_key": "vector-{case["id"]}", "executor": "plain", "request": {case["request_json"]}}}'
        response = harness.answer(runtime, f'{{"id": 1, "op": "propose", "args": {args}}}'.encode())
        if "error" in case:
            assert response["error"]["code"] == case["error"]["code"], case["id"]
        else:
            assert response["result"]["request_digest"] == case["digest"], case["id"]
            assert harness.canonical(json.loads(case["request_json"])) == case["canonical"], case["id"]


def test_harness_refuses_a_failpoint_it_cannot_honour(tmp_path):
    env = {"RETRYPROOF_STATE_DIR": str(tmp_path), "RETRYPROOF_FAILPOINTS": "write_task.after_commit=crash"}
    done = subprocess.run([sys.executable, str(HARNESS)], input="", capture_output=True, text=True, env=env, timeout=30)
    assert done.returncode == 2 and "write_task.after_commit=crash" in done.stderr and done.stdout == ""


NO_TOOL_PATH = """
import json, sys
for line in sys.stdin:
    request = json.loads(line)
    result = {"protocol": "retryproof-harness/1", "implementation": {"name": "n", "version": "1", "language": "python"},
              "capabilities": ["legacy"], "failpoints": [], "digest_schema_version": "write-task-v1"}
    print(json.dumps({"id": request["id"], "ok": True, "result": result if request["op"] == "hello" else {}}), flush=True)
"""


def test_a_harness_offering_no_tool_path_fails_its_handshake(tmp_path):
    """PROTOCOL-R20: write_task, approval or both; neither leaves nothing to certify."""
    script = tmp_path / "no_tool_path.py"
    script.write_text(NO_TOOL_PATH)
    done, report = certify(tmp_path / "out", f"{sys.executable} {script}", in_process=True)
    assert done.returncode == 2 and report is None
    assert done.stderr.startswith("error: the harness failed its handshake: hello result violates its schema")
    assert "capabilities" in done.stderr and "Traceback" not in done.stderr
