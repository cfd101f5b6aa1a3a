"""The directory-fsync check of DURABILITY-TRACE, on written traces and on real ones."""

from __future__ import annotations

import os
import shlex
import sys
import time
from pathlib import Path

import pytest
from kit import REFERENCE, by_id, certify
from reference_whole import WholeRun

from retryproof.conformance.scenarios.durability import (
    check_directory_fsyncs,
    file_events,
    parse_trace,
)


def _check(tmp_path, lines, existing=()):
    (tmp_path / "tasks").mkdir(exist_ok=True)
    root = str(tmp_path)
    text = [line.replace("ROOT", root) for line in lines]
    return check_directory_fsyncs(
        list(file_events(parse_trace(text), root)), root, {f"{root}/{name}" for name in existing}
    )


TEMP_AND_RENAME = [
    '7 openat(AT_FDCWD<ROOT>, "tasks/.tmp-1", O_RDWR|O_CREAT|O_EXCL|O_CLOEXEC, 0600) = 3<ROOT/tasks/.tmp-1>',
    "7 fsync(3<ROOT/tasks/.tmp-1>) = 0",
    '7 rename("ROOT/tasks/.tmp-1", "ROOT/tasks/T1.json") = 0',
]


def test_rename_followed_by_directory_fsync_passes(tmp_path):
    checked, violations = _check(
        tmp_path, [*TEMP_AND_RENAME, "7 fsync(4<ROOT/tasks>) = 0", '7 write(1<pipe:[9]>, "{}\\n", 3) = 3']
    )
    assert (checked, violations) == (1, [])


def test_rename_answered_before_directory_fsync_fails(tmp_path):
    checked, violations = _check(
        tmp_path, [*TEMP_AND_RENAME, '7 write(1<pipe:[9]>, "{}\\n", 3) = 3', "7 fsync(4<ROOT/tasks>) = 0"]
    )
    assert checked == 1 and len(violations) == 1
    assert "the response was sent" in violations[0].describe(str(tmp_path))


def test_interrupted_calls_are_joined_and_lock_files_are_no_stage(tmp_path):
    checked, violations = _check(
        tmp_path,
        [
            '7 openat(AT_FDCWD<ROOT>, "tasks/x.lock", O_RDWR|O_CREAT|O_CLOEXEC, 0644) = 5<ROOT/tasks/x.lock>',
            '7 link("ROOT/tasks/.tmp-2", "ROOT/tasks/T2.json" <unfinished ...>',
            "8 fsync(6<ROOT/tasks/other>) = 0",
            "7 <... link resumed>) = 0",
            "7 fsync(4<ROOT/tasks>) = 0",
        ],
    )
    assert (checked, violations) == (1, [])


DB_OPEN = '7 openat(AT_FDCWD<ROOT>, "ROOT/tasks.db", O_RDWR|O_CREAT|O_CLOEXEC, 0644) = 3<ROOT/tasks.db>'
DB_SYNC = "7 fdatasync(3<ROOT/tasks.db>) = 0"
ANSWER = '7 write(1<pipe:[9]>, "{}\\n", 3) = 3'


def test_an_o_creat_open_of_an_existing_file_creates_nothing(tmp_path):
    """A database opened again with O_CREAT made no directory entry, so it owes no
    directory fsync; the same open of a missing file does."""
    assert _check(tmp_path, [DB_OPEN, DB_SYNC, ANSWER], existing=["tasks.db"]) == (0, [])
    checked, violations = _check(tmp_path, [DB_OPEN, DB_SYNC, ANSWER])
    assert checked == 1 and violations[0].describe(str(tmp_path)).startswith("create tasks.db was not followed")


def test_a_name_the_trace_removed_is_created_again(tmp_path):
    lines = [
        '7 unlink("ROOT/tasks.db") = 0',
        DB_OPEN,
        DB_SYNC,
        ANSWER,
    ]
    checked, violations = _check(tmp_path, lines, existing=["tasks.db"])
    assert checked == 1 and len(violations) == 1


@pytest.mark.parametrize("call", ["fsync", "fdatasync"])
def test_a_directory_sync_right_after_the_create_counts(tmp_path, call):
    """SQLite syncs a new journal's directory with fdatasync; a runtime may sync the
    directory right after the open, before the file's own first fsync."""
    lines = [DB_OPEN, f"7 {call}(4<ROOT>) = 0", DB_SYNC, ANSWER]
    assert _check(tmp_path, lines) == (1, [])


def test_reference_passes(reference_run: WholeRun, strace):
    """The reference's whole run (test_reference_run's) traced it: a run of its own showed that again."""
    result = by_id(reference_run.report())["DURABILITY-TRACE"]
    assert result["status"] == "passed", result["reason"]


def test_a_missing_directory_fsync_fails(tmp_path, strace):
    harness = shlex.join([*REFERENCE, "--fault", "no-directory-fsync"])
    _, report = certify(tmp_path, harness, "--only", "DURABILITY-TRACE", in_process=True)  # strace traces the harness
    result = by_id(report)["DURABILITY-TRACE"]
    assert result["status"] == "failed", result["reason"]


#: strace as strace 6.1 is when it loses a start, every time: it runs a command that
#: ends at once (not the harness) and lives on holding the pipes (``lives_on.py``).
LOSES_EVERY_START = """#!{python} -S
import os, sys
if sys.argv[1:] == ["-V"]:
    print("strace -- version 6.1")
    sys.exit(0)
os.execv({python!r}, [{python!r}, "-S", {lives_on!r}, {python!r}, "-S", "-c", "import sys; sys.exit(3)"])
"""


def test_a_traced_start_strace_lost_is_given_up_at_once_not_at_the_start_bound(tmp_path, monkeypatch):
    """The traced harness's start is watched as CRASH-POINTS' are (``wrapped``): a start
    strace lost ends within moments, and the scenario says strace could not trace here.
    Unwatched, the hello waited its whole bound (6 x the call timeout, 30 s here)."""
    fake = tmp_path / "bin" / "strace"
    fake.parent.mkdir()
    lives_on = Path(__file__).parents[1] / "bindings" / "lives_on.py"
    fake.write_text(LOSES_EVERY_START.format(python=sys.executable, lives_on=str(lives_on)))
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    began = time.monotonic()
    _, report = certify(
        tmp_path / "out", shlex.join(REFERENCE), "--only", "DURABILITY-TRACE", "--call-timeout", "5", in_process=True
    )
    took = time.monotonic() - began
    result = by_id(report)["DURABILITY-TRACE"]
    assert result["status"] == "skipped", result
    assert "strace could not trace the harness here" in result["reason"] and "delayed wait data" in result["reason"]
    assert took < 20, f"the lost start was noticed after {took:.1f}s"
