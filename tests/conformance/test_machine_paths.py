"""Reports quote a runtime's stderr and messages without the paths of the machine the run
ran on: under the run's directory they are relative, under the home directory they
start with ``~`` (conformance/machine_paths.py), in every report format."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import pytest
from kit import certify

from retryproof.conformance.machine_paths import without_machine_paths

FAKE = Path(__file__).resolve().parent / "fake_harness.py"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ('File "/srv/co/.venv/lib/a.py", line 3', 'File ".venv/lib/a.py", line 3'),
        ("started in /srv/co", "started in ."),
        ("cwd=/srv/co: ok", "cwd=.: ok"),
        ("/usr/lib/python3.11/http/client.py", "/usr/lib/python3.11/http/client.py"),
        ("/home/me/.pyenv/lib/client.py and /home/me", "~/.pyenv/lib/client.py and ~"),
        # Only whole components, never inside a longer path.
        ("/srv/cover/a.py /mnt/srv/co/a.py /home/meg/x", "/srv/cover/a.py /mnt/srv/co/a.py /home/meg/x"),
    ],
)
def test_paths_under_the_run_directory_are_relative_and_the_home_is_tilde(text, shown):
    assert without_machine_paths(text, "/srv/co", "/home/me") == shown


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        # A faulty runtime's message quoting its state directory, a scenario's scratch.
        (
            "cannot open '/tmp/retryproof-a4-multiprocess-fryyggix/state/tasks/TASK-000006.json'",
            "cannot open '{scratch}/state/tasks/TASK-000006.json'",
        ),
        ("cwd /tmp/retryproof-fuzz-model-q_1z8k0a", "cwd {scratch}"),
        # Not the kit's: another program's temporary files, another temporary directory.
        ("/tmp/retryproofs/a /tmp/pytest-1/retryproof-x-abc /var/tmp/retryproof-x-abc", None),
    ],
)
def test_the_kits_scratch_directories_are_one_placeholder(text, shown):
    assert without_machine_paths(text, "/srv/co", "/home/me", "/tmp") == (text if shown is None else shown)


def test_a_scratch_directory_under_the_home_is_the_placeholder_not_a_home_path():
    assert without_machine_paths("/home/me/tmp/retryproof-x-abc/state", "/srv/co", "/home/me", "/home/me/tmp") == (
        "{scratch}/state"
    )


def test_evidence_is_walked_and_only_its_strings_change():
    evidence = {"calls": ({"message": "/srv/co/x: EOF", "ms": 1.5},), "seen": ["/home/me/y", 3, None]}
    assert without_machine_paths(evidence, "/srv/co/", "/home/me") == {
        "calls": ({"message": "x: EOF", "ms": 1.5},),
        "seen": ["~/y", 3, None],
    }


def test_a_root_of_slash_or_relative_is_not_stripped():
    assert without_machine_paths("/srv/co/a", "/", "relative") == "/srv/co/a"


def test_every_report_format_quotes_the_stderr_without_machine_paths(tmp_path, monkeypatch):
    """The kit runs in this process, from the checkout, with the home set as it reads it."""
    checkout, home = tmp_path / "checkout", tmp_path / "home"
    checkout.mkdir()
    home.mkdir()
    monkeypatch.chdir(checkout)
    # A library's traceback: its own files under the checkout (where the run starts; the
    # harness itself runs in a scratch directory), the interpreter's under the home.
    harness = (
        'echo "  File \\"$LIBRARY/tool.py\\", line 3" >&2; '
        'echo "  File \\"$HOME/.pyenv/lib/client.py\\", line 9" >&2; '
        f"exec {shlex.quote(sys.executable)} -S {shlex.quote(str(FAKE))} liar"
    )
    out = tmp_path / "out"
    done, report = certify(
        out,
        f"bash -c {shlex.quote(harness)}",
        "--only",
        "WT-CREATE",
        formats="md,json,junit,html",
        in_process=True,
        env=dict(os.environ, HOME=str(home), LIBRARY=str(checkout / ".venv" / "lib")),
    )
    assert report is not None and report["scenarios"][0]["status"] == "failed", done.stderr
    assert '  File ".venv/lib/tool.py", line 3' in report["scenarios"][0]["stderr"].splitlines()
    for name in ("report.md", "report.json", "junit.xml", "report.html"):
        text = (out / name).read_text(encoding="utf-8")
        assert ".venv/lib/tool.py" in text and "~/.pyenv/lib/client.py" in text, name
        assert str(checkout) not in text and str(home) not in text, name
