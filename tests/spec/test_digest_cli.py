"""The ``retryproof digest`` command: exit codes, error lines, no tracebacks."""

import json
import subprocess
import sys

import independent_digest as independent
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import invalid_tasks, tasks

from retryproof.spec.digest import request_digest


def retryproof(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "retryproof.conformance.cli", *args], input=stdin, capture_output=True, timeout=60
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
        (b'{"subject": "a", "subject": "b"}', "task.subject"),
        (b"[1, 2]", "task"),
        (b"not json", "input"),
        (b'{"subject": "\\ud800"}', "task.subject"),
    ],
)
def test_invalid_single_input_is_an_error_and_a_hint_and_exit_2(text, field):
    done = retryproof("digest", stdin=text)
    assert done.returncode == 2
    assert done.stdout == b""
    error, hint = done.stderr.decode().splitlines()
    assert error.startswith("error: ") and field in error and "invalid_request" in error
    assert hint.startswith("hint: ")


def test_jsonl_answers_every_line_even_after_a_bad_one(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_bytes(b'{"subject": "a"}\n{"subject": 1}\n\n{"body": "b"}\n')
    done = retryproof("digest", "--jsonl", str(path))
    assert done.returncode == 0
    lines = done.stdout.decode().splitlines()
    assert lines[0] == request_digest({"subject": "a"})
    assert lines[1].startswith("error invalid_request line 2 task.subject: ")
    assert lines[2:] == ["", request_digest({"body": "b"})]  # a blank line's answer is blank


def test_missing_file_is_a_typed_error_not_a_traceback(tmp_path):
    done = retryproof("digest", str(tmp_path / "absent.json"))
    assert done.returncode == 2
    assert b"Traceback" not in done.stderr
    assert done.stderr.startswith(b"error: cannot read")


def _line(task, ascii_only: bool) -> str:
    # A lone surrogate has no UTF-8 form, so such a task can only travel escaped.
    return json.dumps(task, ensure_ascii=ascii_only or not independent.is_unicode(task))


task_lines = st.one_of(
    st.builds(_line, tasks, st.booleans()),
    st.builds(lambda case, ascii_only: _line(case[0], ascii_only), invalid_tasks, st.booleans()),
    # A repeated key is lost by the usual parsers, so it is spelled out as text.
    st.builds(
        lambda key, first, second: f'{{"{key}": {json.dumps(first)}, "{key}": {json.dumps(second)}}}',
        st.sampled_from(independent.SCALARS),
        st.text(max_size=3),
        st.text(max_size=3),
    ),
)


def test_jsonl_agrees_with_the_independent_implementation_on_unseen_tasks(tmp_path):
    """Hypothesis invents the lines, one process answers them all; each answer must be
    the independent implementation's digest, or an error naming the same field."""
    lines: list[str] = []

    # Derandomized, as under Hypothesis's CI profile: drawn at random, the valid ones (57 to
    # 112 in 40 draws) fell to 47 in one of about 15 suite runs. The same seed is not quite the
    # same lines everywhere: Hypothesis also draws constants from the modules a process has
    # loaded, which differ between xdist workers, hence counts with margin below. Neither
    # the draws' speed nor the collecting's is the claim: on a loaded machine one draw took
    # 1.03 s and Hypothesis failed the test on its too_slow health check.
    @settings(
        max_examples=200, database=None, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow]
    )
    @given(task_lines)
    def collect(line):
        lines.append(line)

    collect()
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    done = retryproof("digest", "--jsonl", str(path))
    assert done.returncode == 0, done.stderr
    answers = done.stdout.decode("utf-8").splitlines()
    assert len(answers) == len(lines)
    for number, (line, answer) in enumerate(zip(lines, answers, strict=True), start=1):
        expected = independent.answer_line(line, number)
        assert answer.startswith(expected) if expected.startswith("error ") else answer == expected, (line, answer)
    assert sum(answer.startswith("sha256:") for answer in answers) > 50, "enough valid tasks to mean something"
    assert sum(answer.startswith("error ") for answer in answers) > 50, "enough invalid ones too"
