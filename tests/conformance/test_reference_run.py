"""The complete run against the bundled reference runtime is conformant, and its
reports agree with each other and with the report schema."""

import json

from kit import retryproof_here
from reference_whole import WholeRun

from retryproof.spec import load_spec


def test_reference_runtime_passes_every_scenario(reference_run: WholeRun):
    # The run started in an empty directory, which must stay empty (no .hypothesis/
    # example database: a replay file is FUZZ-MODEL's only persistence).
    done = reference_run.done
    assert done.returncode == 0, done.stdout + done.stderr
    assert reference_run.left_in_cwd == []
    report = reference_run.report()
    statuses = {s["id"]: s["status"] for s in report["scenarios"]}
    # DURABILITY-TRACE needs strace; without it the SHOULD scenario is skipped, not passed.
    expected = {"passed", "skipped"} if statuses.get("DURABILITY-TRACE") == "skipped" else {"passed"}
    assert set(statuses.values()) == expected, statuses
    assert len(statuses) == len(load_spec()["scenarios"])
    assert report["verdict"]["conformant"] and report["verdict"]["complete"]
    assert report["verdict"]["headline"].startswith("CONFORMANT") and report["verdict"]["blocking"] == []
    assert {q["answer"] for q in report["checklist"]} == {"yes"}
    assert (reference_run.out / "report.md").read_text().count("| passed ") == list(statuses.values()).count("passed")
    # The history shows the faults the kit caused between the calls.
    crash = next(s for s in report["scenarios"] if s["id"] == "CRASH-AFTER-COMMIT")["calls"]
    faults = [(call["op"], call.get("message")) for call in crash if call["kind"] == "fault"]
    assert faults == [("start", "armed write_task.after_commit=crash"), ("kill", None), ("start", None)], faults
    assert retryproof_here("validate-report", str(reference_run.out / "report.json")).returncode == 0


def test_baseline_of_a_passing_scenario_is_stale(tmp_path):
    baseline = tmp_path / "baseline.yaml"
    baseline.write_text("expected_failures: [WT-CREATE]\n")
    done = retryproof_here("run", "--only", "WT-CREATE", "--baseline", str(baseline), "--out", str(tmp_path))
    assert done.returncode == 1
    assert "stale baseline entry WT-CREATE" in done.stdout
    assert json.loads((tmp_path / "report.json").read_text())["scenarios"][0]["baseline"] == "xpass"


def test_a_run_in_the_callers_process_leaves_its_collector_as_it_found_it(tmp_path):
    """``run`` freezes what it loaded for its own duration only: a process that runs the
    kit in its own (a test, the pytest plugin's caller) must still collect its garbage,
    and a caller that froze its own heap (a pytest-xdist worker, after its collection)
    keeps it frozen."""
    import gc

    def run(out: str) -> None:
        done = retryproof_here("run", "--only", "WT-CREATE", "--seed", "1", "--format", "json", "--out", out)
        assert done.returncode == 0, done.stderr

    gc.unfreeze()  # as a caller that froze nothing
    try:
        run(str(tmp_path / "thawed"))
        assert gc.get_freeze_count() == 0, "the run left what it loaded frozen"
    finally:
        gc.freeze()  # the worker's heap again, as its collection left it (tests/conftest.py)
    run(str(tmp_path / "frozen"))
    assert gc.get_freeze_count() > 0, "the run thawed its caller's frozen heap"
