"""Pictures for reviewers: the history's times and lanes in report.json, the timelines
report.html draws from them (judged in real headless Chromium against report.json), the
comparison and kill-matrix grids, and badge.svg.

Known timing comes from ``fake_harness.py serial-delay``: one write_task at a time, each
taking ``SERIAL_DELAY_S``, so eight pipelined calls are all in flight together and answer
one after another, the creator first. ``serial-double-create`` does the same but
creates on every call: RESTART-REUSE fails on one known call (a retry answers created),
A4-CONCURRENT on a count over its first round.
"""

from __future__ import annotations

import itertools
import json
import os
import re
from html.parser import HTMLParser

import headless_chromium
import jsonschema
import pytest
from kit import REFERENCE, STDLIB_PYTHON, once_per_session
from kit import certify as kit_certify

from retryproof.conformance.catalogue import catalogue, entry
from retryproof.conformance.commands import selftest
from retryproof.conformance.commands.compare import Column, _scenario_cell, load_columns, write_comparison
from retryproof.conformance.events import RunFinished, RunInfo, ScenarioResult
from retryproof.conformance.scenarios.retries import A4_IDS_PER_ROUND, A4_ROUNDS
from retryproof.conformance.verdict import judge
from retryproof.conformance.writers import timeline
from retryproof.conformance.writers.html import render_html
from retryproof.conformance.writers.svg import render_checklist_badge
from retryproof.spec import schema

FAKE = os.path.join(os.path.dirname(__file__), "fake_harness.py")
SERIAL_DELAY_MS = 40  # fake_harness.SERIAL_DELAY_S
#: How far apart two bars' right edges may be drawn from their ends' true distance: x and
#: width each rounded to 0.1 px (writers/svg.py).
DRAWN_TO_PX = 0.2
HOSTILE = "</title></svg><script>alert(1)</script><img src=x onerror=alert(2)>&amp;\"'\x1b[31m"


def certify(out, mode):
    # In this process (kit.certify): what is drawn is what the run recorded, not the process.
    harness = f"{STDLIB_PYTHON} {FAKE} {mode}"
    done, report = kit_certify(
        out, harness, "--only", "A4-CONCURRENT,RESTART-REUSE", seed=7, formats="json,html", in_process=True
    )
    assert done.returncode in (0, 1) and report is not None, done.stderr
    return {
        "out": str(out),
        "report": report,
        "dom": headless_chromium.dump_dom(str(out / "report.html")),
        "html": (out / "report.html").read_text(),
    }


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    return once_per_session(tmp_path_factory, "timeline-serial", lambda out: certify(out, "serial-delay"))


@pytest.fixture(scope="module")
def double(tmp_path_factory):
    return once_per_session(tmp_path_factory, "timeline-double", lambda out: certify(out, "serial-double-create"))


class Pictures(HTMLParser):
    """The SVG of each figure as Chromium built it: bars (``<a data-call>`` and the
    rect inside), fault lines, lane labels, ids and links."""

    def __init__(self):
        super().__init__()
        self.figure = None
        self.bars: dict[str, dict[int, dict]] = {}
        self.lines: dict[str, list[float]] = {}
        self.listed: dict[str, list[float]] = {}  # the diamonds where an effect first shows
        self.texts: dict[str, list[str]] = {}
        self.ids: dict[str, tuple[str, dict]] = {}
        self.links: list[str] = []
        self.tags: list[tuple[str, dict]] = []
        self._bar = None
        self._in_text = False

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        self.tags.append((tag, attributes))
        if "id" in attributes:
            self.ids[attributes["id"]] = (tag, attributes)
        if tag == "a" and "href" in attributes:
            self.links.append(attributes["href"])
        if tag == "figure":
            self.figure = attributes.get("id")
            self.bars[self.figure], self.lines[self.figure], self.texts[self.figure] = {}, [], []
            self.listed[self.figure] = []
        elif tag == "a" and "data-call" in attributes and self.figure:
            self._bar = {key: attributes[key] for key in ("data-lane", "data-outcome")} | {"id": attributes.get("id")}
            self.bars[self.figure][int(attributes["data-call"])] = self._bar
        elif tag == "rect" and self._bar is not None and "x" not in self._bar:
            self._bar.update(x=float(attributes["x"]), width=float(attributes["width"]))
        elif tag == "line" and self.figure and attributes.get("class") == "fault":
            self.lines[self.figure].append(float(attributes["x1"]))
        elif tag == "path" and self.figure and attributes.get("class") == "listed":
            self.listed[self.figure].append(float(attributes["d"][1:].split(",")[0]))
        elif tag == "text" and self.figure:
            self._in_text = True

    def handle_endtag(self, tag):
        if tag == "a":
            self._bar = None
        elif tag == "figure":
            self.figure = None
        elif tag == "text":
            self._in_text = False

    def handle_data(self, data):
        if self._in_text and self.figure:
            self.texts[self.figure].append(data)


