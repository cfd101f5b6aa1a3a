"""What a new user's review found misleading, each kept fixed: a garbled success
recorded as a success, a baselined failure printed as blocking, usage errors that point
to the wrong help or guess nothing."""

import json
import os
import shlex
import shutil
import subprocess
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


# --- review13: a faulty runtime's reproduce line names the interpreter that has the kit ---

HELLO_THEN_SHUTDOWN = (
    '{"id": 1, "op": "hello", "args": {"protocol": "retryproof-harness/1"}}\n{"id": 2, "op": "shutdown", "args": {}}\n'
)


def faulty_reproduce_line(name: str = "no-idempotency") -> str:
    from retryproof.conformance.commands.selftest import Runtime, runtime_options
    from retryproof.conformance.runner import reproduce_line

    return reproduce_line(runtime_options(Runtime(name, "", ("A2-RESPONSE-LOSS",)), 0), "A2-RESPONSE-LOSS")


def shell_words(line: str, home: str) -> list[str]:
    """The words a shell gives the command ``line`` runs (quotes removed, ``~`` expanded)."""
    done = subprocess.run(
        ["bash", "-c", "printf '%s\\0' " + line],
        env={"PATH": os.defpath, "HOME": home},
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split("\0")[:-1]


def harness_words(line: str, home: str) -> list[str]:
    words = shell_words(line, home)
    return shlex.split(words[words.index("--harness") + 1])  # as the kit splits --harness


def test_a_faulty_runtimes_reproduce_line_starts_it_without_the_kits_environment_active(monkeypatch, tmp_path):
    """review13: it said bare ``python``, which outside the kit's active virtual
    environment (README command 1 never activates it) is an interpreter without the kit.
    The harness it names answers hello with PATH holding no virtual environment."""
    monkeypatch.setenv("PATH", os.defpath)
    line = faulty_reproduce_line()
    assert os.getcwd() not in line and os.path.expanduser("~/") not in line  # no machine path
    harness = harness_words(line, os.path.expanduser("~"))
    assert harness[1:] == ["-m", "retryproof.reference_impl", "--fault", "no-idempotency"]
    python = shutil.which(harness[0], path=os.defpath)
    assert python is not None, f"{line}: {harness[0]} is no interpreter here"
    done = subprocess.run(
        [python, *harness[1:]],
        input=HELLO_THEN_SHUTDOWN,
        env={"PATH": os.defpath, "RETRYPROOF_STATE_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=30,
    )
    hello = json.loads(done.stdout.splitlines()[0]) if done.stdout else {}
    assert hello.get("result", {}).get("implementation", {}).get("name") == "reference-fault-no-idempotency", (
        done.stderr
    )


@pytest.mark.parametrize(
    "executable, active, typed, first",
    [
        ("work/.venv/bin/python", False, "--harness '.venv/bin/python -m ", ".venv/bin/python"),
        ("work/.venv/bin/python", True, "--harness 'python -m ", "python"),
        # Under the home directory, outside the one the run started in: ~ is left to the shell.
        ("envs/the kit/bin/python3", False, "--harness ~/", "{home}/envs/the kit/bin/python3"),
    ],
    ids=["venv-here", "venv-active", "under-home"],
)
def test_the_interpreter_is_named_as_a_user_types_it_here(monkeypatch, tmp_path, executable, active, typed, first):
    """Its bare name only when PATH finds this very interpreter by it; else its path
    relative to the directory the run started in, or under ``~``: a line that works
    where it was printed, and no machine path in a committed sample."""
    home = tmp_path / "home"
    (home / "work").mkdir(parents=True)
    python = home / executable
    python.parent.mkdir(parents=True, exist_ok=True)
    python.write_text("")
    python.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(python))
    monkeypatch.setenv("PATH", os.pathsep.join([str(python.parent)] * active + [os.defpath]))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(home / "work")
    line = faulty_reproduce_line("f")
    assert typed in line and str(tmp_path) not in line, line
    harness = harness_words(line, str(home))
    assert harness == [first.format(home=home), "-m", "retryproof.reference_impl", "--fault", "f"]


def test_the_selftest_hint_names_the_interpreter_that_has_the_kit(monkeypatch):
    from retryproof.conformance.commands import selftest
    from retryproof.conformance.errors import KitError

    def timed_out(command, **options):
        raise subprocess.TimeoutExpired(command, 60)

    monkeypatch.setattr(selftest.subprocess, "run", timed_out)
    monkeypatch.setenv("PATH", os.defpath)
    with pytest.raises(KitError) as raised:
        selftest.bundled_runtimes()
    hint = raised.value.hint
    assert hint.startswith("run ") and hint.endswith(" to see why"), hint
    python, *rest = shlex.split(hint.removeprefix("run ").removesuffix(" to see why"))
    assert rest == ["-m", "retryproof.reference_impl.faulty"]
    assert os.path.abspath(os.path.expanduser(python)) == os.path.abspath(sys.executable), hint


def test_a_race_tally_counts_a_garbled_answer_as_garbled_not_as_what_it_claimed():
    """A scenario's own tallies (A4's races, KILL-NEMESIS's answers) agree with the
    reports' dispositions line: a garbled reuse vouches for no reuse."""
    from retryproof.conformance.outcome import Call
    from retryproof.conformance.scenarios.common import tally

    created = Call("write_task", {}, "ok", result={"disposition": "created"})
    reused = Call("write_task", {}, "ok", result={"disposition": "reused"})
    garbled = Call("write_task", {}, "info", result={"disposition": "reused"}, message='"idempotent" is missing')
    lost = Call("write_task", {}, "info", message="no response within 10s")
    assert tally([created, reused, garbled, lost]) == {"created": 1, "reused": 1, "garbled": 1, "no answer": 1}
