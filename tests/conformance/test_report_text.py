"""What a reader sees is whole and one: the console keeps a failure's replay path,
report.md lists every scenario behind a checklist answer and every item of an evidence
list, the kill matrix states each defect in full, report.md and report.html count the
same dispositions, and report.html's banner takes the badges' tone."""

import io
import json
import re

import pytest

from retryproof.conformance.catalogue import catalogue, entry
from retryproof.conformance.events import (
    RunFinished,
    RunInfo,
    ScenarioFinished,
    ScenarioResult,
)
from retryproof.conformance.verdict import judge
from retryproof.conformance.writers.badge import COLOURS, render_badge
from retryproof.conformance.writers.console import ConsoleWriter
from retryproof.conformance.writers.html import render_html
from retryproof.conformance.writers.markdown import render_markdown
from retryproof.conformance.writers.svg import render_checklist_badge

REPLAY_HINT = "re-run it with: retryproof replay <report dir>/replays/fuzz-model-some-runtime-with-a-long-name-seed1234567890.json and the reproduce line's --harness or --binding"


def result(scenario_id, status="passed", reason=None, evidence=None):
    return ScenarioResult(
        entry(scenario_id), status, reason, 0.1, f"retryproof run --only {scenario_id} --seed 7", evidence or {}
    )


def a_run(results, black_box=False):
    info = RunInfo(
        "0.1.0",
        "1.0.0",
        "retryproof-harness/1",
        {"name": "r", "version": "1", "language": "x"},
        "",
        ("write_task",),
        (),
        7,
        8,
        "2026-01-01T00:00:00+00:00",
        black_box=black_box,
    )
    return RunFinished(info, tuple(results), judge(results, black_box=black_box), 1.0)


def test_the_console_keeps_a_failures_replay_path_whole():
    reason = (
        "2 tasks under one submission id h1.fz-a: T-1, T-2; minimal history of 3 step(s) saved beside the report; "
        + REPLAY_HINT
    )
    stream = io.StringIO()
    ConsoleWriter(stream).handle(ScenarioFinished(result("FUZZ-MODEL", "failed", reason), 1, 1))
    assert REPLAY_HINT in stream.getvalue()


def test_the_console_stops_writing_quietly_when_its_reader_is_gone():
    class ClosedPipe(io.StringIO):
        writes = 0

        def write(self, text):
            ClosedPipe.writes += 1
            raise BrokenPipeError(32, "Broken pipe")

    writer = ConsoleWriter(ClosedPipe())
    for index in (1, 2):
        writer.handle(ScenarioFinished(result("WT-CREATE", "failed", "why"), index, 2))  # no exception
    assert ClosedPipe.writes == 1  # after the first failure it does not try again


def test_the_checklist_lists_every_scenario_behind_an_answer():
    text = render_markdown(a_run([result(item.id) for item in catalogue()]))
    checklist = text.split("## The seven checklist questions")[1].split("## Scenarios")[0]
    assert "…" not in checklist
    for item in catalogue():
        for question in item.checklist:
            row = next(line for line in checklist.splitlines() if line.startswith(f"| {question} "))
            assert item.id in row, (question, item.id)


def test_evidence_lists_are_not_cut():
    history = [f"submit h1.fz-a (nfd): created TASK-{n:04d}" for n in range(60)]
    text = render_markdown(
        a_run(
            [
                result(
                    "FUZZ-MODEL",
                    "failed",
                    "why",
                    {
                        "minimal_history": history,
                        "tasks": {"after": {"count": 45, "task_ids": [f"T-{n}" for n in range(45)]}},
                    },
                )
            ]
        )
    )
    assert "…" not in text.split("## Evidence")[1]
    for line in history:
        assert line in text
    assert "T-44" in text


def test_the_field_report_figures_are_not_called_seed():
    from retryproof.conformance.scenarios.approval_steps import (
        CONTROL_COLUMNS,
        PROBE_COLUMNS,
    )

    assert not any("(seed)" in column for column in PROBE_COLUMNS + CONTROL_COLUMNS)


def test_every_defect_in_the_kill_matrix_is_a_whole_sentence():
    from retryproof.conformance.commands.selftest import REFERENCE, bundled_runtimes

    faulty = [runtime for runtime in bundled_runtimes() if runtime.name != REFERENCE]
    assert faulty
    for runtime in faulty:
        assert runtime.defect.endswith("."), runtime


