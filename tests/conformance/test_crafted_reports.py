"""Crafted and hostile report.json files against the commands that read reports
(``merge``, ``diff``, ``validate-report``) and the CLI's last line of defence: no
console line a report can forge, no traceback, no non-finite number carried on, a
step summary also when no verdict was reached, a lost verdict counted as a regression,
and a forgery whose passes its own hello rules out refused.

The reports are the committed samples, edited and re-judged here: no harness runs. Those
that must pass every check of this kit start from the reference's sample, the one the
kit regenerates on its current spec text (the matrix's may be of an earlier text)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from kit import retryproof, retryproof_here

from retryproof.conformance import __version__
from retryproof.conformance.commands.validate_report import report_problems
from retryproof.conformance.events import RunFinished, RunInfo
from retryproof.conformance.verdict import judge
from retryproof.conformance.writers.document import report_document, scenario_result

SAMPLES = Path(__file__).resolve().parents[2] / "reports" / "samples"
INJECTED = "\n::error::INJECTED"


def sample(name: str) -> dict[str, Any]:
    """A committed sample report, as if this kit had written it."""
    document = json.loads((SAMPLES / name / "report.json").read_text())
    document["kit"]["version"] = __version__
    return document


def rejudged(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` with counts, verdict and checklist made to agree with its scenarios,
    as a careful forger (or the kit itself) would write them."""
    results = tuple(scenario_result(scenario) for scenario in document["scenarios"])
    verdict = judge(results, (), document.get("black_box", False), document["capabilities"])
    info = RunInfo("", "", "", {}, "", (), (), 0, 0, "")
    fresh = report_document(RunFinished(info, results, verdict, 0.0))
    return {**document, **{key: fresh[key] for key in ("counts", "verdict", "checklist")}}


def judged_under_spec_2(name: str = "express-idempotency") -> dict[str, Any]:
    """A matrix report as the kit wrote it under spec 2.0.0 (kept from before the samples
    were regenerated on 3.0.0): another catalogue, no fingerprint."""
    document = json.loads((Path(__file__).parent / "old_reports" / f"{name}-spec-2.0.0.json").read_text())
    document["kit"]["version"] = __version__
    return document


def written(tmp_path: Path, name: str, document: Any) -> str:
    path = tmp_path / name
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return str(path)


def as_one_shard(document: dict[str, Any]) -> dict[str, Any]:
    return {**document, "shard": {"index": 1, "count": 1}}


def failing_reference() -> dict[str, Any]:
    """The reference's report as the kit writes it for a runtime that failed
    CONFLICT-DIGEST: that scenario failed, counts, verdict and checklist re-judged."""
    document = sample("reference")
    scenario = next(s for s in document["scenarios"] if s["id"] == "CONFLICT-DIGEST")
    scenario.update(status="failed", reason="the same id with another task was answered reused")
    return rejudged(document)


def assert_typed_error(done, code: int = 2) -> None:
    assert done.returncode == code, done.stdout + done.stderr
    assert done.stderr.startswith("error: ") and "\nhint: " in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


# --- 4: merge's console forges no line -------------------------------------------------


def test_merge_prints_no_line_a_crafted_reproduce_string_starts(tmp_path):
    document = as_one_shard(failing_reference())
    for scenario in document["scenarios"]:
        if scenario["status"] in ("failed", "error"):
            scenario["reproduce"] += INJECTED
    done = retryproof_here("merge", written(tmp_path, "shard.json", document), "--out", str(tmp_path / "out"))
    assert done.returncode == 1, done.stderr
    assert "INJECTED" in done.stdout  # printed, but inside the reproduce line
    lines = (done.stdout + done.stderr).splitlines()
    assert not [line for line in lines if line.startswith("::")], lines


