"""User mistakes meet an ``error:``/``hint:`` pair and exit 2, never a traceback, and
lose nothing: a corrupt baseline, an unwritable --out, a closed stdout, a hand-edited
replay file, a forged report, a harness that exits at once."""

import json
import os
import subprocess
import sys

import pytest
from kit import once_per_session, retryproof_here

from retryproof.conformance import fuzz
from retryproof.conformance.replay_file import FORMAT as REPLAY_FORMAT

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_cli(*args, cwd=None, stdin=None):
    """``retryproof ARGS``: in this process (``kit.retryproof_here``: the same exit code and
    output; an uncaught exception fails the test as a traceback would) unless the call
    needs a working directory or stdin of its own. What only a process shows is tested
    with a process: a closed stdout below, a signal in test_hostile_harnesses. Paired
    on 2 CPUs (bench_suite.py -n 2, load 4.8-5.4, twice): its tests took 7 CPU-s, now 2."""
    if cwd is None and stdin is None:
        return retryproof_here(*args)
    return subprocess.run(
        [sys.executable, "-m", "retryproof.conformance.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        input=stdin,
        env={**os.environ, "PYTHONPATH": REPO},
    )


def assert_user_error(done, *words):
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0].startswith("error: ") and any(line.startswith("hint: ") for line in lines), done.stderr
    for word in words:
        assert word in done.stderr, (word, done.stderr)


def marker_harness(tmp_path):
    """A harness command that leaves a file behind if it is ever started."""
    return f"touch {tmp_path / 'harness-started'}", tmp_path / "harness-started"


def test_a_baseline_that_is_not_text_is_a_user_error(tmp_path):
    baseline = tmp_path / "corrupt.yaml"
    baseline.write_bytes(b"\x00\xff\xfe\x80 expected_failures")
    assert_user_error(run_cli("run", "--baseline", str(baseline), "--out", str(tmp_path / "out")), str(baseline))


@pytest.mark.parametrize("where", ["file/sub", "/proc/retryproof-nope"])
def test_an_unwritable_out_is_refused_before_the_harness_starts(tmp_path, where):
    (tmp_path / "file").write_text("a file, not a directory")
    out = where if where.startswith("/") else str(tmp_path / where)
    harness, started = marker_harness(tmp_path)
    assert_user_error(run_cli("run", "--harness", harness, "--out", out), out)
    assert not started.exists()


def test_a_closed_stdout_still_finishes_the_run_and_writes_the_reports(tmp_path):
    with open(tmp_path / "stderr", "w") as stderr:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "retryproof.conformance.cli",
                "run",
                "--only",
                "WT-CREATE",
                "--out",
                str(tmp_path / "out"),
            ],
            stdout=subprocess.PIPE,
            stderr=stderr,
            cwd=REPO,
        )
        process.stdout.close()  # the reader is gone before the first line
        status = process.wait(120)
    assert "Traceback" not in (tmp_path / "stderr").read_text()
    assert status == 0  # the verdict's exit code, not a pipe error
    assert sorted(os.listdir(tmp_path / "out")) == ["junit.xml", "report.json", "report.md"]


def test_the_kit_profiles_keep_no_example_database():
    from hypothesis import settings

    from retryproof.conformance.fuzz.profiles import PROFILES, register_profiles

    register_profiles()
    for name in PROFILES:
        assert settings.get_profile(name).database is None, name


# -- replay files --------------------------------------------------------------

GOOD_STEP = {"step": "submit", "id": "fz-a", "task": 0, "variant_kind": "nfd", "burst": 2}


