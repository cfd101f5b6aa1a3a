"""The command line as a shell user meets it."""

import subprocess
import sys

from kit import retryproof_here

from retryproof.conformance.cli import COMMANDS


def test_a_closed_pipe_ends_the_command_quietly(tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"subject": "s"}\n' * 20000)
    done = subprocess.run(
        f"{sys.executable} -m retryproof.conformance.cli digest --jsonl {tasks} | head -1",
        shell=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout.startswith("sha256:")
    assert done.stderr == ""


def test_no_command_prints_the_commands_and_the_one_to_start_with():
    """It said only "the following arguments are required: COMMAND"."""
    done = retryproof_here()
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.splitlines()
    assert lines[0] == "usage: retryproof COMMAND [OPTIONS]"
    assert "Start with 'retryproof run'" in done.stderr
    listed = [line.split()[0] for line in lines if line.startswith("  ")]
    assert listed == list(COMMANDS)
    assert "Traceback" not in done.stderr and "error:" not in done.stderr