def test_an_error_quoting_a_crafted_kit_version_is_one_line(tmp_path):
    document = as_one_shard(failing_reference())
    document["kit"]["version"] = "0.0" + INJECTED
    done = retryproof_here("merge", written(tmp_path, "shard.json", document), "--out", str(tmp_path / "out"))
    assert_typed_error(done)
    assert "INJECTED" in done.stderr and not [line for line in done.stderr.splitlines() if line.startswith("::")]


# --- 5: no traceback for any input; a kit crash has its own exit code -------------------


@pytest.mark.parametrize("depth", [900, 100_000])
@pytest.mark.parametrize("command", ["validate-report", "diff", "merge", "compare"])
def test_deeply_nested_json_is_a_typed_error(tmp_path, command, depth):
    path = written(tmp_path, "deep.json", "[" * depth + "]" * depth)
    extra = {"diff": [path], "merge": ["--out", str(tmp_path / "out")], "compare": ["--out", str(tmp_path / "out")]}
    done = retryproof_here(command, path, *extra.get(command, []))
    assert_typed_error(done)
    assert "nests deeper than" in done.stderr


def test_validate_report_of_an_endless_file_is_a_typed_error():
    done = retryproof("validate-report", "/dev/zero", timeout=60)
    assert_typed_error(done)
    assert "is larger than" in done.stderr


def test_a_kit_crash_exits_3_with_an_error_and_no_traceback(tmp_path, monkeypatch, capsys):
    """Whatever escapes a command (a bug, memory running out) is reported once, as an
    error with a hint, and exits 3: not 1 (not conformant, a regression) nor 2."""
    from retryproof.conformance import cli
    from retryproof.conformance.commands import validate_report

    def crash(args):
        raise MemoryError("no more")

    monkeypatch.setattr(validate_report, "main", crash)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    assert cli.main(["validate-report", "x.json"]) == cli.CRASH_EXIT_CODE == 3
    err = capsys.readouterr().err
    assert err.startswith("error: retryproof crashed: MemoryError: no more\nhint: this is a bug in retryproof")
    assert "Traceback" not in err
    monkeypatch.setattr(validate_report, "main", lambda args: 1 / 0)
    assert cli.main(["validate-report", "x.json"]) == 3
    assert "ZeroDivisionError" in capsys.readouterr().err


def test_the_crash_exit_code_is_documented_and_taken_by_nothing_else():
    readme = (SAMPLES.parents[1] / "README.md").read_text()
    assert "3 the kit itself crashed" in readme


# --- 6: the step summary of merge and of runs that reached no verdict -------------------


def test_merge_appends_the_verdict_to_the_step_summary(tmp_path):
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    shard = written(tmp_path, "shard.json", as_one_shard(failing_reference()))
    done = retryproof_here(
        "merge", shard, "--out", str(tmp_path / "out"), env={**os.environ, "GITHUB_STEP_SUMMARY": str(summary)}
    )
    assert done.returncode == 1, done.stderr
    text = summary.read_text()
    assert text.startswith("earlier step\n## retryproof: reference")
    assert "**Verdict: NOT CONFORMANT** (exit code 1)" in text and "`CONFLICT-DIGEST` (MUST, failed)" in text


@pytest.mark.parametrize(
    "args, says",
    [
        (["run", "--concurrency", "1"], "1 must be at least 2"),
        (["run", "--harness", "false", "--call-timeout", "2"], "the harness failed its handshake"),
        (["merge", "missing.json", "--out", "out"], "cannot read report missing.json"),
    ],
)
def test_a_run_or_merge_that_reaches_no_verdict_says_why_in_the_step_summary(tmp_path, args, says, monkeypatch):
    summary = tmp_path / "summary.md"
    monkeypatch.chdir(tmp_path)
    done = retryproof_here(*args, env={**os.environ, "GITHUB_STEP_SUMMARY": str(summary)})
    assert_typed_error(done)
    text = summary.read_text()
    assert text.startswith(f"## retryproof {args[0]}: no verdict (exit 2)\n") and says in text, text


