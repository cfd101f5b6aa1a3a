"""Holes the kit's judgement once had, each kept closed by a runtime that used to slip
through it (``broken_runtimes.py``): before the fix each of these runs PASSED.

- a call whose result broke its schema on one of A4-MULTIPROCESS's threads was dropped
  from the judgement instead of failing it;
- REC-1 and REC-4 were checked only when the runtime offered ``diagnose``;
- one race per A4 scenario let a runtime whose lock only sometimes holds pass;
- every id the kit sent was short and lower-case, so a store that folds ids together
  (by case, or by truncation) was never tested where two ids collide;
- diagnostics were read at thresholds that are always or never passed, so reading that
  refreshes the reservation's age went unseen;
- write_report was only ever retried under its first id, so deduplication by content
  looked like deduplication by id;
- an armed crash that hung or printed garbage counted as fired, so the scenario was
  judged (failed, or even passed) on a window that was never tested;
- a runtime that performs some tamper actions but not others failed the scenario of a
  missing one, although it cannot say more than that it lacks a test hook;
- a FUZZ-MODEL failure answered no to every question it can touch (races included,
  for a digest conflict);
- WT-DIGEST-VECTORS named five disagreeing vectors and kept only counts as evidence.
"""

import os
import re
import sys

import pytest
from kit import by_id, certify, retryproof_here

from retryproof.conformance.fuzz.profiles import DEV, ENV_VAR
from retryproof.conformance.scenarios.retries import A4_IDS_PER_ROUND, A4_ROUNDS

BROKEN = os.path.join(os.path.dirname(__file__), "broken_runtimes.py")


def run_kit(tmp_path, defect, only, *extra):
    # In this process (kit.certify), a hanging harness too (the kit's timeouts bound it, and
    # the test's phase limit bounds the kit); FUZZ-MODEL too, at the budget named here, not
    # at the session's (each fails it at its first calls, whatever the budget).
    harness = f"{sys.executable} -S {BROKEN} {defect}"
    env = {**os.environ, ENV_VAR: DEV}
    done, report = certify(
        tmp_path, harness, "--only", only, *extra, seed=3, formats="json,junit", in_process=True, env=env
    )
    assert report is not None, done.stderr
    return done, report, by_id(report)


def test_a_schema_violation_on_a_parallel_thread_fails_the_scenario(tmp_path):
    """Two processes, each on a thread of its own, are parallel threads: the other six
    of the default eight were six more starts of the same defect."""
    done, _, scenarios = run_kit(tmp_path, "reuse-without-idempotent", "A4-MULTIPROCESS", "--concurrency", "2")
    judged = scenarios["A4-MULTIPROCESS"]
    assert judged["status"] == "failed" and '"idempotent" is missing' in judged["reason"]
    assert done.returncode == 1
    assert "Exception in thread" not in done.stderr


@pytest.mark.parametrize(
    "defect, only, expected",
    [
        # after_task_write: list_tasks shows the task the first attempt wrote; the re-filed retry is caught without diagnose
        (
            "renumber-without-diagnose",
            "CRASH-AFTER-TASK-WRITE",
            {"CRASH-AFTER-TASK-WRITE": ("failed", "not the task TASK-000001")},
        ),
        # with diagnose, both crash points catch the renumbering (the control)
        (
            "renumber",
            "CRASH-AFTER-RESERVE,CRASH-AFTER-TASK-WRITE",
            {
                "CRASH-AFTER-RESERVE": ("failed", "not the preallocated"),
                "CRASH-AFTER-TASK-WRITE": ("failed", "not the task"),
            },
        ),
        ("removes-foreign", "PATH-OCCUPIED-CONFLICT", {"PATH-OCCUPIED-CONFLICT": ("failed", "overwritten or removed")}),
        # after_reserve and a foreign object: only diagnose can tell, so without it they are not verified, and block
        ("renumber-without-diagnose", "CRASH-AFTER-RESERVE", {"CRASH-AFTER-RESERVE": ("skipped", "diagnose")}),
        (
            "removes-foreign-without-diagnose",
            "PATH-OCCUPIED-CONFLICT",
            {"PATH-OCCUPIED-CONFLICT": ("skipped", "diagnose")},
        ),
    ],
)
def test_recovery_identity_is_judged_with_or_without_diagnose(tmp_path, defect, only, expected):
    done, report, scenarios = run_kit(tmp_path, defect, only)
    assert {sid: s["status"] for sid, s in scenarios.items()} == {sid: status for sid, (status, _) in expected.items()}
    for sid, (_, why) in expected.items():
        assert why in scenarios[sid]["reason"], scenarios[sid]["reason"]
    assert {entry["id"] for entry in report["verdict"]["blocking"]} == set(expected)
    assert done.returncode == 1
    # a not-verified MUST scenario is a junit failure, never a green skip
    junit = (tmp_path / "junit.xml").read_text()
    assert f'failures="{len(expected)}"' in junit and 'skipped="0"' in junit


