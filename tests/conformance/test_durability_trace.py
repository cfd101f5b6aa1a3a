"""The directory-fsync check of DURABILITY-TRACE, on written traces and on real ones."""

from __future__ import annotations

import json
import shutil
import sys

import pytest

from retryproof.conformance.cli import main as cli
from retryproof.conformance.scenarios.durability import (
    check_directory_fsyncs,
    file_events,
    parse_trace,
)


def _check(tmp_path, lines):
    (tmp_path / "tasks").mkdir(exist_ok=True)
    root = str(tmp_path)
    text = [line.replace("ROOT", root) for line in lines]
    return check_directory_fsyncs(list(file_events(parse_trace(text), root)), root)


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


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")
@pytest.mark.parametrize("fault, status", [(None, "passed"), ("no-directory-fsync", "failed")])
def test_reference_passes_and_missing_fsync_fails(tmp_path, fault, status):
    harness = f"{sys.executable} -m retryproof.reference_impl" + (f" --fault {fault}" if fault else "")
    cli(
        [
            "run",
            "--only",
            "DURABILITY-TRACE",
            "--seed",
            "1",
            "--out",
            str(tmp_path),
            "--format",
            "json",
            "--harness",
            harness,
        ]
    )
    (result,) = json.loads((tmp_path / "report.json").read_text())["scenarios"]
    assert result["status"] == status, result["reason"]