@pytest.mark.parametrize(
    "step, field",
    [
        ({**GOOD_STEP, "task": 99}, "task"),
        ({**GOOD_STEP, "variant_kind": "zzz"}, "variant_kind"),
        ({**GOOD_STEP, "burst": True}, "burst"),
        ({**GOOD_STEP, "burst": 0}, "burst"),
        ({**GOOD_STEP, "id": "fz-z"}, "id"),
        ({**GOOD_STEP, "colour": "red"}, "colour"),
        ({"step": "submit", "task": 0}, "id"),
        ({"step": "teleport"}, "step"),
        ({"step": "crash", "failpoint": "approval.after_effect", "id": "fz-a", "task": 0}, "failpoint"),
        ({"step": "kill", "id": "fz-a", "task": 0, "delay_ms": -1}, "delay_ms"),
        ({"step": "restart", "graceful": "yes"}, "graceful"),
    ],
)
def test_replay_steps_outside_the_step_language_are_named_by_index_and_field(step, field):
    with pytest.raises(ValueError) as caught:
        fuzz.validate_steps([GOOD_STEP, {"step": "restart", "graceful": False}, step])
    assert "step 2" in str(caught.value) and repr(field) not in str(caught.value) and field in str(caught.value)


def test_the_step_language_accepts_every_kind_of_step():
    fuzz.validate_steps(
        [
            GOOD_STEP,
            {"step": "submit", "id": "fz-d", "task": 2},
            {"step": "conflict", "id": "fz-a"},
            {"step": "legacy"},
            {"step": "crash", "failpoint": "write_task.after_reserve", "id": "fz-b", "task": 1},
            {"step": "kill", "id": "fz-c", "task": 0, "delay_ms": 25},
            {"step": "restart", "graceful": True},
        ]
    )


def test_replay_refuses_a_bad_step_before_running_any(tmp_path):
    replay = tmp_path / "r2.json"
    steps = [
        {"step": "submit", "id": "fz-a", "task": 0},
        {"step": "submit", "id": "fz-a", "task": 99, "variant_kind": "zzz"},
    ]
    replay.write_text(json.dumps({"format": REPLAY_FORMAT, "seed": 1, "steps": steps}))
    harness, started = marker_harness(tmp_path)
    assert_user_error(run_cli("replay", str(replay), "--harness", harness), "step 1", "task")
    assert not started.exists()


@pytest.mark.parametrize(
    "options, named",
    [({"call_timeout": 0}, "call_timeout"), ({"start_timeout": "soon"}, "start_timeout"), ([], "options")],
)
def test_replay_refuses_recorded_options_its_flags_would_refuse(tmp_path, options, named):
    """A replay re-runs with the options its run recorded (a vendor's --start-timeout
    60): an edited or corrupt value is a user error, before any harness starts."""
    replay = tmp_path / "r.json"
    steps = [{"step": "submit", "id": "fz-a", "task": 0}]
    replay.write_text(json.dumps({"format": REPLAY_FORMAT, "seed": 1, "steps": steps, "options": options}))
    harness, started = marker_harness(tmp_path)
    assert_user_error(run_cli("replay", str(replay), "--harness", harness), "options", named)
    assert not started.exists()


def test_replay_refuses_steps_the_harness_cannot_take(tmp_path):
    replay = tmp_path / "r.json"
    steps = [{"step": "crash", "failpoint": "write_task.after_reserve", "id": "fz-a", "task": 0}]
    replay.write_text(json.dumps({"format": REPLAY_FORMAT, "seed": 1, "steps": steps}))
    fake = os.path.join(REPO, "tests", "conformance", "fake_harness.py")
    assert_user_error(
        run_cli("replay", str(replay), "--harness", f"{sys.executable} {fake} honest"),
        "step 0",
        "write_task.after_reserve",
    )


# -- validate-report -------------------------------------------------------------


@pytest.fixture(scope="module")
def small_report(tmp_path_factory) -> str:
    """The report.json of a real (small) run, once per session: each validate-report
    test below changes a copy of it."""
    return once_per_session(tmp_path_factory, "small-report", small_run)


def small_run(out) -> str:
    done = run_cli("run", "--only", "WT-CREATE,A2-RESPONSE-LOSS", "--seed", "3", "--out", str(out), "--format", "json")
    assert done.returncode == 0, done.stdout + done.stderr
    return (out / "report.json").read_text()


