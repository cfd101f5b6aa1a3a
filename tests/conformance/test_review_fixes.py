"""What a new user's review found misleading, each kept fixed: a garbled success
recorded as a success, a baselined failure printed as blocking, usage errors that point
to the wrong help or guess nothing."""

import os
import sys

import pytest
from kit import by_id, certify, retryproof_here

BROKEN = os.path.join(os.path.dirname(__file__), "broken_runtimes.py")


@pytest.fixture(scope="module")
def baselined_schema_violation(tmp_path_factory):
    """A2-RESPONSE-LOSS against a runtime whose reuse answer lacks ``idempotent``
    (its result schema's), with that failure in the baseline: one run, in this process."""
    out = tmp_path_factory.mktemp("baselined")
    baseline = out / "baseline.yaml"
    baseline.write_text("expected_failures: [A2-RESPONSE-LOSS]\n")
    harness = f"{sys.executable} -S {BROKEN} reuse-without-idempotent"
    done, report = certify(out, harness, "--only", "A2-RESPONSE-LOSS", "--baseline", str(baseline), in_process=True)
    return done, by_id(report)["A2-RESPONSE-LOSS"]


def test_a_success_that_violates_its_schema_is_indeterminate_not_ok(baselined_schema_violation):
    """The brief's outcome model: a garbled answer is ``info``, never ``ok``; the
    scenario still fails on it, and the call keeps what it answered as evidence."""
    _, scenario = baselined_schema_violation
    reason = 'write_task result violates its schema at (result) (rule required): "idempotent" is missing'
    assert scenario["status"] == "failed" and scenario["reason"] == reason
    (garbled,) = [call for call in scenario["calls"] if call.get("failure") == "about"]
    assert garbled["op"] == "write_task" and garbled["disposition"] == "reused"
    assert garbled["kind"] == "info" and garbled["message"] == reason
    assert all(call["kind"] == "ok" for call in scenario["calls"] if call is not garbled)


def test_the_timeline_draws_a_garbled_answer_as_indeterminate_not_as_its_disposition(baselined_schema_violation):
    """review13: the garbled call was drawn as the reuse it claimed. Its bar now reads
    as indeterminate (drawn like a lost call), and says what it claimed."""
    from retryproof.conformance.writers.document import scenario_result
    from retryproof.conformance.writers.svg import render_timeline
    from retryproof.conformance.writers.timeline import INDETERMINATE, timeline

    _, scenario = baselined_schema_violation
    picture = timeline(scenario_result(scenario))
    assert picture is not None and picture.highlighted is not None
    garbled = picture.highlighted  # the call the failure is about
    assert garbled.outcome == "garbled" and garbled.outcome in INDETERMINATE
    assert garbled.label == "write_task: garbled answer (claimed reused)"
    assert {bar.outcome for bar in picture.bars if bar is not garbled} == {"created", "ok"}
    svg = render_timeline(picture, "t", "#calls")
    assert 'fill="url(#t-garbled)" stroke="#1b1f24" stroke-width="0.6" stroke-dasharray="3 2"' in svg
    assert "garbled answer (it broke its schema: indeterminate)" in svg  # its legend entry


def test_a_baselined_failure_is_printed_as_expected_not_as_blocking(baselined_schema_violation):
    """The run exits 0 within its baseline: the console must not call the failure blocking."""
    done, _ = baselined_schema_violation
    assert done.returncode == 0, done.stderr
    assert "\n  expected (baseline) A2-RESPONSE-LOSS: failed: write_task result violates its schema" in done.stdout
    assert "\n  blocking " not in done.stdout


def test_an_unrecognized_argument_of_a_subcommand_points_to_its_help():
    done = retryproof_here("run", "--bogus")
    assert done.returncode == 2
    assert done.stderr == "error: unrecognized arguments: --bogus\nhint: see 'retryproof run --help'\n"


@pytest.mark.parametrize(
    "option, given, guess",
    [
        ("--only", "wt-create", "did you mean WT-CREATE? "),  # the wrong case is refused, with the right one
        ("--skip", "A4-CONCURENT", "did you mean A4-CONCURRENT? "),
        ("--only", "WT-CREAT,nothing-like-it", "did you mean WT-CREATE for WT-CREAT? "),
        ("--only", "nothing-like-it", ""),
    ],
)
def test_an_unknown_scenario_id_gets_the_closest_known_one_suggested(tmp_path, option, given, guess):
    done = retryproof_here("run", option, given, "--out", str(tmp_path))
    assert done.returncode == 2 and not (tmp_path / "report.json").exists()
    assert done.stderr.splitlines()[1] == f"hint: {guess}see 'retryproof list' for the catalogue"


def test_a_baseline_id_in_the_wrong_case_gets_the_right_one_suggested(tmp_path):
    baseline = tmp_path / "baseline.yaml"
    baseline.write_text("expected_failures: [restart-reuse]\n")
    done = retryproof_here("run", "--baseline", str(baseline), "--out", str(tmp_path / "out"))
    assert done.returncode == 2
    assert done.stderr.splitlines()[1] == "hint: did you mean RESTART-REUSE? see 'retryproof list'"


def test_every_selftest_option_says_what_it_does(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # each option's help on its own line
    done = retryproof_here("selftest", "--help")
    options = [line.split() for line in done.stdout.splitlines() if line.startswith("  --")]
    assert [words[0] for words in options] == ["--out", "--seed", "--jobs"]
    assert all(len(words) > 2 for words in options), done.stdout