def pictures(dom: str) -> Pictures:
    parser = Pictures()
    parser.feed(dom)
    return parser


def scenario(report, scenario_id):
    return next(s for s in report["scenarios"] if s["id"] == scenario_id)


def expected_outcome(call):
    return call.get("disposition") or ("lost" if call["kind"] == "info" and "error" not in call else "ok")


def scale(bars, calls):
    """Pixels per millisecond, from the earliest and the latest bar's start."""
    first, last = min(bars, key=lambda n: calls[n - 1]["start_ms"]), max(bars, key=lambda n: calls[n - 1]["start_ms"])
    return (bars[last]["x"] - bars[first]["x"]) / (calls[last - 1]["start_ms"] - calls[first - 1]["start_ms"])


def test_every_call_and_fault_is_timed_and_laned_and_the_report_validates(serial):
    report = serial["report"]
    jsonschema.Draft202012Validator(schema("report")).validate(report)
    for item in report["scenarios"]:
        for call in item["calls"]:
            assert 0 <= call["start_ms"] <= call["end_ms"], call
            if call["kind"] != "fault":
                assert call["lane"] >= 0 and call["connection"] == 1, call
    lanes = {call["lane"] for call in scenario(report, "A4-CONCURRENT")["calls"]}
    assert lanes == set(range(1 + 8 * A4_IDS_PER_ROUND))  # the scenario's own calls and every caller of a round
    faults = [call["op"] for call in scenario(report, "RESTART-REUSE")["calls"] if call["kind"] == "fault"]
    assert faults == ["shutdown", "start", "kill", "start"]


def test_pipelined_calls_overlap_and_answer_one_at_a_time_the_creator_first(serial):
    """Known timing: each round's eight calls are all sent before the first answer, and
    the serial runtime answers them one by one, each after its own delay: the batch's
    calls carry their own ends, not the batch's."""
    calls = scenario(serial["report"], "A4-CONCURRENT")["calls"]
    rounds: dict[str, list[dict]] = {}
    for call in calls:
        if call["op"] == "write_task":
            rounds.setdefault(call["client_submission_id"], []).append(call)
    assert len(rounds) == A4_ROUNDS * A4_IDS_PER_ROUND
    for batch in rounds.values():
        ends = sorted(call["end_ms"] for call in batch)
        assert max(call["start_ms"] for call in batch) < ends[0]  # all in flight together
        assert len(set(ends)) == 8
        assert min(batch, key=lambda call: call["end_ms"])["disposition"] == "created"
        # eight delays in a row; a loaded machine may read two answers late together, never early
        assert ends[-1] - min(call["start_ms"] for call in batch) >= 8 * SERIAL_DELAY_MS * 0.9


