"""The directory-fsync check of DURABILITY-TRACE, on written traces and on real ones."""

from __future__ import annotations

import shlex

import pytest
from kit import REFERENCE, by_id, certify

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


@pytest.mark.parametrize("fault, status", [(None, "passed"), ("no-directory-fsync", "failed")])
def test_reference_passes_and_missing_fsync_fails(tmp_path, strace, fault, status):
    harness = shlex.join([*REFERENCE, *(["--fault", fault] if fault else [])])
    _, report = certify(tmp_path, harness, "--only", "DURABILITY-TRACE", in_process=True)  # strace traces the harness
    result = by_id(report)["DURABILITY-TRACE"]
    assert result["status"] == status, result["reason"]