def test_every_a4_race_is_judged(tmp_path):
    """The runtime locks only the first id it sees: in one process the first race passes
    and a later one fails. Which later race shows the unlocked race first depends on
    scheduling (a busy machine can serialize eight callers once), so any race after the
    first will do. Eight processes each lock the first id *they* see, and the ids of a
    round are sent at once, so there any race may show it (under load the first did)."""
    done, _, scenarios = run_kit(tmp_path, "unlocked-after-first-id", "A4-CONCURRENT,A4-MULTIPROCESS")
    ids = A4_IDS_PER_ROUND
    later_race = re.compile(rf"round (1: .*, id [2-{ids}]|[2-{A4_ROUNDS}]: .*, id [1-{ids}]) of {ids}: ")
    any_race = re.compile(rf"round [1-{A4_ROUNDS}]: .*, id [1-{ids}] of {ids}: ")
    for scenario_id, judged in scenarios.items():
        race = later_race if scenario_id == "A4-CONCURRENT" else any_race
        assert judged["status"] == "failed" and race.match(judged["reason"]), judged["reason"]
        assert re.match(rf"round 1: .*, id 1 of {ids}$", list(judged["evidence"]["dispositions"])[0])
    assert done.returncode == 1


def test_concurrency_below_two_is_a_user_error():
    done = retryproof_here("run", "--concurrency", "1")
    assert done.returncode == 2 and "must be at least 2" in done.stderr


def test_a_reuse_must_carry_its_own_submission_id_and_digest(tmp_path):
    """Reused answers name the right task but another submission's id and digest: the
    scenarios (expect_reuse_of) and FUZZ-MODEL's driver both fail them."""
    only = "A2-RESPONSE-LOSS,A4-CONCURRENT,FUZZ-MODEL"
    done, _, scenarios = run_kit(tmp_path, "reuse-of-someone-else", only)
    for sid in only.split(","):
        assert scenarios[sid]["status"] == "failed", (sid, scenarios[sid]["reason"])
        assert (
            'client_submission_id "someone-else"' in scenarios[sid]["reason"]
            and "is not the write-task-v1 digest" in scenarios[sid]["reason"]
        )
    assert done.returncode == 1


def test_a_report_id_bound_to_another_task_or_content_is_refused(tmp_path):
    done, _, scenarios = run_kit(tmp_path, "report-id-answers-anything", "WRITE-REPORT-DEDUP")
    judged = scenarios["WRITE-REPORT-DEDUP"]
    assert (
        judged["status"] == "failed"
        and "the same report id with other content: expected error invalid_request" in judged["reason"]
    ), judged["reason"]
    assert done.returncode == 1


@pytest.mark.parametrize(
    "defect, scenario, says",
    [
        ("case-folded-ids", "DISTINCT-IDS-DISTINCT-TASKS", "expected disposition created"),
        ("truncated-ids", "DISTINCT-IDS-DISTINCT-TASKS", "expected disposition created"),
        # Only the vector with a trailing no-break space reaches a key trimmed as Python
        # trims (the others a header can carry have no whitespace at their ends); shown
        # escaped, as "a " would be another key.
        (
            "trims-id-whitespace",
            "INVALID-KEY",
            '1 of 10 malformed keys were not refused as invalid keys: key "a\\u00a0"',
        ),
        ("diagnose-refreshes", "STALE-RESERVATION-DIAGNOSTICS", "reading them must not refresh it"),
        # A slow reading (a loaded machine) made the refreshed age grow as a true one does:
        # it passed the growth check, and once passed the whole scenario (a CI run at load 4).
        ("diagnose-refreshes-slowly", "STALE-RESERVATION-DIAGNOSTICS", "reading them must not refresh it"),
        ("report-dedup-by-content", "WRITE-REPORT-DEDUP", "deduplicated by content, not by id"),
    ],
)
def test_ids_ages_and_report_ids_are_judged_where_they_could_collide(tmp_path, defect, scenario, says):
    done, _, scenarios = run_kit(tmp_path, defect, scenario)
    judged = scenarios[scenario]
    assert judged["status"] == "failed" and says in judged["reason"], judged["reason"]
    assert done.returncode == 1


