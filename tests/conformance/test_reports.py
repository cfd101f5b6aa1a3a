"""Report writers: hostile harness strings are escaped in markdown and XML; report.json
validates; validate-report tells a good file from a corrupt one."""

import json
import re
import xml.etree.ElementTree as ET

from kit import retryproof_here

from retryproof import spec
from retryproof.conformance.catalogue import entry
from retryproof.conformance.events import RunFinished, RunInfo, ScenarioResult
from retryproof.conformance.verdict import judge
from retryproof.conformance.writers.document import report_document
from retryproof.conformance.writers.escape import md_inline
from retryproof.conformance.writers.junit import render_junit
from retryproof.conformance.writers.markdown import render_markdown

HOSTILE = "evil | `code` <script>alert(1)</script>\n## PASSED\x00\x1b[31m ]]>"


def hostile_run():
    info = RunInfo(
        "0.1.0",
        "1.0.0",
        "retryproof-harness/1",
        {"name": HOSTILE, "version": HOSTILE, "language": "x"},
        "--harness fake",
        ("write_task",),
        (),
        7,
        8,
        "2026-01-01T00:00:00+00:00",
    )
    results = (
        ScenarioResult(
            entry("WT-CREATE"),
            "failed",
            HOSTILE,
            0.5,
            "retryproof run --only WT-CREATE --seed 7 --harness fake",
            {"tasks": {"before": {"count": 0, "task_ids": [HOSTILE]}}, "note": HOSTILE},
            ({"op": "write_task", "kind": "ok", "task_id": HOSTILE, "message": HOSTILE},),
            HOSTILE + "\n```\nstill inside?",
        ),
        ScenarioResult(
            entry("A2-RESPONSE-LOSS"),
            "passed",
            None,
            0.2,
            "retryproof run --only A2-RESPONSE-LOSS --seed 7",
            # A pass carries what it was judged on, or validate-report refuses it.
            {"tasks": {"after": {"count": 1, "task_ids": ["t1"]}}},
            ({"op": "write_task", "kind": "ok", "disposition": "created", "task_id": "t1"},),
        ),
    )
    return RunFinished(info, results, judge(results, capabilities=info.capabilities), 0.7)


def test_markdown_cannot_be_forged_by_harness_strings():
    text = render_markdown(hostile_run())
    assert "\x00" not in text and "\x1b" not in text
    # Outside code fences (where HTML is not rendered) no tag survives; the stderr,
    # which holds a ``` run, sits in a longer fence it cannot close.
    fenced = re.findall(r"^(`{3,})text\n.*?\n\1$", text, flags=re.S | re.M)
    assert "````" in fenced
    outside = re.sub(r"^(`{3,})text\n.*?\n\1$", "", text, flags=re.S | re.M)
    assert "<script>" not in outside and "still inside?" not in outside
    assert "\n## PASSED" not in outside  # a harness newline cannot start a heading
    for line in text.splitlines():
        if line.startswith("|") and "evil" in line:
            # every pipe that is not a column separator is escaped
            assert "evil | " not in line and "evil \\| " in line
    assert md_inline("a|b`c`<i>") == "a\\|b\\`c\\`&lt;i&gt;"


def test_junit_is_well_formed_with_hostile_strings():
    root = ET.fromstring(render_junit(hostile_run()).encode())
    cases = {case.get("name"): case for case in root.iter("testcase")}
    assert cases["WT-CREATE"].find("failure") is not None
    assert cases["A2-RESPONSE-LOSS"].find("failure") is None
    assert root.get("failures") == "1" and root.get("tests") == "2"
    assert "<script>" in cases["WT-CREATE"].find("failure").get("message")  # kept as text, escaped by XML


def test_report_json_validates_against_the_report_schema():
    document = json.loads(json.dumps(report_document(hostile_run())))
    assert list(spec.validator("report").iter_errors(document)) == []
    assert document["verdict"]["conformant"] is False


def run_cli(*args):
    """``retryproof ARGS`` in this process (``kit.retryproof_here``): these tests are
    about the answer (exit code, error and hint), which is the same; an uncaught exception
    fails the test as a traceback would."""
    return retryproof_here(*args)


def test_validate_report_good_corrupt_and_unreadable(tmp_path):
    good = tmp_path / "report.json"
    good.write_text(json.dumps(report_document(hostile_run())))
    assert run_cli("validate-report", str(good)).returncode == 0
    corrupt = tmp_path / "corrupt.json"
    document = report_document(hostile_run())
    document["verdict"]["conformant"] = True  # conformant with blocking scenarios is a lie
    corrupt.write_text(json.dumps(document))
    done = run_cli("validate-report", str(corrupt))
    assert done.returncode == 1 and "INVALID" in done.stderr
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{not json")
    done = run_cli("validate-report", str(garbage))
    assert done.returncode == 2 and done.stderr.startswith("error:") and "Traceback" not in done.stderr


def test_bad_arguments_exit_2(tmp_path):
    for args in (
        ["--only", "NO-SUCH-ID"],
        ["--format", "pdf"],
        ["--baseline", str(tmp_path / "missing.yaml")],
        ["--harness", "'unclosed"],
    ):
        done = run_cli("run", *args, "--out", str(tmp_path))
        assert done.returncode == 2, args
        assert done.stderr.startswith("error:") and "hint:" in done.stderr and "Traceback" not in done.stderr


def test_a_reproduce_line_names_every_option_and_variable_that_changes_behaviour():
    from retryproof.conformance.options import Options
    from retryproof.conformance.runner import reproduce_line

    default = Options(("harness",), "--harness 'node h.js'", 5)
    assert reproduce_line(default, "WT-CREATE") == "retryproof run --only WT-CREATE --seed 5 --harness 'node h.js'"
    tuned = Options(("harness",), "", 5, concurrency=3, call_timeout=2.5, start_timeout=10.0)
    line = reproduce_line(tuned, "FUZZ-MODEL", {"RETRYPROOF_FUZZ_PROFILE": "retryproof-ci"})
    assert (
        line
        == "RETRYPROOF_FUZZ_PROFILE=retryproof-ci retryproof run --only FUZZ-MODEL --seed 5 --concurrency 3 --call-timeout 2.5"
    )


def test_report_md_draws_each_evidence_section_as_its_scenario_finishes(tmp_path, monkeypatch):
    """The file writer draws a scenario's evidence section at its ScenarioFinished, and
    the report it writes at the end is the one ``render_markdown`` draws in one go."""
    from retryproof.conformance.events import RunStarted, ScenarioFinished
    from retryproof.conformance.writers import markdown
    from retryproof.conformance.writers.files import ReportFileWriter

    run = hostile_run()
    whole = render_markdown(run)
    writer = ReportFileWriter(str(tmp_path), "md")
    writer.handle(RunStarted(run.info, len(run.results)))
    drawn = []
    original = markdown._evidence
    monkeypatch.setattr(
        markdown, "_evidence", lambda result, black_box: drawn.append(result) or original(result, black_box)
    )
    for index, result in enumerate(run.results, 1):
        writer.handle(ScenarioFinished(result, index, len(run.results)))
    assert drawn == list(run.results)
    writer.handle(run)
    assert drawn == list(run.results)  # none drawn again at the end
    assert (tmp_path / "report.md").read_text() == whole
