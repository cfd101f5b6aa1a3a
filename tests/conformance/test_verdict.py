"""The verdict rules of spec ``verdict``: what blocks, what does not, and the baseline."""

import pytest

from retryproof.conformance.catalogue import catalogue, entry
from retryproof.conformance.events import ScenarioResult
from retryproof.conformance.verdict import judge


def result(scenario_id, status, missing=()):
    evidence = {"missing": list(missing)} if missing else {}
    return ScenarioResult(
        entry(scenario_id), status, None if status == "passed" else "why", 0.1, "retryproof run", evidence
    )


def all_passed(**overrides):
    return [overrides.get(item.id) or result(item.id, "passed") for item in catalogue()]


def test_all_passed_is_conformant_and_complete():
    verdict = judge(all_passed())
    assert verdict.conformant and verdict.complete and verdict.exit_code == 0
    assert {answer.answer for answer in verdict.checklist} == {"yes"}


def test_missing_optional_capability_does_not_block():
    verdict = judge(all_passed(**{"LEGACY-NO-ID": result("LEGACY-NO-ID", "skipped", ["legacy"])}))
    assert verdict.conformant and verdict.exit_code == 0
    assert [sid for sid, _ in verdict.not_covered] == ["LEGACY-NO-ID"]
    assert next(a for a in verdict.checklist if a.question == "Q6").answer == "not applicable"


def test_missing_failpoint_or_test_hook_blocks():
    skipped = result("CRASH-AFTER-RESERVE", "skipped", ["failpoint:write_task.after_reserve"])
    verdict = judge(all_passed(**{"CRASH-AFTER-RESERVE": skipped}))
    assert not verdict.conformant and verdict.exit_code == 1
    assert next(a for a in verdict.checklist if a.question == "Q5").answer == "unverified"


def test_through_a_binding_harness_hooks_do_not_block_but_stay_unverified():
    hooks = {
        "CRASH-AFTER-RESERVE": result(
            "CRASH-AFTER-RESERVE", "skipped", ["diagnose", "failpoint:write_task.after_reserve"]
        ),
        "INVALID-INPUT": result("INVALID-INPUT", "skipped", ["protocol:framing"]),
        # No approval at all: not covered, whatever hooks the scenario also lacks.
        "P1-APPROVAL-AUDIT-FAULT": result(
            "P1-APPROVAL-AUDIT-FAULT", "skipped", ["approval", "failpoint:approval.audit_approved"]
        ),
    }
    black_box = judge(all_passed(**hooks), black_box=True)
    assert black_box.conformant and black_box.exit_code == 0
    assert black_box.headline.startswith("CONFORMANT (black-box: 2 MUST scenarios")
    assert [sid for sid, _ in black_box.needs_harness] == ["CRASH-AFTER-RESERVE", "INVALID-INPUT"]
    assert [sid for sid, _ in black_box.not_covered] == ["P1-APPROVAL-AUDIT-FAULT"]
    assert next(a for a in black_box.checklist if a.question == "Q5").answer == "unverified"
    # The same skips through a harness block.
    assert not judge(all_passed(**hooks)).conformant


def test_error_blocks_and_should_failure_only_warns():
    verdict = judge(all_passed(**{"WT-CREATE": result("WT-CREATE", "error")}))
    assert not verdict.conformant
    verdict = judge(all_passed(**{"DURABILITY-TRACE": result("DURABILITY-TRACE", "failed")}))
    assert verdict.conformant and [sid for sid, _ in verdict.warnings] == ["DURABILITY-TRACE"]
    # a conformant verdict never answers no: the SHOULD failure only qualifies the yes
    answers = {a.question: a.answer for a in verdict.checklist}
    assert answers["Q1"] == "yes (with warnings)" and "no" not in answers.values()
    verdict = judge(all_passed(**{"CRASH-AFTER-COMMIT": result("CRASH-AFTER-COMMIT", "failed")}))
    assert next(a for a in verdict.checklist if a.question == "Q1").answer == "no"


def test_not_applicable_neither_passes_nor_blocks():
    verdict = judge(
        all_passed(**{"STALE-RESERVATION-DIAGNOSTICS": result("STALE-RESERVATION-DIAGNOSTICS", "not_applicable")})
    )
    assert verdict.conformant


def test_baseline_excuses_listed_failures_but_never_the_verdict():
    results = all_passed(**{"A4-CONCURRENT": result("A4-CONCURRENT", "failed")})
    verdict = judge(results, baseline={"A4-CONCURRENT"})
    assert not verdict.conformant and verdict.exit_code == 0 and verdict.expected_failures == ("A4-CONCURRENT",)
    stale = judge(all_passed(), baseline={"A4-CONCURRENT"})
    assert stale.conformant and stale.exit_code == 1 and stale.stale_baseline == ("A4-CONCURRENT",)


