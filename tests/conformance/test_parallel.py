"""``--jobs N``: results in catalogue order whatever order they finish in, *alone*
scenarios never overlapping another, and a run whose lines, statuses and verdict do
not depend on the number of jobs."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import threading
import time

import pytest

from retryproof.conformance.scenarios import registry
from retryproof.conformance.schedule import in_order


def test_results_come_back_in_the_given_order_however_they_finish():
    delays = [random.Random(7).uniform(0, 0.05) for _ in range(12)]
    delays.reverse()  # the first items finish last

    def compute(index: int) -> int:
        time.sleep(delays[index])
        return index * 10

    assert list(in_order(list(range(12)), compute, jobs=4)) == [(index, index * 10) for index in range(12)]


def test_an_alone_item_overlaps_no_other_and_long_items_start_first():
    spans: dict[str, tuple[float, float]] = {}
    lock = threading.Lock()
    items = ["a", "b", "ALONE-1", "c", "LONG", "d", "ALONE-2", "e"]

    def compute(item: str) -> str:
        began = time.monotonic()
        time.sleep(0.03)
        with lock:
            spans[item] = (began, time.monotonic())
        return item

    results = list(
        in_order(items, compute, jobs=3, alone=lambda item: item.startswith("ALONE"), long=lambda item: item == "LONG")
    )
    assert [item for item, _ in results] == items
    for alone in ("ALONE-1", "ALONE-2"):
        start, end = spans[alone]
        for other, (other_start, other_end) in spans.items():
            if other != alone:
                assert other_end <= start or other_start >= end, f"{other} overlapped {alone}"
    # The long item is in the first wave after the alone ones, not left for the end.
    assert spans["LONG"][0] < min(spans[item][1] for item in "abcde")


def test_the_a4_races_and_the_strace_run_are_scheduled_alone():
    functions = registry()
    alone = {scenario_id for scenario_id, function in functions.items() if getattr(function, "runs_alone", False)}
    assert alone == {"A4-CONCURRENT", "A4-MULTIPROCESS", "DURABILITY-TRACE"}
    assert getattr(functions["FUZZ-MODEL"], "runs_long", False)


def _run(tmp_path, jobs: int) -> tuple[list[str], dict]:
    out = tmp_path / f"jobs-{jobs}"
    done = subprocess.run(
        [
            *(sys.executable, "-m", "retryproof.conformance.cli", "run"),
            *("--harness", f"{sys.executable} -m retryproof.reference_impl --fault no-idempotency"),
            *("--only", "WT-CREATE,A2-RESPONSE-LOSS,A4-CONCURRENT,RESTART-REUSE,CONFLICT-DIGEST,LEGACY-NO-ID"),
            *("--seed", "5", "--jobs", str(jobs), "--out", str(out)),
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 1, done.stdout + done.stderr  # the faulty runtime fails
    # Durations are the one thing allowed to differ.
    lines = [re.sub(r"\d+\.\d+s", "<s>", line) for line in done.stdout.splitlines() if not line.startswith("wrote ")]
    return lines, json.loads((out / "report.json").read_text())


@pytest.mark.parametrize("jobs", [3])
def test_a_parallel_run_prints_and_reports_what_a_serial_run_does(tmp_path, jobs):
    serial_lines, serial = _run(tmp_path, 1)
    parallel_lines, parallel = _run(tmp_path, jobs)
    assert parallel_lines == serial_lines
    assert [(s["id"], s["status"], s["reason"]) for s in parallel["scenarios"]] == [
        (s["id"], s["status"], s["reason"]) for s in serial["scenarios"]
    ]
    assert parallel["verdict"] == serial["verdict"]
    assert {s["id"]: s["status"] for s in serial["scenarios"]}["A2-RESPONSE-LOSS"] == "failed"


def test_jobs_must_be_a_positive_integer():
    done = subprocess.run(
        [sys.executable, "-m", "retryproof.conformance.cli", "run", "--jobs", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "error: argument --jobs: 0 must be at least 1" in done.stderr and "Traceback" not in done.stderr