# --- 7: a verdict lost through not-verified scenarios is a regression --------------------


def test_diff_counts_a_verdict_lost_to_not_verified_scenarios_as_a_regression(tmp_path):
    old = sample("reference")
    assert old["verdict"]["conformant"]
    new = json.loads(json.dumps(old))
    scenario = next(s for s in new["scenarios"] if s["id"] == "CRASH-AFTER-RESERVE")
    scenario.update(
        status="skipped",
        reason="needs failpoint write_task.after_reserve, not declared",
        evidence={"missing": ["failpoint:write_task.after_reserve"]},
        calls=[],
    )
    new = rejudged(new)
    assert not new["verdict"]["conformant"]
    done = retryproof_here("diff", written(tmp_path, "old.json", old), written(tmp_path, "new.json", new))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 regression(s)" in done.stdout and "## Regressions" in done.stdout
    assert "CRASH-AFTER-RESERVE" in done.stdout.split("## Regressions")[1]
    # ... and the reverse is a fix, not a regression
    back = retryproof_here("diff", str(tmp_path / "new.json"), str(tmp_path / "old.json"))
    assert back.returncode == 0 and "1 fix(es)" in back.stdout, back.stdout


# --- 11: non-finite numbers are not JSON ---------------------------------------------------


@pytest.mark.parametrize("number", ["1e999", "-1e999", "Infinity", "NaN"])
def test_a_report_with_a_non_finite_number_is_refused(tmp_path, number):
    text = json.dumps(sample("reference")).replace('"duration_s": ', f'"duration_s": {number}, "was": ', 1)
    path = written(tmp_path, "report.json", text)
    done = retryproof_here("validate-report", path)
    assert_typed_error(done)
    assert "is not JSON" in done.stderr
    merged = retryproof_here("merge", path, "--out", str(tmp_path / "out"))
    assert merged.returncode == 2 and not (tmp_path / "out").exists()


# --- 12: a self-consistent forgery is refused by what its own hello declares ---------------


def forged_conformant() -> dict[str, Any]:
    """The reference's report with diagnose and two crash failpoints struck from its
    hello while the scenarios that need them still say passed, the counts, verdict and
    checklist agreeing: a careful forgery of a runtime that lacks those hooks."""
    document = sample("reference")
    document["capabilities"] = [name for name in document["capabilities"] if name != "diagnose"]
    lacking = ("write_task.after_reserve", "write_task.after_task_created")
    document["failpoints"] = [name for name in document["failpoints"] if name not in lacking]
    document = rejudged(document)
    assert document["verdict"]["conformant"], document["verdict"]
    return document


def test_a_forged_pass_of_a_scenario_the_runtime_cannot_run_is_invalid(tmp_path):
    done = retryproof_here("validate-report", written(tmp_path, "report.json", forged_conformant()))
    assert done.returncode == 1, done.stdout + done.stderr
    assert (
        "CRASH-AFTER-RESERVE is passed, but it needs diagnose, failpoint:write_task.after_reserve, "
        "which the runtime's hello (capabilities, failpoints) does not declare"
    ) in done.stderr


def test_validate_report_trusts_the_declared_hello_but_not_a_relabelled_scenario(tmp_path):
    """What validate-report cannot see: a forger who also adds the failpoints to the
    report's hello. What it can: a scenario relabelled or its needs struck out."""
    document = forged_conformant()
    document["capabilities"] += ["diagnose"]
    document["failpoints"] += ["write_task.after_reserve", "write_task.after_task_created"]
    document = rejudged(document)
    assert retryproof_here("validate-report", written(tmp_path, "declared.json", document)).returncode == 0
    scenario = next(s for s in document["scenarios"] if s["id"] == "KILL-NEMESIS")
    scenario["level"] = "SHOULD"
    scenario["needs"] = []
    done = retryproof_here("validate-report", written(tmp_path, "relabelled.json", document))
    assert done.returncode == 1
    assert 'level: says "SHOULD", but KILL-NEMESIS has "MUST" in the catalogue' in done.stderr
    assert 'needs: says [], but KILL-NEMESIS has ["write_task"] in the catalogue' in done.stderr


