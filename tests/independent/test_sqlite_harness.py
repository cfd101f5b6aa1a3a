"""DURABILITY-TRACE on a runtime nobody on the team wrote: SQLite in WAL mode.

``sqlite_harness/harness.py`` was written from ``spec/`` alone (see its README). SQLite
opens its database with ``O_CREAT`` every time, and syncs a new WAL file's directory
itself with ``fdatasync``; the check once blamed both. With ``synchronous=FULL`` the
runtime makes every commit durable and must pass; with ``synchronous=OFF`` it never
syncs anything and must not.
"""

from pathlib import Path

import pytest
from kit import STDLIB_PYTHON, by_id, certify

HARNESS = Path(__file__).parent / "sqlite_harness" / "harness.py"


def run_kit(tmp_path, only, *harness_args):
    command = " ".join([STDLIB_PYTHON, str(HARNESS), *harness_args])
    done, report = certify(tmp_path, command, "--only", only, in_process=True)  # kit.certify: in this process
    return done, by_id(report)


@pytest.mark.parametrize(
    "synchronous, status, says",
    [("full", "passed", None), ("off", "failed", "nothing was made durable")],
)
def test_durability_trace_judges_sqlite_by_its_syncs(tmp_path, strace, synchronous, status, says):
    _, scenarios = run_kit(tmp_path, "DURABILITY-TRACE", "--synchronous", synchronous)
    judged = scenarios["DURABILITY-TRACE"]
    assert judged["status"] == status, judged["reason"]
    if says:
        assert says in judged["reason"]
    else:
        # the WAL file SQLite created is the durable step, and its directory was synced
        assert judged["evidence"]["durable_steps_checked"] >= 1 and judged["evidence"]["violations"] == []


def test_the_sqlite_runtime_is_a_real_runtime(tmp_path):
    """The control: the runtime the trace judges keeps the contract's basics. It
    performs only the remove_task tamper action and says so in hello, so the scenario
    needing set_receipt_schema is not verified instead of failed."""
    only = (
        "WT-CREATE,WT-DIGEST-VECTORS,A2-RESPONSE-LOSS,A4-CONCURRENT,RESTART-REUSE,CONFLICT-DIGEST,INVALID-INPUT,"
        "TASK-MISSING-CONFLICT"
    )
    done, scenarios = run_kit(tmp_path, only + ",CONFLICT-SCHEMA")
    assert {sid: s["status"] for sid, s in scenarios.items()} == {
        **dict.fromkeys(only.split(","), "passed"),
        "CONFLICT-SCHEMA": "skipped",
    }
    assert scenarios["CONFLICT-SCHEMA"]["reason"] == "the runtime does not provide tamper:set_receipt_schema"
    assert done.returncode == 1  # a MUST scenario not verified blocks
