"""The pytest plugin as a team meets it: a pytest session of its own (``pytester``),
with the catalogue's items next to its tests.

Every run selects a few cheap scenarios with ``--retryproof-only``; the status mapping
itself is checked on constructed results, so each status is covered without a runtime
that produces it.
"""

import json
import os
import shlex
import sys

import pytest
from kit import REFERENCE, STDLIB_PYTHON

from retryproof import spec
from retryproof.conformance.catalogue import entry
from retryproof.conformance.events import ScenarioResult
from retryproof.conformance.pytest_plugin import conclude

FAKE = os.path.join(os.path.dirname(__file__), "fake_harness.py")
BASICS = "WT-CREATE,A2-RESPONSE-LOSS"


def faulty(fault: str) -> str:
    return shlex.join([*REFERENCE, "--fault", fault])


def catalogue_run(pytester, *args):
    return pytester.runpytest("--retryproof-seed", "5", "-ra", *args)


def test_inert_without_a_target(pytester):
    """Loaded in every session of the environment, it adds no item, no marker and no
    import of the engine unless asked (a fresh interpreter, so imports are its own)."""
    pytester.makepyfile(
        """
        import sys

        def test_the_plugin_is_loaded_and_did_nothing(request):
            assert request.config.getoption("retryproof") is False  # the options exist: it is loaded
            assert "retryproof.conformance.runner" not in sys.modules
            assert not any("retryproof" in line for line in request.config.getini("markers"))
        """
    )
    result = pytester.runpytest_subprocess("-v")
    result.assert_outcomes(passed=1)
    assert "retryproof::" not in result.stdout.str() and "retryproof verdict" not in result.stdout.str()


def test_the_reference_passes_the_basics_after_the_suites_own_tests(pytester):
    pytester.makepyfile("def test_own(): pass")
    out = pytester.path / "reports"
    junit = pytester.path / "junit.xml"
    result = catalogue_run(
        pytester, "--retryproof", "--retryproof-only", BASICS, "--retryproof-out", str(out), f"--junitxml={junit}", "-v"
    )
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "*retryproof: seed 5, target the bundled reference runtime*",
            "*collected 3 items",
            "*test_own PASSED*",
            "retryproof::WT-CREATE PASSED*",
            "retryproof::A2-RESPONSE-LOSS PASSED*",
            "*retryproof verdict*",
        ]
    )
    report = json.loads((out / "report.json").read_text())
    assert not list(spec.validator("report").iter_errors(report))
    assert {s["id"]: s["status"] for s in report["scenarios"]} == {"WT-CREATE": "passed", "A2-RESPONSE-LOSS": "passed"}
    assert 'name="retryproof_level" value="MUST"' in junit.read_text()


def test_a_runtime_without_idempotency_fails_with_the_reproduce_line(pytester):
    out = pytester.path / "reports"
    result = catalogue_run(
        pytester,
        "--retryproof-harness",
        faulty("no-idempotency"),
        "--retryproof-only",
        BASICS,
        "--retryproof-out",
        str(out),
    )
    result.assert_outcomes(passed=1, failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "A2-RESPONSE-LOSS failed: unexpected tasks*",
            '  set_check: *"unexpected":*',
            "reproduce: retryproof run --only A2-RESPONSE-LOSS --seed 5 --harness *--fault no-idempotency*",
            "*NOT CONFORMANT*",
            "  blocking A2-RESPONSE-LOSS: failed: *",
            "FAILED retryproof::A2-RESPONSE-LOSS - *",
        ]
    )
    # The kit's own reports say what pytest said.
    report = json.loads((out / "report.json").read_text())
    assert {s["id"]: s["status"] for s in report["scenarios"]} == {"WT-CREATE": "passed", "A2-RESPONSE-LOSS": "failed"}