def test_the_timeline_in_chromium_draws_the_history_of_report_json(serial):
    """Every timed call is a bar on its lane with its outcome; the bars' positions are
    one linear scale of report.json's times, so their order and overlap are the
    history's; the faults are lines at their moments."""
    found = pictures(serial["dom"])
    for scenario_id in ("A4-CONCURRENT", "RESTART-REUSE"):
        calls = scenario(serial["report"], scenario_id)["calls"]
        bars = found.bars[f"s-{scenario_id}-t"]
        expected = {n: call for n, call in enumerate(calls, 1) if call["kind"] != "fault"}
        assert set(bars) == set(expected)
        for n, bar in bars.items():
            assert (int(bar["data-lane"]), bar["data-outcome"]) == (expected[n]["lane"], expected_outcome(expected[n]))
        k = scale(bars, calls)
        assert k > 0
        origin = {n: bar["x"] - k * calls[n - 1]["start_ms"] for n, bar in bars.items()}
        assert max(origin.values()) - min(origin.values()) < 1.0  # one linear time axis
        for n, bar in bars.items():
            call = calls[n - 1]
            assert bar["width"] == pytest.approx(max(k * (call["end_ms"] - call["start_ms"]), 2.0), abs=0.2)
        faults = [call for call in calls if call["kind"] == "fault"]
        lines = found.lines[f"s-{scenario_id}-t"]
        assert len(lines) == len(faults)
        for fault, x in zip(faults, lines, strict=True):
            assert x == pytest.approx(min(origin.values()) + k * fault["start_ms"], abs=1.0)
        # A diamond at the end of each listing that held more tasks than any before it.
        growth, most = [], 0
        for call in calls:
            if call.get("listed", 0) > most:
                growth.append(call["end_ms"])
                most = call["listed"]
        diamonds = found.listed[f"s-{scenario_id}-t"]
        assert diamonds == pytest.approx([min(origin.values()) + k * end for end in growth], abs=1.0)
        assert len(diamonds) == (A4_ROUNDS if scenario_id == "A4-CONCURRENT" else 1)  # new tasks per round; one task
    # A4: each round's bars overlap pairwise and end, left to right, in the order of report.json,
    # wherever the drawing can tell two ends apart: x and width are drawn to 0.1 px, and a
    # loaded machine reads two answers together, their ends a fraction of a pixel apart (seen
    # twice: the tie drawn in the calls' order, not their ends').
    calls = scenario(serial["report"], "A4-CONCURRENT")["calls"]
    bars = found.bars["s-A4-CONCURRENT-t"]
    k = scale(bars, calls)
    lanes = [text for text in found.texts["s-A4-CONCURRENT-t"] if text == "scenario" or text.startswith("caller ")]
    assert lanes == ["scenario"] + [f"caller {n}" for n in range(1, 1 + 8 * A4_IDS_PER_ROUND)]
    writes = [n for n in bars if calls[n - 1]["op"] == "write_task"]
    ordered = 0
    for start in range(0, len(writes), 8):
        batch = writes[start : start + 8]
        right = {n: bars[n]["x"] + bars[n]["width"] for n in batch}
        for a, b in itertools.combinations(batch, 2):
            apart = calls[b - 1]["end_ms"] - calls[a - 1]["end_ms"]
            if abs(k * apart) > DRAWN_TO_PX:
                assert (right[b] - right[a]) * apart > 0, (a, b, apart, right[a], right[b])
                ordered += 1
        assert max(bars[n]["x"] for n in batch) < min(right.values())
    assert ordered > len(writes) / 8 * 28 / 2, "most pairs' ends a delay apart, drawn apart"
    caption = "".join(found.texts["s-RESTART-REUSE-t"])
    assert "1" in caption and "4" in caption  # the marks are numbered
    assert "SIGKILL (process 2)" in serial["html"] and "shutdown (process 1)" in serial["html"]