def a_report(tmp_path, small_report, change):
    """``small_report`` changed by ``change``, as validate-report judges it."""
    document = json.loads(small_report)
    change(document)
    path = tmp_path / "changed.json"
    path.write_text(json.dumps(document))
    return retryproof_here("validate-report", str(path))


def test_validate_report_cross_checks_counts_against_the_scenarios(tmp_path, small_report):
    done = a_report(tmp_path, small_report, lambda document: document["counts"].update(passed=30))
    assert done.returncode == 1 and "INVALID" in done.stderr
    assert "counts/passed" in done.stderr and "30" in done.stderr and "2" in done.stderr


def test_validate_report_cross_checks_the_verdict_and_prints_it_readably(tmp_path, small_report):
    def forge(document):
        document["scenarios"][0]["status"] = "failed"
        document["scenarios"][0]["reason"] = "the runtime lost a task"

    done = a_report(tmp_path, small_report, forge)
    assert done.returncode == 1 and "INVALID" in done.stderr
    assert "verdict/blocking" in done.stderr and "WT-CREATE" in done.stderr
    assert "[(" not in done.stderr and "{'" not in done.stderr  # no Python reprs


def test_an_untouched_report_still_validates(tmp_path, small_report):
    done = a_report(tmp_path, small_report, lambda document: None)
    assert done.returncode == 0, done.stderr


# -- smaller messages --------------------------------------------------------------


def test_a_harness_that_exits_at_once_is_described_by_its_exit_status(tmp_path):
    assert_user_error(
        run_cli("run", "--harness", "true", "--out", str(tmp_path / "out")),
        "exited with status 0 before answering hello",
    )


def test_a_bad_option_value_has_a_hint(tmp_path):
    assert_user_error(run_cli("run", "--concurrency", "0", "--out", str(tmp_path / "out")), "--concurrency")


@pytest.mark.parametrize(
    "args, words",
    [
        # What a CI job with an unset variable sends: it used to certify the reference.
        (["--harness", ""], ["--harness", "empty or blank"]),
        (["--harness", "   "], ["--harness", "empty or blank"]),
        (["--python", ""], ["--python", "empty or blank"]),
        (["--out", ""], ["--out", "empty or blank"]),
        (["--only", ""], ["--only", "names no scenario id"]),
        (["--only", " , "], ["--only", "names no scenario id"]),
        (["--format", ""], ["--format", "names no report format"]),
        (["--format", "md,pdf"], ["--format", "pdf"]),
        (["--only", "WT-CREATE", "--skip", "WT-CREATE"], ["leave no scenario to run"]),
        # Timeouts that would be blamed on the runtime ("no response within 0s").
        (["--call-timeout", "0"], ["--call-timeout", "above 0"]),
        (["--call-timeout", "-1"], ["--call-timeout", "above 0"]),
        (["--call-timeout", "nan"], ["--call-timeout", "above 0"]),
        (["--start-timeout", "inf"], ["--start-timeout", "above 0"]),
        (["--start-timeout", "1e400"], ["--start-timeout", "above 0"]),
        (["--call-timeout", "soon"], ["--call-timeout", "not a number"]),
    ],
)
def test_blank_values_and_impossible_timeouts_are_usage_errors(tmp_path, args, words):
    harness, started = marker_harness(tmp_path)
    target = [] if args[0] in ("--harness", "--python") else ["--harness", harness]
    out = [] if "--out" in args else ["--out", str(tmp_path / "out")]
    assert_user_error(run_cli("run", *target, *out, *args), *words)
    assert not started.exists()


