"""Operator mistakes and interruptions around the report directory: a dangling
symbolic link as ``--out`` is named as such, and a run interrupted before it wrote
anything leaves no empty ``--out`` behind."""

from __future__ import annotations

import os
import signal
import subprocess
import time

from kit import CLI, STDLIB_PYTHON, retryproof_here, until

from retryproof.adapters.procfs import running

FAKE = os.path.join(os.path.dirname(__file__), "fake_harness.py")


def hanging_run(out, started=None):
    """``retryproof run`` into ``out`` against a harness that never answers hello (and
    writes its pid to the file ``started``, when given, once it runs)."""
    return subprocess.Popen(
        [*CLI, "run", "--harness", f"{STDLIB_PYTHON} {FAKE} hang", "--start-timeout", "60", "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "FAKE_STARTED": str(started)} if started else None,
    )


def test_a_dangling_symlink_as_out_is_named_not_file_exists(tmp_path):
    out = tmp_path / "out"
    out.symlink_to(tmp_path / "gone")
    done = retryproof_here("run", "--only", "WT-CREATE", "--out", str(out))
    assert done.returncode == 2, done.stderr
    assert "is a symbolic link to" in done.stderr and "which does not exist" in done.stderr
    assert "File exists" not in done.stderr and "Traceback" not in done.stderr


def test_an_interrupted_run_leaves_no_empty_out_directory(tmp_path):
    out = tmp_path / "out"
    kit = hanging_run(out)
    try:
        until(out.exists, 30)
        assert out.is_dir()  # claimed before the harness starts
        time.sleep(0.5)
        kit.send_signal(signal.SIGTERM)
        _, stderr = kit.communicate(timeout=30)
    finally:
        kit.kill()
    assert kit.returncode == 143, stderr
    assert not out.exists()


def test_an_interrupted_run_keeps_an_out_directory_it_did_not_make(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    started = tmp_path / "started"
    kit = hanging_run(out, started)
    try:
        # Not a fixed sleep: on a loaded machine the kit was not yet running its run after
        # 1.5 s, and the SIGINT met an interpreter still importing. The harness runs: so does the run.
        until(started.exists, 30)
        kit.send_signal(signal.SIGINT)
        kit.communicate(timeout=30)
    finally:
        kit.kill()
    assert kit.returncode == 130 and out.is_dir()
    # The harness ended with the kit: on a loaded machine the SIGINT may meet the kit
    # still inside the harness's start, its pid not yet returned (process_groups).
    harness = int(started.read_text())
    assert until(lambda: not running(harness), 5), f"the harness ({harness}) outlived the interrupted kit"