# --- 18: every report carries the fingerprint of the spec it ran ---------------------------


def test_a_report_carries_the_fingerprint_of_the_spec_files_it_ran(tmp_path):
    from retryproof.spec import SPEC_VERSION, fingerprint

    done = retryproof_here(
        "run", "--only", "WT-CREATE", "--seed", "1", "--out", str(tmp_path), "--format", "json,md,junit"
    )
    assert done.returncode == 0, done.stderr
    document = json.loads((tmp_path / "report.json").read_text())
    assert document["spec_version"] == SPEC_VERSION and document["spec_fingerprint"] == fingerprint()
    assert f"| spec fingerprint | {fingerprint()}" in (tmp_path / "report.md").read_text()
    assert f'name="spec_fingerprint" value="{fingerprint()}"' in (tmp_path / "junit.xml").read_text()


def test_a_report_naming_a_release_with_other_files_is_invalid(tmp_path):
    from retryproof.spec import releases

    document = sample("reference")
    document["spec_version"] = "2.0.0"  # a report claiming the released 2.0.0 (the sample may be unreleased)
    document["spec_fingerprint"] = "sha256:" + "0" * 64
    done = retryproof_here("validate-report", written(tmp_path, "report.json", document))
    assert done.returncode == 1
    assert f'spec_fingerprint: says "sha256:{"0" * 64}", but spec 2.0.0 was released as' in done.stderr
    document["spec_fingerprint"] = releases()["2.0.0"]
    assert retryproof_here("validate-report", written(tmp_path, "report.json", document)).returncode == 0


# --- 13: the counts line tells a failure from an error ---------------------------------------


def test_the_counts_line_counts_errors_apart_from_failures():
    from retryproof.conformance.writers.content import tally

    document = sample("reference")
    scenario = next(s for s in document["scenarios"] if s["id"] == "WT-CREATE")
    scenario.update(status="error", reason="no answer within 10s")
    line = tally([scenario_result(s) for s in document["scenarios"]]).line()
    assert " · 0 failed (MUST) · 1 errors (MUST) · " in line, line


# --- 14: a shard whose reproduce lines name another seed is not one run -----------------------


def test_a_report_whose_reproduce_lines_disagree_with_its_seed_is_invalid(tmp_path):
    document = as_one_shard(failing_reference())
    scenario = next(s for s in document["scenarios"] if s["status"] == "failed")
    scenario["reproduce"] = scenario["reproduce"].replace(f"--seed {document['seed']}", "--seed 77")
    path = written(tmp_path, "shard.json", document)
    done = retryproof_here("merge", path, "--out", str(tmp_path / "out"))
    assert_typed_error(done)
    assert '"--seed": "77"' in done.stderr and f'"--seed": "{document["seed"]}"' in done.stderr
    assert retryproof_here("validate-report", path).returncode == 1


# --- 14: small things a reader misreads ------------------------------------------------------


def test_compare_tells_a_not_verified_must_from_a_feature_not_covered(tmp_path):
    path = written(tmp_path, "express.json", sample("express-idempotency"))
    done = retryproof_here("compare", path, "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    rows = {
        line.split(" | ")[0].lstrip("| "): line.split(" | ")[1].rstrip(" |")
        for line in (tmp_path / "out" / "comparison.md").read_text().splitlines()
        if line.startswith("| ") and " | " in line
    }
    assert rows["CRASH-AFTER-RESERVE (MUST)"] == "not verified"  # a failpoint it lacks: blocks
    assert rows["P0-CONSUMED (MUST)"] == "not covered"  # approval, an optional feature it lacks: does not


