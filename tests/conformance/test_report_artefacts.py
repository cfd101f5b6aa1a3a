"""The artefacts reviewers and CI consume, from one real run against a lying harness
with a hostile implementation name: report.html rendered in headless Chromium, junit.xml
against a strict schema of the JUnit shape CI consumers read, badge.json, the GitHub step summary,
and report.md's fuller content; then ``retryproof diff`` between two real runs."""

from __future__ import annotations

import json
import os
import re
from html.parser import HTMLParser

import headless_chromium
import pytest
from kit import STDLIB_PYTHON, once_per_session, retryproof_here

from retryproof.conformance.catalogue import catalogue, entry
from retryproof.conformance.events import RunFinished, RunInfo, ScenarioResult
from retryproof.conformance.verdict import judge
from retryproof.conformance.writers.badge import render_badge
from retryproof.conformance.writers.html import render_html

FAKE = os.path.join(os.path.dirname(__file__), "fake_harness.py")
XSD = os.path.join(os.path.dirname(__file__), "schemas", "junit.xsd")
HOSTILE = '<script>document.title="pwned"</script><img src=x onerror=alert(1)></style>| `x` \x1b[31m'
SCENARIOS = "WT-CREATE,A2-RESPONSE-LOSS"

#: The banner colours of report.html's CSS (conformant, blocked).
GREEN, RED = (0x1A, 0x7F, 0x37), (0xCF, 0x22, 0x2E)


def kit(*args, env=None):
    """``retryproof ARGS`` in this process, ``env`` added to the environment meanwhile."""
    return retryproof_here(*args, env={**os.environ, **(env or {})})


def run_fake(out, mode, *, summary=None, name=None):
    env = {"FAKE_IMPLEMENTATION_NAME": name} if name else {}
    if summary:
        env["GITHUB_STEP_SUMMARY"] = str(summary)
    done = retryproof_here(  # in this process: the reports are what these tests read
        "run",
        "--harness",
        f"{STDLIB_PYTHON} {FAKE} {mode}",
        "--only",
        SCENARIOS,
        "--seed",
        "7",
        "--call-timeout",
        "2",
        "--out",
        str(out),
        "--format",
        "md,json,junit,html,badge",
        env={**os.environ, **env},
    )
    return done


@pytest.fixture(scope="module")
def liar(tmp_path_factory):
    return once_per_session(tmp_path_factory, "liar", certify_liar)


def certify_liar(out):
    """``liar`` hides its tasks from list_tasks, so both scenarios fail (a lost task)."""
    summary = out / "step-summary.md"
    summary.write_text("earlier step\n")
    done = run_fake(out, "liar", summary=summary, name=HOSTILE)
    assert done.returncode == 1, done.stdout + done.stderr
    return out


class Elements(HTMLParser):
    """Every element of a DOM with its attributes, and the text under each id."""

    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.text_by_id: dict[str, list[str]] = {}
        self.open_ids: list[tuple[str, str]] = []

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        self.tags.append((tag, attributes))
        if "id" in attributes and tag in ("details", "div", "h1"):
            self.open_ids.append((tag, attributes["id"]))
            self.text_by_id[attributes["id"]] = []

    def handle_endtag(self, tag):
        if self.open_ids and self.open_ids[-1][0] == tag:
            self.open_ids.pop()

    def handle_data(self, data):
        for _, element_id in self.open_ids:
            self.text_by_id[element_id].append(data)

    def text(self, element_id):
        return "".join(self.text_by_id[element_id])


def parse(dom: str) -> Elements:
    parser = Elements()
    parser.feed(dom)
    return parser


def test_the_html_report_in_chromium_shows_the_verdict_and_a_failures_evidence(liar, tmp_path):
    page = str(liar / "report.html")
    dom = parse(headless_chromium.dump_dom(page))
    assert "NOT CONFORMANT" in dom.text("verdict")
    details = dict((attrs.get("id"), attrs) for tag, attrs in dom.tags if tag == "details")
    failing = details["s-WT-CREATE"]
    assert "open" in failing  # a failure's evidence is shown, not folded away
    evidence = dom.text("s-WT-CREATE")
    assert "lost" in evidence and "retryproof run --only WT-CREATE --seed 7" in evidence
    assert "SUB-1: The first call with a new id creates exactly one task" in evidence  # the requirement's text
    assert ("a", {"href": "#s-WT-CREATE"}) in dom.tags  # reachable from the failures list and the table
    # The screenshot: the red banner of a blocked run, and no green one.
    pixels = headless_chromium.screenshot(page, str(tmp_path / "liar.png"))
    assert pixels[RED] > 20_000 and pixels[GREEN] < 2_000, (pixels[RED], pixels[GREEN])