def test_replay_without_harness_refuses_a_file_from_another_implementation(tmp_path):
    """It used to replay against the bundled reference and say "not reproduced"."""
    replay = tmp_path / "r.json"
    steps = [{"step": "submit", "id": "fz-a", "task": 0}, {"step": "submit", "id": "fz-a", "task": 0}]
    document = {"format": REPLAY_FORMAT, "seed": 1, "implementation": {"name": "acme-runtime"}, "steps": steps}
    replay.write_text(json.dumps(document))
    done = run_cli("replay", str(replay))
    assert_user_error(done, '"acme-runtime"', "--harness")
    assert "not reproduced" not in done.stdout
    # With the harness named, the same file replays.
    fake = os.path.join(REPO, "tests", "conformance", "fake_harness.py")
    named = run_cli("replay", str(replay), "--harness", f"{sys.executable} {fake} double-create")
    assert named.returncode == 1 and "REPRODUCED" in named.stdout, named.stdout + named.stderr


def test_an_invalid_task_for_digest_has_a_hint():
    assert_user_error(run_cli("digest", stdin='{"title": "x"}'), "invalid_request", "task.title")


NULL_AS_LEGACY = """
import sys
sys.path.insert(0, {repo!r})
from retryproof.spec.digest import DIGEST_SCHEMA_VERSION, check_submission_id, request_digest
from retryproof.spec.protocol import PROTOCOL, serve

def hello(args):
    return {{"protocol": PROTOCOL, "implementation": {{"name": "null-as-legacy", "version": "0", "language": "python"}},
            "capabilities": ["write_task"], "failpoints": [], "digest_schema_version": DIGEST_SCHEMA_VERSION}}

def write_task(args):
    if args.get("client_submission_id", "") is None:  # the defect: null taken for absent
        return {{"disposition": "created", "action_taken": True, "task_id": "T-1", "task_path": "tasks/T-1.json",
                "client_submission_id": None, "request_digest": request_digest(args["task"]),
                "digest_schema_version": DIGEST_SCHEMA_VERSION, "idempotent": False}}
    check_submission_id(args["client_submission_id"])
    raise RuntimeError("only bad ids reach this harness")

serve({{"hello": hello, "write_task": write_task, "list_tasks": lambda args: {{"tasks": []}}}})
"""


def test_a_failed_expectation_names_the_value_as_json(tmp_path):
    harness = tmp_path / "null_as_legacy.py"
    harness.write_text(NULL_AS_LEGACY.format(repo=REPO))
    done = run_cli(
        "run",
        "--only",
        "INVALID-INPUT",
        "--harness",
        f"{sys.executable} {harness}",
        "--out",
        str(tmp_path / "out"),
        "--format",
        "json",
    )
    reason = json.loads((tmp_path / "out" / "report.json").read_text())["scenarios"][0]["reason"]
    assert done.returncode == 1 and "client_submission_id null:" in reason and "None" not in reason, reason


def test_a_second_run_into_one_out_is_refused_and_the_first_keeps_its_reports(tmp_path):
    """Two runs into one --out once crashed one run and mixed the other's files."""
    from retryproof.conformance.writers.files import prepare_directory

    out = tmp_path / "out"
    first = run_cli("run", "--only", "WT-CREATE", "--seed", "1", "--out", str(out))
    assert first.returncode == 0
    before = {name: (out / name).read_bytes() for name in os.listdir(out)}
    claim = prepare_directory(str(out))  # a run in progress holds its directory
    harness, started = marker_harness(tmp_path)
    try:
        assert_user_error(run_cli("run", "--harness", harness, "--out", str(out)), "another retryproof run", str(out))
    finally:
        claim.release()
    assert not started.exists()
    assert {name: (out / name).read_bytes() for name in os.listdir(out)} == before
    assert run_cli("run", "--only", "WT-CREATE", "--seed", "2", "--out", str(out)).returncode == 0  # free again


def test_concurrent_atomic_writes_never_share_a_temporary_name(tmp_path):
    import threading

    from retryproof.conformance.writers.files import write_atomically

    path = str(tmp_path / "report.json")
    errors = []

    def writer(number):
        try:
            for _ in range(30):
                write_atomically(path, f"{number}\n" * 1000)
        except OSError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(number,)) for number in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert os.listdir(tmp_path) == ["report.json"]  # no temporary file left behind
    assert len(set((tmp_path / "report.json").read_text().splitlines())) == 1  # one writer's whole file