def test_an_empty_key_is_shown_as_an_empty_string_and_the_environment_has_no_blank_header():
    from retryproof.conformance.writers.content import evidence_blocks
    from retryproof.conformance.writers.html import render_html

    document = sample("reference")
    scenario = next(s for s in document["scenarios"] if s["id"] == "INVALID-KEY")
    result = scenario_result(scenario)
    calls = next(block for block in evidence_blocks(result) if getattr(block, "caption", None) == "calls")
    column = calls.headers.index("client_submission_id")
    assert '""' in [row[column] for row in calls.rows]  # INVALID-KEY sends the empty key
    results = tuple(scenario_result(s) for s in document["scenarios"])
    info = RunInfo("0", "3.0.0", "p", {"name": "n"}, "", (), (), 1, 8, "now")
    page = render_html(RunFinished(info, results, judge(results), 1.0))
    assert "<thead><tr><th></th><th></th></tr></thead>" not in page


def test_a_binding_servers_stderr_is_not_labelled_a_harnesss():
    from retryproof.conformance.writers.markdown import render_markdown

    document = sample("dbos-transact")
    failed = next(s for s in document["scenarios"] if s["status"] == "failed")
    failed["stderr"] = "server log line"
    results = tuple(scenario_result(s) for s in document["scenarios"])
    for black_box, label in ((True, "Server stderr (tail):"), (False, "Harness stderr (tail):")):
        info = RunInfo("0", "3.0.0", "p", {"name": "n"}, "", (), (), 1, 8, "now", black_box=black_box)
        text = render_markdown(RunFinished(info, results, judge(results, (), black_box), 1.0))
        assert label in text, label


def test_a_fuzz_failure_names_the_requirement_it_broke_not_every_one_fuzz_model_checks():
    from retryproof.conformance.writers.markdown import failure_lines

    document = sample("dbos-transact")
    results = tuple(scenario_result(s) for s in document["scenarios"])
    info = RunInfo("0", "3.0.0", "p", {"name": "n"}, "", (), (), 1, 8, "now")
    lines = failure_lines(RunFinished(info, results, judge(results), 1.0))
    fuzz = lines.index(next(line for line in lines if line.startswith("- `FUZZ-MODEL`")))
    named = []
    for line in lines[fuzz + 1 :]:
        if not line.startswith("  - "):
            break
        named.append(line.split(":")[0].strip(" -"))
    assert named == ["CON-1"], named  # its minimal history answered Q3: the conflict
    conflict = lines.index(next(line for line in lines if line.startswith("- `CONFLICT-DIGEST`")))
    assert lines[conflict + 1].startswith("  - CON-1:")  # a scenario without such evidence names all it checks


# --- a report judged under another spec text ---------------------------------------------


def test_a_report_of_another_spec_text_is_checked_only_against_itself(tmp_path):
    """A matrix report written under spec 2.0.0 lists another catalogue (no CRASH-POINTS,
    other needs): this kit cannot recheck its verdict, says so, and still catches a
    pass its own hello and its own needs rule out."""
    document = judged_under_spec_2()
    assert document["spec_version"] == "2.0.0"
    done = retryproof_here("validate-report", written(tmp_path, "old.json", document))
    assert done.returncode == 0, done.stderr
    assert "judged under another spec text (spec 2.0.0" in done.stdout
    scenario = next(s for s in document["scenarios"] if s["id"] == "CRASH-AFTER-RESERVE")
    assert scenario["status"] == "skipped"
    scenario.update(status="passed", reason=None)
    document["counts"]["skipped"] -= 1
    document["counts"]["passed"] += 1
    done = retryproof_here("validate-report", written(tmp_path, "forged.json", document))
    assert done.returncode == 1
    assert "CRASH-AFTER-RESERVE is passed, but it needs" in done.stderr