def test_a_hostile_implementation_name_injects_no_markup(liar):
    dom = parse(headless_chromium.dump_dom(str(liar / "report.html")))
    tags = [tag for tag, _ in dom.tags]
    assert "script" not in tags and "img" not in tags
    assert not [attrs for _, attrs in dom.tags if any(name.startswith("on") for name in attrs)]
    assert all(tag != "style" or attrs == {} for tag, attrs in dom.tags)
    assert dom.tags.count(("style", {})) == 1  # the name's </style> did not end the stylesheet early
    assert "NOT CONFORMANT" in dom.text("verdict")
    raw = (liar / "report.html").read_text()
    assert "&lt;script&gt;document.title=&quot;pwned&quot;&lt;/script&gt;" in raw and "\x1b" not in raw
    assert "default-src 'none'" in raw  # and the browser is told to run no script and fetch nothing


def conformant_run():
    results = tuple(
        ScenarioResult(item, "passed", None, 0.1, f"retryproof run --only {item.id} --seed 7") for item in catalogue()
    )
    info = RunInfo("0.1.0", "1.0.0", "retryproof-harness/1", {"name": "r", "version": "1"}, "", (), (), 7, 8, "now")
    return RunFinished(info, results, judge(results), 1.0)


def test_a_conformant_run_is_green_in_the_browser_and_on_the_badge(tmp_path):
    run = conformant_run()
    page = tmp_path / "report.html"
    page.write_text(render_html(run))
    pixels = headless_chromium.screenshot(str(page), str(tmp_path / "ok.png"))
    assert pixels[GREEN] > 20_000 and pixels[RED] < 2_000, (pixels[GREEN], pixels[RED])
    badge = json.loads(render_badge(run))
    assert badge == {"schemaVersion": 1, "label": "retryproof", "message": "conformant", "color": "brightgreen"}


def test_the_status_filter_works_without_script(tmp_path):
    """Checking a status's radio button hides the other rows, by CSS alone: rendered
    with "failed" pre-checked, the green "passed" cells are gone and the red remain."""
    results = [ScenarioResult(item, "passed", None, 0.1, "r") for item in catalogue() if item.id != "WT-CREATE"] + [
        ScenarioResult(entry("WT-CREATE"), "failed", "why", 0.1, "r")
    ]
    info = RunInfo("0.1.0", "1.0.0", "retryproof-harness/1", {"name": "r", "version": "1"}, "", (), (), 7, 8, "now")
    text = render_html(RunFinished(info, tuple(results), judge(results), 1.0))
    # Only the head and the scenario table: the evidence below has green and red text too.
    head = text[: text.index("<h1>")]
    table = text[text.index('<section class="filter"') : text.index("</section>") + len("</section>")]
    counts = {}
    for show in ("all", "failed"):
        filtered = table.replace(" checked>", ">").replace(f'id="show-{show}">', f'id="show-{show}" checked>')
        assert filtered.count(" checked>") == 1
        page = tmp_path / f"{show}.html"
        page.write_text(f"{head}<body>{filtered}</body></html>")
        counts[show] = headless_chromium.screenshot(str(page), str(tmp_path / f"{show}.png"), 1000, 1400)
    passed_text = (0x1A, 0x7F, 0x37)
    assert counts["all"][passed_text] > 500 and counts["failed"][passed_text] == 0
    assert counts["failed"][RED] > 0


def test_junit_validates_against_the_shape_ci_consumers_read(liar):
    from lxml import etree

    schema = etree.XMLSchema(etree.parse(XSD))
    document = etree.parse(str(liar / "junit.xml"))
    assert schema.validate(document), schema.error_log
    # The schema has teeth: a testcase without its name, two outcomes in one testcase,
    # and a count that is not a number are each refused.
    for broken in (
        b'<testsuite name="s" tests="1"><testcase classname="x"/></testsuite>',
        b'<testsuite name="s" tests="1"><testcase name="a"><failure/><error/></testcase></testsuite>',
        b'<testsuite name="s" tests="one"><testcase name="a"/></testsuite>',
    ):
        assert not schema.validate(etree.fromstring(broken)), broken


def test_the_badge_says_not_conformant_in_red(liar):
    badge = json.loads((liar / "badge.json").read_text())
    assert badge == {"schemaVersion": 1, "label": "retryproof", "message": "not conformant", "color": "red"}


def test_the_step_summary_is_appended_with_the_failure_and_its_fix_line(liar):
    text = (liar / "step-summary.md").read_text()
    assert text.startswith("earlier step\n## retryproof: ")  # appended, never overwritten
    assert "**Verdict: NOT CONFORMANT" in text
    assert (
        "0 passed · 2 failed (MUST) · 0 errors (MUST) · 0 SHOULD warnings · 0 not verified · 0 skipped · 0 not applicable"
        in text
    )
    assert "`WT-CREATE` (MUST, failed)" in text and "SUB-1: The first call" in text
    assert "retryproof run --only WT-CREATE --seed 7" in text
    assert "<script>" not in text


