"""The ``retryproof digest`` command: exit codes, error lines, no tracebacks."""

import json
import subprocess
import sys

import pytest

from spec.digest import request_digest


def retryproof(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "conformance.cli", *args], input=stdin, capture_output=True, timeout=60
    )


def test_single_task_prints_its_digest():
    task = {"subject": "Fix login", "recipient": "DEV"}
    done = retryproof("digest", "-", stdin=json.dumps(task).encode())
    assert done.returncode == 0
    assert done.stdout.decode().strip() == request_digest(task)


def test_canonical_prints_the_hashed_text():
    done = retryproof("digest", "--canonical", stdin=b'{"subject": "a\\r\\nb"}')
    assert done.returncode == 0
    assert json.loads(done.stdout)["subject"] == "a\nb"
    assert done.stdout.decode().startswith('{"body":null,"depends_on":[]')


@pytest.mark.parametrize(
    "text, field",
    [
        (b'{"subject": 3}', "task.subject"),
        (b'{"trace_id": "t-1"}', "task.trace_id"),
        (b'{"subject": "a", "subject": "b"}', "input"),
        (b"[1, 2]", "task"),
        (b"not json", "input"),
        (b'{"subject": "\\ud800"}', "task.subject"),
    ],
)
def test_invalid_single_input_is_one_stderr_line_and_exit_2(text, field):
    done = retryproof("digest", stdin=text)
    assert done.returncode == 2
    assert done.stdout == b""
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 1 and field in lines[0] and "invalid_request" in lines[0]


def test_jsonl_answers_every_line_even_after_a_bad_one(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_bytes(b'{"subject": "a"}\n{"subject": 1}\n\n{"body": "b"}\n')
    done = retryproof("digest", "--jsonl", str(path))
    assert done.returncode == 0
    lines = done.stdout.decode().splitlines()
    assert lines[0] == request_digest({"subject": "a"})
    assert lines[1].startswith("error invalid_request task.subject: ")
    assert lines[2] == request_digest({"body": "b"})


def test_missing_file_is_a_typed_error_not_a_traceback(tmp_path):
    done = retryproof("digest", str(tmp_path / "absent.json"))
    assert done.returncode == 2
    assert b"Traceback" not in done.stderr
    assert done.stderr.startswith(b"error: cannot read")
