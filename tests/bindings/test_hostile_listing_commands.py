"""A binding's listing command is a foreign process like a server: its output is
bounded, its wait is bounded (and named when it runs out), and what it starts ends
with it, its whole process group, after a normal run and after SIGINT alike."""

from __future__ import annotations

import contextlib
import os
import random
import resource
import signal
import subprocess
import sys
import time

import pytest
from binding_helpers import HERE, run_binding, write_binding
from kit import until
from test_binding_http import http_binding

from retryproof.adapters.procfs import stat_fields, visible_pids

#: Without site: it needs only the standard library (binding_helpers.STDLIB).
LIST_EFFECTS = f'exec {sys.executable} -S {HERE / "list_effects.py"} "$RETRYPROOF_STATE_DIR"'


def listing_binding(tmp_path, command: list[str]):
    document = http_binding("replays_any_body.py", "listing-under-test")
    document["listing"].update({"command": command, "items": "body"})
    del document["listing"]["get"]
    return write_binding(tmp_path, document)


def gone_within(marker: str, seconds: float) -> list[int]:
    """Pids whose command line still holds ``marker`` after up to ``seconds``: a process
    SIGKILLed a moment ago may not have died yet on a loaded machine."""
    until(lambda: not alive_with(marker), seconds)
    return alive_with(marker)


def alive_with(marker: str) -> list[int]:
    """Pids whose command line holds ``marker``."""
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as handle:
                    if marker.encode() in handle.read():
                        pids.append(int(name))
            except OSError:
                pass
    return pids


@pytest.fixture
def sleeper():
    """A sleep's length no other process runs, whose processes are SIGKILLed at the
    test's end: a test that fails before its own check must not leave them running."""
    seconds = f"{random.randint(10**6, 10**7)}.5"
    yield seconds
    for pid in alive_with(seconds):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def end_kit(kit: subprocess.Popen) -> None:
    """SIGKILL a kit started as a process and every process group it started, however
    the test ends: the kit ends its groups itself only when it is let run to its end
    (seen under load: a SIGKILL of the kit alone left its server and listing command
    running 50 minutes). Stopped first, it starts no group between their listing and
    its death."""
    if kit.poll() is None:
        kit.send_signal(signal.SIGSTOP)
        groups = [pid for pid in visible_pids() if (stat_fields(pid) or ["", ""])[1] == str(kit.pid)]
        kit.kill()
        for group in groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)
    kit.wait(timeout=30)


def test_what_a_listing_command_starts_ends_with_it(tmp_path, sleeper):
    seconds = sleeper
    binding = listing_binding(tmp_path, ["sh", "-c", f"sleep {seconds} >/dev/null 2>&1 & {LIST_EFFECTS}"])
    done, report = run_binding(tmp_path, binding, "WT-CREATE", "--call-timeout", "5")
    assert report["scenarios"][0]["status"] in ("passed", "failed"), done.stdout
    assert gone_within(seconds, 5) == []


def test_a_listing_command_that_prints_without_end_is_cut_off(tmp_path):
    binding = listing_binding(tmp_path, ["yes"])
    limit = 1024 * 1024 * 1024
    kit = subprocess.Popen(
        [sys.executable, "-m", "retryproof.conformance.cli", "run", "--binding", str(binding), "--only", "WT-CREATE"]
        + ["--out", str(tmp_path / "out"), "--format", "json", "--call-timeout", "10"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit)),
    )
    try:
        stdout, stderr = kit.communicate(timeout=120)
    finally:
        end_kit(kit)
    assert "Traceback" not in stderr, stderr
    assert "the listing command printed more than 4194304 bytes" in stdout, stdout


def test_a_hung_listing_command_is_named_not_no_answer(tmp_path, sleeper):
    binding = listing_binding(tmp_path, ["sleep", sleeper])
    done, report = run_binding(tmp_path, binding, "WT-CREATE", "--call-timeout", "2")
    scenario = report["scenarios"][0]
    assert scenario["status"] == "error"
    assert "the listing command did not end within 1.6s" in scenario["reason"], scenario["reason"]


def test_a_listing_command_that_prints_nothing_is_named_as_such(tmp_path):
    """Exit 0 with no output is no listing, not an answer whose parts are missing."""
    binding = listing_binding(tmp_path, ["sh", "-c", "echo starved >&2"])
    done, report = run_binding(tmp_path, binding, "WT-CREATE", "--call-timeout", "5")
    scenario = report["scenarios"][0]
    assert scenario["status"] == "failed", done.stdout
    assert "the listing command exited 0 but printed nothing: starved" in scenario["reason"], scenario["reason"]


def test_sigint_during_a_listing_command_ends_its_group_at_once(tmp_path, sleeper):
    seconds = sleeper
    binding = listing_binding(tmp_path, ["sh", "-c", f"sleep {seconds}; {LIST_EFFECTS}"])
    kit = subprocess.Popen(
        [sys.executable, "-m", "retryproof.conformance.cli", "run", "--binding", str(binding), "--only", "WT-CREATE"]
        + ["--out", str(tmp_path / "out"), "--call-timeout", "60", "--start-timeout", "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert until(lambda: alive_with(seconds), 60), "the listing command never started"
        began = time.monotonic()
        kit.send_signal(signal.SIGINT)
        _, stderr = kit.communicate(timeout=30)
        took = time.monotonic() - began
    finally:
        end_kit(kit)
    assert kit.returncode == 130, stderr
    assert took < 5, took  # it used to take 8.3 s
    assert gone_within(seconds, 5) == []
