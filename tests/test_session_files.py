"""What a test session leaves outside its tests (tests/session_files.py): the next session
removes what a session killed with SIGKILL left behind, and only that."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from session_files import session_path, sweep_orphans

STEM = "retryproof-example-"


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-S", "-c", "import time; time.sleep(60)"])
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    return process.pid


def test_a_killed_sessions_folder_and_file_are_removed_and_nothing_else(tmp_path):
    dead = _dead_pid()
    (tmp_path / f"{STEM}{dead}-abc" / "cpython-312" / "x").mkdir(parents=True)
    (tmp_path / f"{STEM}{dead}-def").write_text("lock")
    mine = session_path(STEM, str(tmp_path), folder=True)
    lock = session_path(STEM, str(tmp_path), folder=False)
    kept = [
        "retryproof-example-abc123",  # an older session's name, no process id in it
        f"{STEM}{dead}",  # not a session_path name
        f"other-{dead}-abc",
    ]
    for name in kept:
        (tmp_path / name).mkdir()

    removed = sweep_orphans(STEM, str(tmp_path))

    assert sorted(removed) == [f"{STEM}{dead}-abc", f"{STEM}{dead}-def"]
    assert sorted(os.listdir(tmp_path)) == sorted([os.path.basename(mine), os.path.basename(lock), *kept])
    assert os.path.isdir(mine) and os.path.isfile(lock)
    assert os.path.basename(mine).startswith(f"{STEM}{os.getpid()}-")
