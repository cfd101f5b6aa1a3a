"""The approval scenarios against real harness processes: the reference passes all
six and reproduces the field report's tables with its own numbers (read from the
reference's whole run, ``reference_run``); the bundled variant with the report's P3
defect fails P3 and nothing else."""

from __future__ import annotations

from typing import Any

import pytest
from kit import REFERENCE, once_per_session
from reference_whole import WholeRun

from retryproof.conformance.options import Options
from retryproof.conformance.runner import probe, run
from retryproof.conformance.scenarios.approval_steps import (
    CONTROL_TABLE,
    CRASH_TABLE,
    PROBE_TABLE,
)
from retryproof.spec import load_spec

# The catalogue's approval scenarios: a new one joins these runs without an edit here.
APPROVAL_IDS = tuple(entry["id"] for entry in load_spec()["scenarios"] if "approval" in entry["needs"])
#: An approval scenario's result as report.json holds it: id, status, reason, evidence.
Scenario = dict[str, Any]


@pytest.fixture(scope="module")
def reference(reference_run: WholeRun) -> list[Scenario]:
    return [scenario for scenario in reference_run.report()["scenarios"] if scenario["id"] in APPROVAL_IDS]


@pytest.fixture(scope="module")
def faulty(tmp_path_factory) -> list[Scenario]:
    return once_per_session(tmp_path_factory, "approval-p3-defect", lambda _: p3_defect_run())


def p3_defect_run() -> list[Scenario]:
    command = (*REFERENCE, "--fault", "p3-audit-reclassifies")
    options = Options(command=command, target="--fault p3-audit-reclassifies", seed=7, only=APPROVAL_IDS)
    finished = run(options, probe(options), [])
    return [
        {"id": result.entry.id, "status": result.status, "reason": result.reason, "evidence": result.evidence}
        for result in finished.results
    ]


def statuses(scenarios: list[Scenario]) -> dict[str, str]:
    return {scenario["id"]: scenario["status"] for scenario in scenarios}


def rows(scenarios: list[Scenario], title: str) -> dict[str, list]:
    """The merged rows of one evidence table, keyed by their first cell."""
    return {
        row[0]: row
        for scenario in scenarios
        for table in scenario["evidence"].get("tables", ())
        if table["title"] == title
        for row in table["rows"]
    }


def test_the_reference_passes_every_approval_scenario(reference):
    assert statuses(reference) == dict.fromkeys(APPROVAL_IDS, "passed"), [(s["id"], s["reason"]) for s in reference]


def test_the_reference_reproduces_the_probe_table_with_its_own_numbers(reference):
    probes = rows(reference, PROBE_TABLE)
    # probe: (caller, state, effects) of this runtime; the seed's columns stay beside them.
    assert {probe: (row[3], row[5], row[7]) for probe, row in probes.items()} == {
        "P0": ("APPROVAL_ALREADY_CONSUMED", "succeeded", 1),
        "P1": ("error (AUDIT_WRITE_FAILED)", "approved", 0),
        "P2": ("error (AUDIT_WRITE_FAILED)", "executing", 0),
        # The fix: the record keeps "succeeded" (audit pending), never "failed".
        "P3": ("error (AUDIT_WRITE_FAILED)", "succeeded", 1),
    }
    assert {probe: (row[2], row[4], row[6]) for probe, row in probes.items()} == {
        "P0": ("APPROVAL_ALREADY_CONSUMED", "succeeded", 1),
        "P1": ("error", "approved", 0),
        "P2": ("error", "executing", 0),
        "P3": ("error", "failed", 1),
    }


def test_the_reference_keeps_every_executor_control_at_one_effect(reference):
    controls = rows(reference, CONTROL_TABLE)
    # control: (after fault, after recovery, calls, recovery) of this runtime.
    assert {control: (row[2], row[4], row[6], row[8]) for control, row in controls.items()} == {
        "no dedupe, same digest": (1, 1, 1, "reconciled"),
        "dedupe, same digest": (1, 1, 1, "reconciled"),
        "changed digest": (1, 1, 1, "stale"),
    }


def test_the_reference_keeps_one_effect_when_any_executor_crashes_after_it(reference):
    crashes = rows(reference, CRASH_TABLE)
    # executor: (effects after crash, after recovery, calls, recovery, state).
    assert {executor: tuple(row[1:4]) + tuple(row[5:]) for executor, row in crashes.items()} == {
        "opaque": (1, 1, 1, "needs_verification", "needs_verification"),
        "plain": (1, 1, 1, "reconciled", "succeeded"),
        # The dedupe executor is called again under its key and finds its effect.
        "dedupe": (1, 1, 2, "reconciled", "succeeded"),
    }


def test_the_p3_defect_fails_p3_and_nothing_else(faulty):
    assert statuses(faulty) == {**dict.fromkeys(APPROVAL_IDS, "passed"), "P3-COMPLETION-AUDIT-FAULT": "failed"}
    p3 = next(scenario for scenario in faulty if scenario["id"] == "P3-COMPLETION-AUDIT-FAULT")
    assert "effect count 2" in p3["reason"]
    # The defect reproduces the field report's restart table, call for call.
    controls = rows(faulty, CONTROL_TABLE)
    assert {control: (row[2], row[4], row[6]) for control, row in controls.items()} == {
        "no dedupe, same digest": (1, 2, 2),
        "dedupe, same digest": (1, 1, 2),
        "changed digest": (1, 1, 1),
    }
    assert rows(faulty, PROBE_TABLE)["P3"][5] == "failed"


def test_the_markdown_report_merges_each_table_across_scenarios(reference_run: WholeRun):
    report = (reference_run.out / "report.md").read_text()
    probes = report[report.index(f"## {PROBE_TABLE}") : report.index(f"## {CONTROL_TABLE}")]
    assert "From P0-CONSUMED, P1-APPROVAL-AUDIT-FAULT, P2-START-AUDIT-FAULT, P3-COMPLETION-AUDIT-FAULT." in probes
    assert [line.split("|")[1].strip() for line in probes.splitlines() if line.startswith("| P")] == [
        "P0",
        "P1",
        "P2",
        "P3",
    ]
    controls = report[report.index(f"## {CONTROL_TABLE}") : report.index(f"## {CRASH_TABLE}")]
    assert sum(line.startswith("| ") for line in controls.splitlines()) == 4  # header and three controls
    crashes = report[report.index(f"## {CRASH_TABLE}") : report.index("## Evidence")]
    assert sum(line.startswith("| ") for line in crashes.splitlines()) == 4  # header and three executors