def test_a_partial_run_is_never_conformant_but_exits_0_when_nothing_selected_blocks():
    verdict = judge([result("WT-CREATE", "passed")])
    assert not verdict.conformant and not verdict.complete and verdict.exit_code == 0
    assert verdict.headline.startswith("PARTIAL (partial run: 1 of ")
    failing = judge([result("WT-CREATE", "passed"), result("A2-RESPONSE-LOSS", "failed")])
    assert failing.exit_code == 1 and failing.headline.startswith("NOT CONFORMANT (partial run: 2 of ")


def test_a_runtime_without_approval_is_not_blocked_by_approval_failpoints():
    """Approval scenarios need approval and approval.* failpoints; a runtime without
    approval has neither, and the scenarios do not apply to it."""
    approval_scenarios = [item for item in catalogue() if "approval" in item.capabilities]
    assert any(item.failpoints for item in approval_scenarios)
    skipped = {
        item.id: result(item.id, "skipped", ["approval", *(f"failpoint:{name}" for name in item.failpoints)])
        for item in approval_scenarios
    }
    verdict = judge(all_passed(**skipped))
    assert verdict.conformant and verdict.exit_code == 0 and verdict.blocking == ()
    assert {sid for sid, _ in verdict.not_covered} == set(skipped)


def test_a_declared_optional_feature_without_its_failpoint_blocks():
    """Declaring approval but not its failpoint, or lacking another hook besides an
    optional feature, leaves the scenario applying and unverified."""
    item = next(item for item in catalogue() if "approval" in item.capabilities and item.failpoints)
    for scenario_id, missing in (
        (item.id, [f"failpoint:{item.failpoints[0]}"]),
        ("LEGACY-NO-ID", ["legacy", "tamper"]),
        ("LEGACY-NO-ID", ["legacy", "failpoint:approval.audit_started"]),
    ):
        verdict = judge(all_passed(**{scenario_id: result(scenario_id, "skipped", missing)}))
        assert [sid for sid, _ in verdict.blocking] == [scenario_id], missing


@pytest.mark.parametrize("path", ["write_task", "approval"])
def test_a_tool_path_not_offered_is_not_covered_whatever_else_is_missing(path):
    """VERDICT-R16: a runtime without a tool path is not judged on its scenarios, even
    those that also need hooks it lacks; the verdict certifies only what it offers."""
    items = [item for item in catalogue() if path in item.capabilities]
    skipped = {item.id: result(item.id, "skipped", [path, "diagnose", "tamper", "tool:strace"]) for item in items}
    other = "approval" if path == "write_task" else "write_task"
    verdict = judge(all_passed(**skipped), capabilities=[other, "diagnose"])
    assert verdict.conformant and verdict.blocking == ()
    assert {sid for sid, _ in verdict.not_covered} == set(skipped)
    assert dict(verdict.tool_paths) == {path: "not offered", other: "certified"}
    assert verdict.headline == f"CONFORMANT ({other} only: {path} not offered, not certified)"


def test_without_write_task_no_checklist_question_answers_yes():
    """VERDICT-R18: approval scenarios that passed answer nothing about task creation;
    a MUST failure behind a question still answers no."""
    items = [item for item in catalogue() if "write_task" in item.capabilities]
    skipped = {item.id: result(item.id, "skipped", ["write_task"]) for item in items}
    passing = judge(all_passed(**skipped), capabilities=["approval"])
    assert {answer.answer for answer in passing.checklist} == {"unanswered"}
    failing = judge(
        all_passed(**skipped, **{"P3-COMPLETION-AUDIT-FAULT": result("P3-COMPLETION-AUDIT-FAULT", "failed")}),
        capabilities=["approval"],
    )
    answers = {answer.question: answer.answer for answer in failing.checklist}
    assert answers["Q1"] == answers["Q2"] == "no" and answers["Q4"] == "unanswered"
    assert not failing.conformant and dict(failing.tool_paths) == {
        "write_task": "not offered",
        "approval": "not certified",
    }
    assert failing.headline == "NOT CONFORMANT"


def test_a_runtime_offering_both_tool_paths_keeps_its_headline():
    verdict = judge(all_passed(), capabilities=["write_task", "approval", "legacy"])
    assert verdict.headline == "CONFORMANT" and verdict.certified == ("write_task", "approval")


def test_a_fuzz_failure_answers_no_only_to_the_questions_its_history_exercised():
    fuzz = ScenarioResult(entry("FUZZ-MODEL"), "failed", "why", 0.1, "retryproof run", {"checklist_questions": ["Q2"]})
    answers = {a.question: a.answer for a in judge(all_passed(**{"FUZZ-MODEL": fuzz})).checklist}
    assert answers["Q2"] == "no"
    assert answers["Q4"] == answers["Q1"] == answers["Q3"] == answers["Q5"] == "yes"
    # without that evidence (an error, say) it still counts against every question it names
    errored = {
        a.question: a.answer for a in judge(all_passed(**{"FUZZ-MODEL": result("FUZZ-MODEL", "error")})).checklist
    }
    assert {errored[q] for q in ("Q1", "Q2", "Q3", "Q4", "Q5")} == {"no"}