def test_every_disagreeing_vector_is_in_the_evidence_whole(tmp_path):
    done, _, scenarios = run_kit(tmp_path, "digest-of-raw-json", "WT-DIGEST-VECTORS")
    judged = scenarios["WT-DIGEST-VECTORS"]
    assert judged["status"] == "failed" and done.returncode == 1
    disagreeing = judged["evidence"]["vectors"]["disagreeing"]
    assert len(disagreeing) > 5
    for item in disagreeing:
        assert set(item) == {"vector", "expected", "got"}
        assert item["vector"] in judged["reason"]
        # whole digests, never cut: "created sha256:" and 64 hex digits
        assert len(item["expected"]) == len(item["got"]) == len("created sha256:") + 64, item
    assert judged["reason"].startswith(f"{len(disagreeing)} of ")


@pytest.mark.parametrize("defect", ["crash-hangs", "crash-prints-garbage"])
def test_an_armed_crash_that_never_fired_is_an_error(tmp_path, defect):
    only = "CRASH-AFTER-TASK-WRITE,A2-CRASH-BEFORE-RESPONSE"
    done, _, scenarios = run_kit(tmp_path, defect, only, "--call-timeout", "0.5")
    for sid in only.split(","):
        judged = scenarios[sid]
        assert judged["status"] == "error", (sid, judged["status"], judged["reason"])
        assert "did not fire" in judged["reason"] and "instead of dying of SIGKILL" in judged["reason"]
    assert done.returncode == 1


def test_a_schema_violation_before_fuzz_model_explores_is_a_failure_like_elsewhere(tmp_path):
    """The opening list_tasks breaks its schema: FUZZ-MODEL said "kit error: ModelViolation"."""
    done, _, scenarios = run_kit(tmp_path, "listing-without-digests", "WT-CREATE,FUZZ-MODEL")
    for sid in ("WT-CREATE", "FUZZ-MODEL"):
        judged = scenarios[sid]
        assert judged["status"] == "failed", (sid, judged["reason"])
        assert "list_tasks result violates its schema" in judged["reason"] and "kit error" not in judged["reason"]
    assert done.returncode == 1


def test_a_tamper_action_hello_leaves_out_is_not_verified_not_failed(tmp_path):
    only = "CONFLICT-SCHEMA,TASK-MISSING-CONFLICT"
    done, report, scenarios = run_kit(tmp_path, "no-receipt-schema-rewrite", only)
    assert scenarios["TASK-MISSING-CONFLICT"]["status"] == "passed"
    skipped = scenarios["CONFLICT-SCHEMA"]
    assert skipped["status"] == "skipped" and "tamper:set_receipt_schema" in skipped["reason"]
    assert skipped["evidence"]["missing"] == ["tamper:set_receipt_schema"]
    # a test hook the runtime lacks is not verified, which blocks: never a pass
    assert [entry["id"] for entry in report["verdict"]["blocking"]] == ["CONFLICT-SCHEMA"]
    assert done.returncode == 1


def test_a_fuzz_digest_conflict_answers_no_to_reuse_not_to_races(raw_request_compare):
    """The run is conftest.py's, which test_messages reads too."""
    done, report = raw_request_compare
    fuzz = by_id(report)["FUZZ-MODEL"]
    assert fuzz["status"] == "failed" and fuzz["evidence"]["checklist_questions"] == ["Q2"], fuzz["reason"]
    answers = {answer["id"]: answer["answer"] for answer in report["checklist"]}
    assert answers["Q2"] == "no" and answers["Q4"] == "yes", answers
    assert "selected): 1 passed · 1 failed (MUST) · 0 errors (MUST) · 0 SHOULD warnings" in done.stdout, done.stdout