def test_an_unwritable_step_summary_stops_the_run_before_it_starts(tmp_path):
    done = kit("run", "--only", "WT-CREATE", "--out", str(tmp_path), env={"GITHUB_STEP_SUMMARY": str(tmp_path)})
    assert done.returncode == 2 and done.stderr.startswith("error: cannot append to GITHUB_STEP_SUMMARY")
    assert "Traceback" not in done.stderr and not os.path.exists(tmp_path / "report.json")


def test_report_md_has_counts_requirements_environment_and_a_digest_column(liar):
    text = (liar / "report.md").read_text()
    assert "0 passed · 2 failed (MUST)" in text
    failures = text.split("## Failures")[1].split("## ")[0]
    assert "`WT-CREATE`" in failures and "SUB-1: The first call with a new id creates exactly one task" in failures
    environment = text.split("## Environment")[1].split("## ")[0]
    for label in ("kit version", "spec version", "protocol", "Python", "OS", "harness command", "seed", "started"):
        assert f"| {label} " in environment, label
    assert "fake\\_harness.py liar" in environment
    header = next(line for line in text.splitlines() if line.startswith("| # "))
    assert "request\\_digest" in header
    assert re.search(r"\| write\\_task +\| 1 +\| rp-wt-create-\S+ +\| sha256:[0-9a-f]{12}… ", text)
    document = json.loads((liar / "report.json").read_text())
    assert document["environment"]["harness_command"].endswith("fake_harness.py liar")
    assert kit("validate-report", str(liar / "report.json")).returncode == 0


def test_diff_names_the_regression_and_exits_1_and_2_on_bad_input(liar, tmp_path):
    honest = tmp_path / "honest"
    assert run_fake(honest, "honest").returncode == 0
    worse = retryproof_here("diff", str(honest / "report.json"), str(liar / "report.json"))
    assert worse.returncode == 1, worse.stderr
    regressions = worse.stdout.split("## Regressions")[1]
    assert "| WT-CREATE " in regressions and "| passed " in regressions and "| failed " in regressions
    assert "| A2-RESPONSE-LOSS " in regressions and "2 regression(s)" in worse.stdout
    assert "PARTIAL" in worse.stdout and "→ NOT CONFORMANT" in worse.stdout and "(changed)" in worse.stdout
    better = retryproof_here("diff", str(liar / "report.json"), str(honest / "report.json"))
    assert better.returncode == 0 and "## Fixes" in better.stdout and "## Regressions" not in better.stdout
    same = retryproof_here("diff", str(honest / "report.json"), str(honest / "report.json"))
    assert same.returncode == 0 and "0 regression(s), 0 fix(es)" in same.stdout and "(unchanged)" in same.stdout
    forged = json.loads((liar / "report.json").read_text())
    forged["counts"]["passed"] = 2  # validate-report's checks catch a hand-edited report
    (tmp_path / "forged.json").write_text(json.dumps(forged))
    for bad in (str(liar / "report.md"), str(tmp_path / "missing.json"), str(tmp_path / "forged.json")):
        done = retryproof_here("diff", str(honest / "report.json"), bad)
        assert done.returncode == 2 and done.stderr.startswith("error:") and "Traceback" not in done.stderr, bad


def test_every_scenario_says_what_it_does_in_report_md_and_html():
    from retryproof.conformance.writers.markdown import render_markdown

    run = conformant_run()
    markdown, page = render_markdown(run), render_html(run)
    for item in catalogue():
        assert len(item.description.split()) >= 12, item.id  # steps, not a restated title
        section = markdown.split(f"### {item.id}:")[1].split("\n### ")[0]
        assert "What it does: " in section, item.id
        assert page.count("<strong>What it does:</strong>") == len(catalogue())


def test_long_id_lists_are_wrapped_not_cut_and_a_partial_run_is_grey():
    from retryproof.conformance.writers.markdown import render_markdown

    ids = [f"TASK-{n:06d}" for n in range(1, 80)]
    snapshot = {"tasks": {"after": {"count": len(ids), "task_ids": ids}}}
    results = (ScenarioResult(entry("WT-DIGEST-VECTORS"), "passed", None, 0.1, "r", snapshot),)
    info = RunInfo("0.1.0", "1.0.0", "retryproof-harness/1", {"name": "r", "version": "1"}, "", (), (), 7, 8, "now")
    run = RunFinished(info, results, judge(results), 1.0)
    row = next(line for line in render_markdown(run).splitlines() if line.startswith("| after "))
    segments = row.split("|")[3].strip().split("<br>")
    assert len(segments) == 14 and all(len(segment.split(", ")) <= 6 for segment in segments)
    assert [item for segment in segments for item in segment.split(", ")] == ids
    html_cell = render_html(run).split("<td>after</td><td>79</td><td>")[1].split("</td>")[0]
    assert html_cell.count("<br>") == 13 and "TASK-000079" in html_cell
    badge = json.loads(render_badge(run))
    assert (badge["message"], badge["color"]) == ("partial run", "lightgrey")