def test_the_failing_call_is_outlined_and_linked_from_the_failure_line(double):
    report, found = double["report"], pictures(double["dom"])
    calls = scenario(report, "RESTART-REUSE")["calls"]
    failing = [n for n, call in enumerate(calls, 1) if call.get("failure")]
    assert len(failing) == 1 and calls[failing[0] - 1]["disposition"] == "created"  # the retry that created again
    assert calls[failing[0] - 1]["failure"] == "about"
    tag, attributes = found.ids["s-RESTART-REUSE-t-failing"]
    assert tag == "a" and int(attributes["data-call"]) == failing[0]
    assert attributes["href"] == f"#s-RESTART-REUSE-call-{failing[0]}"
    assert found.ids[f"s-RESTART-REUSE-call-{failing[0]}"][0] == "tr"  # the bar's row exists
    assert found.links.count("#s-RESTART-REUSE-t-failing") == 2  # from the failures list and the reason
    assert "Outlined: the call the failure is about, call" in double["html"]
    # A4 fails on a count over a whole round, about no one call: the last call made before
    # the judgement is outlined, and said to be; the listing gathered after the failure is not.
    tag, attributes = found.ids["s-A4-CONCURRENT-t-failing"]
    a4 = scenario(report, "A4-CONCURRENT")["calls"]
    [before] = [n for n, call in enumerate(a4, 1) if call.get("failure")]
    assert a4[before - 1]["failure"] == "before" and int(attributes["data-call"]) == before
    assert before < len(a4) and a4[-1]["op"] == "list_tasks"  # the runner's "at failure" listing came after
    assert "the last call before the failure" in double["html"]
    created = [bar for bar in found.bars["s-A4-CONCURRENT-t"].values() if bar["data-outcome"] == "created"]
    assert len(created) == 8 * A4_IDS_PER_ROUND  # every caller of the first round created: the picture says so


def run_of(*results: ScenarioResult, name="r") -> RunFinished:
    info = RunInfo("0.1.0", "3.0.0", "retryproof-harness/1", {"name": name, "version": "1"}, "", (), (), 7, 8, "now")
    return RunFinished(info, results, judge(results), 1.0)


def hostile_calls():
    return (
        {"op": "list_tasks", "kind": "ok", "process": 1, "start_ms": 0.0, "end_ms": 1.0, "lane": 0, "listed": 0},
        {
            "op": HOSTILE,
            "kind": "info",
            "process": 1,
            "start_ms": 2.0,
            "end_ms": 9.0,
            "lane": 1,
            "client_submission_id": HOSTILE,
            "error": HOSTILE,
            "message": HOSTILE,
            "failure": "about",
        },
        {"op": "kill", "kind": "fault", "process": 1, "start_ms": 5.0, "end_ms": 5.5, "message": HOSTILE},
        {"op": HOSTILE, "kind": "fault", "process": 2, "start_ms": 6.0, "end_ms": 8.0, "message": HOSTILE},
        {"op": "start", "kind": "fault", "process": 2, "start_ms": 6.0, "end_ms": 8.0},
        {"op": "start", "kind": "fault", "process": 3, "start_ms": 10.0, "end_ms": 12.0},
        {"op": "write_task", "kind": "ok", "process": 3, "start_ms": 13, "end_ms": 14, "lane": 0,
         "client_submission_id": HOSTILE, "disposition": "reused", "task_id": HOSTILE},
    )  # fmt: skip


def test_hostile_strings_stay_inert_inside_the_svg(tmp_path):
    result = ScenarioResult(entry("KILL-NEMESIS"), "failed", HOSTILE, 0.1, "r", {}, hostile_calls())
    page = tmp_path / "report.html"
    page.write_text(render_html(run_of(result, name=HOSTILE)))
    found = pictures(headless_chromium.dump_dom(str(page)))
    tags = [tag for tag, _ in found.tags]
    assert "script" not in tags and "img" not in tags and "foreignobject" not in tags
    assert not [attrs for _, attrs in found.tags if any(name.startswith("on") for name in attrs)]
    assert tags.count("svg") == 2  # the timeline and the restart strip, neither broken open
    assert set(found.bars["s-KILL-NEMESIS-t"]) == {1, 2, 7}
    assert found.ids["s-KILL-NEMESIS-t-failing"][1]["data-call"] == "2"
    raw = page.read_text()
    assert "<script>" not in raw and "\x1b" not in raw and "&lt;/title&gt;&lt;/svg&gt;&lt;script&gt;" in raw