def test_missing_capabilities_are_skipped_not_passed(pytester):
    """The fake declares write_task only: an optional feature missing is a plain skip,
    a missing failpoint a skip that says the runtime is therefore not conformant."""
    result = catalogue_run(
        pytester,
        "--retryproof-harness",
        f"{STDLIB_PYTHON} {FAKE} honest",
        "--retryproof-only",
        "WT-CREATE,WRITE-REPORT-DEDUP,CRASH-AFTER-RESERVE",
    )
    result.assert_outcomes(passed=1, skipped=2)
    assert result.ret == pytest.ExitCode.OK  # pytest's rules; the verdict section below says otherwise
    result.stdout.fnmatch_lines_random(
        [
            "SKIPPED * the runtime does not provide write_report",
            "SKIPPED * not verified, so not conformant: the runtime does not provide *failpoint:write_task.after_reserve",
            "  blocking CRASH-AFTER-RESERVE: not verified: *",
        ]
    )


def test_baseline_xfails_a_listed_failure_and_fails_a_stale_entry(pytester):
    baseline = pytester.makefile(".yaml", baseline="expected_failures: [WT-CREATE, A2-RESPONSE-LOSS]\n")
    result = catalogue_run(
        pytester,
        "--retryproof-harness",
        faulty("no-idempotency"),
        "--retryproof-only",
        BASICS,
        "--retryproof-baseline",
        str(baseline),
    )
    result.assert_outcomes(xfailed=1, failed=1)
    result.stdout.fnmatch_lines_random(
        [
            "XFAIL retryproof::A2-RESPONSE-LOSS - listed in the baseline *baseline.yaml: failed: unexpected tasks*",
            "[[]XPASS(strict)] WT-CREATE passed but is listed in the baseline *baseline.yaml: the entry is stale; remove it",
            "FAILED retryproof::WT-CREATE - *",
        ]
    )


def test_the_harness_shakes_hands_once_per_session(pytester):
    starts = pytester.path / "starts.log"
    wrapper = pytester.makepyfile(
        wrapper=f"""
        import os, sys
        with open({str(starts)!r}, "a") as log:
            # the state directory is state/ in the scenario's (or the probe's) scratch folder
            log.write(os.path.basename(os.path.dirname(os.environ["RETRYPROOF_STATE_DIR"])) + "\\n")
        os.execv(sys.executable, {list(REFERENCE)!r})
        """
    )
    # Without site, as the reference itself starts (kit.REFERENCE).
    result = catalogue_run(
        pytester, "--retryproof-harness", f"{sys.executable} -S {wrapper}", "--retryproof-only", BASICS
    )
    result.assert_outcomes(passed=2)
    state_dirs = starts.read_text().split()
    assert sum(name.startswith("retryproof-probe-") for name in state_dirs) == 1
    assert any(name.startswith("retryproof-a2-response-loss-") for name in state_dirs)


@pytest.mark.parametrize("selection", [["--collect-only"], ["-k", "no-such-scenario"]])
def test_no_handshake_when_no_scenario_runs(pytester, selection):
    """A harness that cannot start is not started when nothing would use it."""
    result = pytester.runpytest("--retryproof-harness", "/no/such/harness", *selection)
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED)
    assert "handshake" not in result.stderr.str()