def test_the_badges_and_the_console_say_partial_for_a_partial_run_that_blocks_nothing():
    """review13: the headline said PARTIAL while both badges said "not conformant", and
    the console's tool paths "not certified" without saying why."""
    partial = a_run([result("WT-CREATE")])
    assert partial.verdict.headline.startswith("PARTIAL (")
    assert json.loads(render_badge(partial))["message"] == "partial run"
    svg = render_checklist_badge(partial)
    assert 'aria-label="retryproof: partial run; ' in svg and "not conformant" not in svg
    console = io.StringIO()
    ConsoleWriter(console).handle(partial)
    assert console.getvalue().splitlines()[1] == (
        "  Tool paths: write_task not certified · approval not certified (a partial run certifies none)"
    )
    blocked = a_run([result("WT-CREATE", "failed", "a second task")])
    assert blocked.verdict.headline.startswith("NOT CONFORMANT (")
    console = io.StringIO()
    ConsoleWriter(console).handle(blocked)
    assert console.getvalue().splitlines()[1] == "  Tool paths: write_task not certified · approval not certified"
    assert json.loads(render_badge(blocked))["message"] == "not conformant"
    assert 'aria-label="retryproof: not conformant; ' in render_checklist_badge(blocked)


#: Calls as report.json records them: a garbled answer (a success whose result broke its
#: schema) is ``info`` and keeps the disposition it claimed, as in test_review_fixes's run.
GARBLED = 'write_task result violates its schema at (result) (rule required): "idempotent" is missing'
CREATED, REUSED = (
    {"op": "write_task", "process": 1, "client_submission_id": "k", "disposition": d} for d in ("created", "reused")
)
CALLS = (
    {**CREATED, "kind": "ok"},
    {"op": "kill", "kind": "fault", "process": 1},
    {"op": "write_task", "kind": "info", "process": 1, "client_submission_id": "k", "message": "killed"},
    {**REUSED, "kind": "ok"},
    {**REUSED, "kind": "info", "message": GARBLED, "failure": "about"},
    {**CREATED, "kind": "info", "client_submission_id": "j", "message": GARBLED},
    {"op": "write_task", "kind": "fail", "process": 1, "client_submission_id": "k", "disposition": "conflict"},
)


@pytest.mark.parametrize(
    ("calls", "line"),
    [
        (
            CALLS,
            "created=1, reused=1, conflict=1; 2 garbled answers (indeterminate, not counted: claimed reused=1, created=1)",
        ),
        (CALLS[4:5], "1 garbled answer (indeterminate, not counted: claimed reused=1)"),
    ],
)
def test_the_dispositions_line_counts_only_accepted_answers_and_garbled_ones_apart(calls, line):
    """A reviewer reads the dispositions line as what the runtime did: a garbled answer
    vouches for nothing (the timeline draws it indeterminate), so it is not counted as
    the reuse or creation it claimed; report.md and report.html say the same."""
    run = a_run([ScenarioResult(entry("A2-RESPONSE-LOSS"), "failed", GARBLED, 0.1, "retryproof run", {}, calls)])
    assert f"- dispositions: {line}\n" in render_markdown(run)
    assert f"<li>dispositions: {line}</li>" in render_html(run)


def every_scenario(*failed):
    return [result(item.id, "failed" if item.id in failed else "passed", "why") for item in catalogue()]


@pytest.mark.parametrize(
    ("results", "black_box", "headline", "expected"),
    [
        (every_scenario(), False, "CONFORMANT", "conformant"),
        (every_scenario(), True, "CONFORMANT (black-box: ", "conformant"),
        (every_scenario("WT-CREATE"), False, "NOT CONFORMANT", "blocked"),
        (every_scenario("WT-CREATE"), True, "NOT CONFORMANT", "blocked"),
        ([result("WT-CREATE", "failed", "why")], False, "NOT CONFORMANT (partial run: ", "blocked"),
        ([result("WT-CREATE")], False, "PARTIAL (partial run: ", "partial"),
        ([result("WT-CREATE")], True, "PARTIAL (partial run: ", "partial"),
    ],
)
def test_the_banner_and_both_badges_show_one_tone_for_every_verdict(results, black_box, headline, expected):
    """The banner's colour comes from the badges' tone, not a decision of its own: its
    class is the tone badge.json is coloured by, and its background badge.svg's fill."""
    run = a_run(results, black_box)
    assert run.verdict.headline.startswith(headline) and run.verdict.black_box == black_box
    page = render_html(run)
    (banner,) = re.findall(r'<div class="banner ([a-z]+)" id="verdict">', page)
    (background,) = re.findall(rf"\.banner\.{banner}\{{background:(#[0-9a-f]{{6}})\}}", page)
    assert banner == expected and COLOURS[banner] == json.loads(render_badge(run))["color"]
    fills = re.findall(r'<rect [^>]*fill="(#[0-9a-f]+)"/>', render_checklist_badge(run))
    assert background == fills[1]  # badge.svg's second segment is the verdict's (the first says retryproof)