def test_a_1280px_screenshot_shows_every_column_of_a_failing_rows_calls(tmp_path):
    """A 129-character id, a long message and a long task id in a failing scenario's
    calls: at 1280 px every column of the calls table is on screen (each column is
    painted its own colour for the test; a column pushed off the page has no pixels).
    The same page with the whole values in the cells and the table laid out by its
    content loses columns: the test can fail."""
    long_id = "k" * 129
    call = {
        "op": "write_task",
        "kind": "fail",
        "process": 1,
        "start_ms": 1.0,
        "end_ms": 2.0,
        "lane": 0,
        "client_submission_id": long_id,
        "request_digest": "sha256:" + "ab" * 32,
        "disposition": "conflict",
        "action_taken": False,
        "task_id": "TASK-" + "9" * 60,
        "conflict_reason": "digest_mismatch",
        "error": "invalid_submission_id",
        "message": "x" * 80 + " " + "the message goes on and on " * 8,
        "failure": "about",
    }
    result = ScenarioResult(entry("WT-CREATE"), "failed", "why", 0.1, "r", {}, (call,) * 3)
    text = render_html(run_of(result))
    assert f'title="{long_id}"' in text  # the whole id on hover; report.json keeps it whole too
    head, body = text[: text.index("<h1>")], text[text.index('<details id="s-WT-CREATE"') :]
    body = body[: body.index("</details>") + len("</details>")]
    colours = [(0x10 * n, 0xF0 - 0x10 * n, 0x33) for n in range(1, 13)]
    paint = "".join(
        f"table.calls td:nth-child({n}){{background:rgb{colour};color:rgb{colour}}}"
        for n, colour in enumerate(colours, 1)
    )
    # The control: the whole values in the cells and the table laid out by its content.
    whole = re.sub(r'<td title="([^"]*)">.*?</td>', r"<td>\1</td>", body)
    control = "table.calls{table-layout:auto;width:auto}table.calls td{overflow-wrap:normal}"
    counts = {}
    for name, page_body, extra in (("fits", body, ""), ("auto", whole, control)):
        page = tmp_path / f"{name}.html"
        page.write_text(f"{head}<style>{paint}{extra}body{{overflow:hidden}}</style><body>{page_body}</body></html>")
        counts[name] = headless_chromium.screenshot(str(page), str(tmp_path / f"{name}.png"), 1280, 1400)
    missing = [n for n, colour in enumerate(colours, 1) if counts["fits"][colour] < 200]
    assert not missing, f"columns off the page at 1280 px: {missing}"
    assert any(counts["auto"][colour] < 200 for colour in colours)


def test_the_restart_strip_says_what_each_key_answered_after_each_restart():
    def write(key, process, disposition=None, kind="ok"):
        call = {"op": "write_task", "kind": kind, "process": process, "client_submission_id": key}
        return call | ({"disposition": disposition} if disposition else {})

    calls = (
        write("a", 1, "created"),
        write("b", 1, kind="info"),  # cut by the kill
        {"op": "kill", "kind": "fault", "process": 1},
        {"op": "start", "kind": "fault", "process": 2},
        write("b", 2, "created"),
        write("a", 2, "reused"),
        {"op": "start", "kind": "fault", "process": 3},  # after a crash: no kill recorded
        write("b", 3, "reused"),
    )
    picture = timeline.strip(ScenarioResult(entry("KILL-NEMESIS"), "passed", None, 0.1, "r", {}, calls))
    assert picture is not None and picture.keys == ("a", "b")
    assert [(cell.outcome, cell.cut) for cell in picture.cells[0]] == [("reused", False), (None, False)]
    assert [(cell.outcome, cell.cut) for cell in picture.cells[1]] == [("created", True), ("reused", False)]
    assert picture.columns[0].endswith("after SIGKILL (process 1)") and picture.columns[1].endswith("after a crash")
    one_restart = ScenarioResult(entry("KILL-NEMESIS"), "passed", None, 0.1, "r", {}, calls[:6])
    assert timeline.strip(one_restart) is None  # one restart reads well on the timeline alone


def test_reports_without_times_still_validate_and_draw_no_timeline():
    old = {"op": "write_task", "kind": "ok", "process": 1, "ms": 3.0, "disposition": "created"}
    result = ScenarioResult(entry("WT-CREATE"), "passed", None, 0.1, "r", {}, (old,))
    assert timeline.timeline(result) is None and 'class="timeline"' not in render_html(run_of(result))
    calls = schema("report")["properties"]["scenarios"]["items"]["$ref"]
    assert calls == "#/$defs/scenario"
    item = schema("report")["$defs"]["scenario"]["properties"]["calls"]["items"]
    validator = jsonschema.Draft202012Validator(item)
    assert validator.is_valid(old)
    assert validator.is_valid(old | {"start_ms": 1.0, "end_ms": 4.0, "lane": 2, "connection": 1})
    assert not validator.is_valid(old | {"start_ms": 1.0})  # a start without its end
    assert not validator.is_valid(old | {"lane": -1})


