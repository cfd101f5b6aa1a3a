"""The command line as a shell user meets it."""

import subprocess
import sys


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