def test_merge_refuses_a_shard_judged_under_another_spec_text(tmp_path):
    done = retryproof_here(
        "merge", written(tmp_path, "old.json", as_one_shard(judged_under_spec_2())), "--out", str(tmp_path / "out")
    )
    assert_typed_error(done)
    assert "was judged under another spec text (spec 2.0.0)" in done.stderr


# --- review13: a result that counts as met carries what it was judged on -------------------


def test_a_report_whose_passes_were_emptied_of_evidence_and_calls_is_invalid(tmp_path):
    """Counts, verdict and checklist still agree, and every part has a valid shape: only
    the passes' missing evidence and calls give the forgery away, each named."""
    document = sample("reference")
    for scenario in document["scenarios"]:
        scenario.update(evidence={}, calls=[])
    done = retryproof_here("validate-report", written(tmp_path, "report.json", document))
    assert done.returncode == 1, done.stdout + done.stderr
    assert (
        "scenarios/0: WT-CREATE is passed, but its evidence is empty and it lists no call of the runtime "
        "(calls of kind ok, fail or info): a result that counts as met carries the evidence and the calls "
        "it was judged on"
    ) in done.stderr
    assert f"INVALID ({len(document['scenarios'])} problem(s))" in done.stderr
    problems = report_problems(document)  # the CLI prints the first 20
    assert [problem.split(" is passed, but ")[0] for problem in problems] == [
        f"scenarios/{index}: {scenario['id']}" for index, scenario in enumerate(document["scenarios"])
    ]
    fuzz = next(problem for problem in problems if ": FUZZ-MODEL is" in problem)
    assert "FUZZ-MODEL is passed, but its evidence is empty and its evidence names no example it explored" in fuzz


@pytest.mark.parametrize(
    "scenario_id, emptied, says",
    [
        ("WT-CREATE", {"evidence": {}}, "its evidence is empty:"),
        ("WT-CREATE", {"calls": []}, "it lists no call of the runtime"),
        # Faults are the kit's own doing: they judge nothing of the runtime.
        ("RESTART-REUSE", "faults only", "it lists no call of the runtime"),
        ("FUZZ-MODEL", {"evidence": {"fuzz": {"seed": 1, "examples": 0}}}, "its evidence names no example"),
    ],
)
def test_each_thing_a_pass_must_carry_is_checked_alone(tmp_path, scenario_id, emptied, says):
    document = sample("reference")
    scenario = next(s for s in document["scenarios"] if s["id"] == scenario_id)
    if emptied == "faults only":
        emptied = {"calls": [call for call in scenario["calls"] if call["kind"] == "fault"]}
        assert emptied["calls"]
    scenario.update(emptied)
    done = retryproof_here("validate-report", written(tmp_path, "report.json", document))
    assert done.returncode == 1, done.stdout + done.stderr
    (problem,) = done.stderr.splitlines()[:-1]
    assert f": {scenario_id} is passed, but {says}" in problem, problem


def test_a_not_applicable_result_carries_what_it_was_judged_on_and_a_failure_its_reason(tmp_path):
    """not_applicable counts as met (VERDICT-R1), so it owes the same; a failure, an
    error and a skip stand on their reasons (a harness may die before any call)."""
    document = sample("reference")
    scenario = next(s for s in document["scenarios"] if s["id"] == "CRASH-AFTER-RESERVE")
    scenario.update(status="not_applicable", reason="the runtime finished the creation at start-up")
    done = retryproof_here("validate-report", written(tmp_path, "kept.json", rejudged(document)))
    assert done.returncode == 0, done.stderr
    scenario.update(evidence={}, calls=[])
    done = retryproof_here("validate-report", written(tmp_path, "emptied.json", rejudged(document)))
    assert done.returncode == 1 and "CRASH-AFTER-RESERVE is not_applicable, but its evidence is empty" in done.stderr
    scenario.update(status="failed", reason="the retry made a second task")
    done = retryproof_here("validate-report", written(tmp_path, "failed.json", rejudged(document)))
    assert done.returncode == 0, done.stderr