def test_the_comparison_grid_tones_its_cells_and_links_a_failure_to_its_timeline(serial, double, tmp_path):
    out = tmp_path / "compare"
    write_comparison(load_columns([f"{serial['out']}/report.json", f"{double['out']}/report.json"]), str(out))
    page = (out / "comparison.html").read_text()
    row = page.split("<th>RESTART-REUSE (MUST)</th>")[1].split("</tr>")[0]
    cells = re.findall(r'<td class="([^"]+)"[^>]*>(.*?)</td>', row)
    assert cells[0] == ("pass", "pass")
    link = re.fullmatch(r'<a href="([^"#]+)#([^"]+)">FAIL</a>', cells[1][1])
    assert cells[1][0] == "fail" and link, cells
    assert link.group(2) == "s-RESTART-REUSE-t-failing"
    assert f'id="{link.group(2)}"' in (out / link.group(1)).read_text()  # the outlined call on the timeline
    q4 = page.split("<th>Q4 ")[1].split("</tr>")[0]
    assert re.findall(r'<td class="([^"]+)"', q4) == ["pass", "fail"]  # yes, no
    assert '<td class="not-verified">unverified</td>' in page and "default-src 'none'" in page
    pixels = headless_chromium.screenshot(str(out / "comparison.html"), str(tmp_path / "grid.png"), 1280, 2400)
    assert pixels[(0xFF, 0xD8, 0xD3)] > 500 and pixels[(0xDA, 0xFB, 0xE1)] > 500  # fail and pass cells


def test_a_skip_is_not_verified_or_not_covered_as_the_verdict_says(serial):
    document = json.loads(json.dumps(serial["report"]))
    for item in document["scenarios"]:
        item["status"], item["reason"] = "skipped", "the runtime does not provide x"
    document["verdict"]["blocking"] = [{"id": "A4-CONCURRENT", "why": "not verified: x"}]
    document["verdict"]["not_covered"] = [{"id": "RESTART-REUSE", "why": "optional x"}]
    column = Column("c", "report.json", document, "report.json", None)
    assert (_scenario_cell(column, "A4-CONCURRENT", ".").tone, _scenario_cell(column, "A4-CONCURRENT", ".").text) == (
        "not-verified",
        "not verified",
    )
    assert _scenario_cell(column, "RESTART-REUSE", ".").tone == "not-covered"
    assert _scenario_cell(column, "WT-CREATE", ".").tone == "none"


def test_the_kill_matrix_grid_links_a_killed_runtime_to_its_failing_call(tmp_path):
    runtime = next(r for r in selftest.bundled_runtimes() if r.name == "legacy-says-idempotent")
    runs = {}
    outcomes = selftest.run_all([runtime], seed=0, jobs=1, runs=runs)
    ids = [item.id for item in catalogue()]
    written = selftest.write_files(str(tmp_path), [runtime], outcomes, ids, [], 0, 1.0, 1, runs)
    assert str(tmp_path / "legacy-says-idempotent" / "report.html") in written
    page = (tmp_path / "kill-matrix.html").read_text()
    cells = re.findall(r'<td class="([^"]+)"[^>]*>(.*?)</td>', page)
    assert len(cells) == len(ids)
    killer = cells[ids.index("LEGACY-NO-ID")]
    assert killer[0] == "fail marked"
    href = re.fullmatch(r'<a href="([^"#]+)#([^"]+)">FAIL</a>', killer[1])
    assert href and href.group(2) == "s-LEGACY-NO-ID-t-failing"
    assert f'id="{href.group(2)}"' in (tmp_path / href.group(1)).read_text()
    assert {cell for n, cell in enumerate(cells) if ids[n] != "LEGACY-NO-ID"} == {("none", "-")}