def test_markers_select_by_level(pytester):
    result = pytester.runpytest("--retryproof", "--collect-only", "-q", "-m", "retryproof_should")
    assert [line for line in result.stdout.lines if line.startswith("retryproof::")] == ["retryproof::DURABILITY-TRACE"]


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--retryproof", "--retryproof-only", "WT-CREATE,NO-SUCH-ID"],
            "ERROR: retryproof: unknown scenario id(s): NO-SUCH-ID",
        ),
        (["--retryproof-harness", "'unclosed"], "ERROR: retryproof: cannot parse --harness: *"),
        (
            ["--retryproof", "--retryproof-baseline", "missing.yaml"],
            "ERROR: retryproof: cannot read baseline missing.yaml*",
        ),
        (["--retryproof-only", "WT-CREATE"], "ERROR: retryproof: --retryproof-only given without a runtime*"),
        (
            ["--retryproof", "--retryproof-python", "a:b"],
            "ERROR: retryproof: --retryproof and --retryproof-python name two runtimes*",
        ),
        (
            ["--retryproof-harness", "/no/such/harness"],
            "ERROR: retryproof: the harness failed its handshake: cannot run '/no/such/harness'*",
        ),
        (
            ["--retryproof-harness", f"{STDLIB_PYTHON} {FAKE} crash-at-start"],
            "ERROR: retryproof: the harness failed its handshake*",
        ),
        # An unset CI variable: never the bundled reference, never just the team's own tests.
        (["--retryproof-harness", ""], "*argument --retryproof-harness: an empty or blank value*"),
        (["--retryproof-python", " "], "*argument --retryproof-python: an empty or blank value*"),
        (["--retryproof", "--retryproof-out", ""], "*argument --retryproof-out: an empty or blank value*"),
        (["--retryproof", "--retryproof-only", ""], "*argument --retryproof-only: '' names no scenario id*"),
        (
            ["--retryproof", "--retryproof-only", "WT-CREATE", "--retryproof-skip", "WT-CREATE"],
            "ERROR: retryproof: --only and --skip leave no scenario to run",
        ),
        *(
            (["--retryproof", "--retryproof-call-timeout", value], "*argument --retryproof-call-timeout: *above 0*")
            for value in ("0", "-1", "nan", "inf")
        ),
        # The checks of `run --shard`, in pytest's option parser.
        *(
            (["--retryproof", "--retryproof-shard", value], f"*argument --retryproof-shard: '{value}'*K/N*")
            for value in ("3/2", "0/2", "2", "one/two", "")
        ),
        (["--retryproof-shard", "1/2"], "ERROR: retryproof: --retryproof-shard given without a runtime*"),
    ],
)
def test_bad_input_is_a_usage_error_without_traceback(pytester, args, message):
    pytester.makepyfile("def test_own(): pass")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    if "crash-at-start" in args[-1]:
        result.stderr.fnmatch_lines(["*fake: cannot open the database*"])  # the harness's stderr is the hint


def result_of(status, reason="why", baseline=None, scenario="A2-RESPONSE-LOSS", **evidence):
    return ScenarioResult(
        entry(scenario),
        status,
        reason,
        0.1,
        f"retryproof run --only {scenario} --seed 1",
        evidence,
        (),
        "harness said\nbye",
        baseline,
    )


@pytest.mark.parametrize(
    "result, outcome, words",
    [
        (
            result_of("failed", set_check={"lost": ["T1"]}),
            pytest.fail.Exception,
            [
                "A2-RESPONSE-LOSS failed: why",
                'set_check: {"lost":["T1"]}',
                "  bye",
                "reproduce: retryproof run --only A2-RESPONSE-LOSS --seed 1",
            ],
        ),
        (
            result_of("error"),
            pytest.fail.Exception,
            ["A2-RESPONSE-LOSS error (the kit could not judge): why", "reproduce: "],
        ),
        (result_of("skipped", missing=["legacy"], scenario="LEGACY-NO-ID"), pytest.skip.Exception, ["why"]),
        (
            result_of("skipped", missing=["tamper"], scenario="CONFLICT-SCHEMA"),
            pytest.skip.Exception,
            ["not verified, so not conformant: why"],
        ),
        (result_of("not_applicable"), pytest.skip.Exception, ["not applicable: why"]),
        (
            result_of("failed", baseline="xfail"),
            pytest.xfail.Exception,
            ["listed in the baseline known.yaml: failed: why"],
        ),
        (
            result_of("error", baseline="xfail"),
            pytest.xfail.Exception,
            ["listed in the baseline known.yaml: error: why"],
        ),
        (
            result_of("passed", baseline="xpass"),
            pytest.fail.Exception,
            ["[XPASS(strict)] A2-RESPONSE-LOSS passed but is listed in the baseline known.yaml"],
        ),
    ],
)
def test_every_status_that_is_not_a_pass_raises_its_outcome(result, outcome, words):
    with pytest.raises(outcome) as raised:
        conclude(result, "known.yaml")
    for word in words:
        assert word in str(raised.value.msg)


@pytest.mark.parametrize("black_box, source", [(False, "harness"), (True, "server")])
def test_a_failure_names_whose_stderr_it_quotes(black_box, source):
    """Through a binding the stderr is the bound server's, as report.md says."""
    with pytest.raises(pytest.fail.Exception) as raised:
        conclude(result_of("failed"), None, black_box=black_box)
    assert f"{source} stderr (last 2 lines):\n  harness said\n  bye" in str(raised.value.msg)


def test_a_pass_is_the_only_status_that_returns():
    assert conclude(result_of("passed"), None) is None