def test_the_checklist_badge_gives_each_answer_a_glyph_and_a_colour(tmp_path):
    from xml.etree import ElementTree

    results = tuple(ScenarioResult(item, "passed", None, 0.1, "r") for item in catalogue())
    failed = tuple(
        ScenarioResult(r.entry, "failed", "why", 0.1, "r") if r.entry.id == "A4-CONCURRENT" else r for r in results
    )
    for run, message in ((run_of(*results), "conformant"), (run_of(*failed), "not conformant")):
        text = render_checklist_badge(run)
        root = ElementTree.fromstring(text)  # well-formed XML, for an <img> in a README
        labels = [element.text for element in root.iter("{http://www.w3.org/2000/svg}text")]
        answers = {answer.question: answer.answer for answer in run.verdict.checklist}
        glyphs = {"yes": "✓", "no": "✗", "unverified": "?", "not applicable": "–"}
        assert labels == ["retryproof", message, *(f"{q}{glyphs[a]}" for q, a in answers.items())]
    assert answers["Q4"] == "no"
    badge = tmp_path / "badge.svg"
    badge.write_text(text)
    pixels = headless_chromium.screenshot(str(badge), str(tmp_path / "badge.png"), 500, 60)
    assert pixels[(0xCF, 0x22, 0x2E)] > 300 and pixels[(0x1A, 0x7F, 0x37)] > 300  # the red no, the green yes


def test_fuzz_models_minimal_history_is_timed_for_its_timeline(tmp_path):
    """The replay of a minimal history (a crash at a failpoint, the restart, the retry
    that creates a second task) comes back timed and laned, so FUZZ-MODEL's report
    draws it like any scenario's history."""
    from retryproof.adapters.process import ProcessConnection
    from retryproof.conformance.fuzz.model import run_steps
    from retryproof.conformance.outcome import Fault

    faulty = [*REFERENCE, "--fault", "recovery-new-number"]
    connection = ProcessConnection(faulty, str(tmp_path), call_timeout=10, start_timeout=30)
    step = {"step": "crash", "failpoint": "write_task.after_task_write", "id": "fz-a", "task": 0}
    try:
        violation, _ = run_steps(connection, [step])
    finally:
        connection.kill()
    assert violation is not None and "a second task" in str(violation)
    events = [event.summary() for event in violation.history]
    assert [(e["op"], e["kind"]) for e in events] == [
        ("kill", "fault"),
        ("start", "fault"),
        ("write_task", "info"),  # killed by its armed failpoint
        ("kill", "fault"),
        ("start", "fault"),
        ("write_task", "ok"),  # the retry created a second task
    ]
    starts = [e["start_ms"] for e in events]
    assert starts == sorted(starts) and all(e["end_ms"] >= e["start_ms"] >= 0 for e in events)
    assert isinstance(violation.history[1], Fault) and violation.history[1].failpoints
    result = ScenarioResult(entry("FUZZ-MODEL"), "failed", str(violation), 0.1, "r", {}, tuple(events))
    picture = timeline.timeline(result)
    assert picture is not None and [bar.outcome for bar in picture.bars] == ["lost", "created"]
    assert [mark.kind for mark in picture.marks] == ["kill", "start", "kill", "start"]


def test_a_report_with_odd_values_still_draws(tmp_path):
    """A merged shard's report is checked against the schema, which leaves most call
    fields open: values of other types are drawn as text or left out, never a crash."""
    odd = [["x"]]
    calls = tuple(call | {"lane": "1", "connection": odd, "process": odd, "error": odd} for call in hostile_calls())
    calls += tuple({"op": "start", "kind": "fault", "process": n, "start_ms": 20, "end_ms": 21} for n in (5, 6))
    calls += (calls[-3] | {"process": 6},)  # a key's call from the last start
    result = ScenarioResult(entry("KILL-NEMESIS"), "failed", "why", 0.1, "r", {}, calls)
    assert timeline.timeline(result) is not None and timeline.strip(result) is not None
    assert render_html(run_of(result)).count("<svg") == 2
