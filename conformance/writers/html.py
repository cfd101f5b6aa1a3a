"""report.html: the report as one self-contained page for a browser or a CI artefact.

Inline CSS only, no script and no external fetch (a Content-Security-Policy says so to
the browser as well), so the page reads the same offline and without JavaScript. The
scenario table is filtered by status with radio buttons and CSS ``:checked``; each
scenario's evidence is a ``<details>`` element, open for a failure. Every string is
escaped with ``html.escape``: harness text is never markup. What is said is decided in
``content``, as for report.md.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from typing import Any

from retryproof.conformance.events import RunFinished, ScenarioResult
from retryproof.conformance.records import STATUSES
from retryproof.conformance.writers import content, timeline
from retryproof.conformance.writers.badge import tone
from retryproof.conformance.writers.content import Code, Fact, IdList, Table
from retryproof.conformance.writers.escape import html_text, one_line, visible_lines
from retryproof.conformance.writers.svg import TONE_FILLS, render_strip, render_timeline

#: Characters of a table cell shown; report.json keeps the whole value.
CELL_LIMIT = 300
#: A cell with a word longer than this (a 128-character id) shows its start and end
#: only, the whole value on hover (``title``) and in report.json, so no column
#: pushes the others off a 1280 px page.
LONG_WORD = 32
#: The calls table's column widths (percent of the page): laid out fixed, so it always
#: fits the page and a long value wraps inside its own column.
CALL_WIDTHS = {
    "#": 3,
    "op": 8,
    "process": 7,
    "client_submission_id": 13,
    "request_digest": 11,
    "kind": 5,
    "disposition": 9,
    "action_taken": 7,
    "task_id": 9,
    "conflict_reason": 8,
    "error": 8,
    "message": 12,
}

_CSS = (
    """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;max-width:1200px;padding:0 1rem 3rem;color:#1b1f24}
h1{font-size:1.5rem;margin:1.2rem 0 .6rem}h2{font-size:1.2rem;margin:2rem 0 .6rem;border-bottom:1px solid #d0d7de}
.banner{padding:1rem 1.2rem;border-radius:6px;font-size:1.3rem;font-weight:700;color:#fff}
"""
    # The banner is coloured as badge.svg colours the verdict, by the badges' tone.
    + "".join(f".banner.{name}{{background:{fill}}}" for name, fill in TONE_FILLS.items())
    + """
.banner small{display:block;font-size:.95rem;font-weight:400;margin-top:.3rem}
table{border-collapse:collapse;margin:.5rem 0;font-size:.9rem}
th,td{border:1px solid #d0d7de;padding:.25rem .5rem;text-align:left;vertical-align:top;overflow-wrap:break-word}
td[title]{text-decoration:underline dotted #57606a}
table.calls{table-layout:fixed;width:100%}table.calls td,table.calls th{overflow-wrap:anywhere}
tr:target td{background:#fff8c5}
figure.picture{margin:.6rem 0}figure.picture svg{max-width:100%;height:auto;display:block}
figcaption{font-size:.85rem;color:#57606a}figcaption ol{margin:.2rem 0;padding-left:1.6rem}
figure.picture a:focus-visible rect{stroke:#0969da;stroke-width:3}
th{background:#f6f8fa}
.st{font-weight:600;white-space:nowrap}
.st-passed{color:#1a7f37}.st-failed,.st-error{color:#cf222e}.st-skipped,.st-not_applicable{color:#6e7781}
.filter input{position:absolute;opacity:0}
.filter label{display:inline-block;border:1px solid #d0d7de;border-radius:2em;padding:.1rem .8rem;margin:0 .3rem .3rem 0;cursor:pointer}
.filter input:checked+label{background:#0969da;border-color:#0969da;color:#fff}
.filter input:focus-visible+label{outline:2px solid #0969da;outline-offset:2px}
"""
    + "".join(f"#show-{status}:checked~table tbody tr:not(.row-{status}){{display:none}}\n" for status in STATUSES)
    + """
details{border:1px solid #d0d7de;border-radius:6px;margin:.6rem 0;padding:.2rem .8rem}
details[open]{padding-bottom:.8rem}summary{cursor:pointer;padding:.3rem 0}
details.broken{border-color:#cf222e}
pre{background:#f6f8fa;padding:.6rem;overflow:auto;white-space:pre-wrap;overflow-wrap:anywhere;margin:.3rem 0}
pre.copy{user-select:all;-webkit-user-select:all}
.wide{overflow-x:auto}.muted{color:#57606a}ul.reqs{margin:.2rem 0 .6rem}
"""
)


def _text(value: Any, limit: int | None = None) -> str:
    """Harness text as HTML text: one line (control characters made visible), escaped."""
    return html_text(one_line("" if value is None else value, limit))


def _cell(value: Any, limit: int | None = CELL_LIMIT) -> str:
    """A ``<td>``: id lists wrapped; a cell cut at ``limit``, or in a table with a limit
    holding a word longer than ``LONG_WORD``, shows an elided value with the whole one
    in its title."""
    if isinstance(value, IdList):
        return "<td>" + "<br>".join(html.escape(", ".join(line)) for line in value.lines()) + "</td>"
    whole = one_line("" if value is None else value)
    shown = one_line(whole, limit)
    if limit is not None and any(len(word) > LONG_WORD for word in shown.split()):
        shown = " ".join(
            word if len(word) <= LONG_WORD else f"{word[: LONG_WORD // 2]}…{word[-(LONG_WORD // 2 - 4) :]}"
            for word in shown.split(" ")
        )
    title = f' title="{html_text(whole)}"' if shown != whole else ""
    return f"<td{title}>{_breakable(html_text(shown))}</td>"


def _breakable(markup: str) -> str:
    """Escaped text that may wrap after an underscore (``write_task``, ``client_submission_id``)
    before it wraps anywhere else: a narrow column breaks between words, not inside one."""
    return markup.replace("_", "_<wbr>")


def _table(
    headers: Sequence[str], rows: Iterable[Sequence[Any]], limit: int | None = CELL_LIMIT, row_id: str | None = None
) -> str:
    """A table; ``row_id`` makes it a calls table: row n (from 1) gets the id
    ``<row_id>-<n>`` (bar n of the timeline links to it) and the columns fixed widths."""
    head = "".join(f"<th>{_breakable(_text(header))}</th>" for header in headers)
    body = "".join(
        (f'<tr id="{row_id}-{n}">' if row_id else "<tr>") + "".join(_cell(cell, limit) for cell in row) + "</tr>"
        for n, row in enumerate(rows, 1)
    )
    if row_id is None:
        # A key-value table (the environment) has no header row: an empty one would show as a blank bar.
        thead = f"<thead><tr>{head}</tr></thead>" if any(headers) else ""
        return f'<div class="wide"><table>{thead}<tbody>{body}</tbody></table></div>'
    widths = "".join(f'<col style="width:{CALL_WIDTHS.get(header, 8)}%">' for header in headers)
    return (
        f'<table class="calls"><colgroup>{widths}</colgroup><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
    )


def _pre(text: str, copy: bool = False) -> str:
    return f"<pre{' class=copy' if copy else ''}><code>{html.escape(visible_lines(text))}</code></pre>"


def anchor(scenario_id: str) -> str:
    """The id of a scenario's evidence in report.html (``retryproof compare`` links to it)."""
    return "s-" + html.escape(scenario_id)


def failing_anchor(scenario_id: str) -> str:
    """The id of the outlined call on a failed scenario's timeline."""
    return f"{anchor(scenario_id)}-t-failing"


def evidence_anchor(result: ScenarioResult) -> str:
    """Where report.html shows a failed scenario best (``retryproof compare`` and the
    kill matrix link there): the outlined call on its timeline, or its evidence when
    it has no timeline (a report that predates them)."""
    picture = timeline.timeline(result)
    if picture is not None and picture.highlighted is not None:
        return failing_anchor(result.entry.id)
    return anchor(result.entry.id)


def _calls_anchor(scenario_id: str) -> str:
    return f"{anchor(scenario_id)}-call"


def render_html(run: RunFinished) -> str:
    info, verdict = run.info, run.verdict
    implementation = info.implementation
    name = f"{_text(implementation.get('name', '?'))} {_text(implementation.get('version', ''))}"
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>retryproof report: {name}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>retryproof report: {name}</h1>",
        f'<div class="banner {tone(run)}" id="verdict">Verdict: {_text(verdict.headline)}'
        f"<small>{html.escape(content.tally(run.results).line())} · exit code {verdict.exit_code}</small>"
        f'<small id="tool-paths">{html.escape(content.tool_paths_line(run))}</small></div>',
        *_failures(run),
        "<h2>Environment</h2>",
        _table(("", ""), content.environment(run), None),  # whole: a reviewer copies these
        "<h2>The seven checklist questions</h2>",
        _table(("", "question", "answer", "scenarios behind the answer"), content.checklist_rows(run), None),
        *_scenario_table(run.results),
    ]
    for table, sources in content.merged_tables(run.results):
        out += [f"<h2>{_text(table.caption)}</h2>", f"<p>From {html.escape(', '.join(sources))}.</p>"]
        out.append(_table(table.headers, table.rows))
    out.append("<h2>Evidence</h2>")
    for result in run.results:
        out += _evidence(result, run.info.black_box)
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def _failures(run: RunFinished) -> list[str]:
    out: list[str] = []
    failures = content.failures(run)
    if failures:
        out += ["<h2>Failures</h2>", "<ul>"]
        for result in failures:
            requirements = "".join(
                f"<li>{html.escape(requirement)}: {_text(text)}</li>"
                for requirement, text in content.requirements(result)
            )
            out.append(
                f'<li><a href="#{anchor(result.entry.id)}">{html.escape(result.entry.id)}</a> '
                f"({result.entry.level}, {_text(content.status_text(result))}): {_text(result.reason, 500)}"
                f"{_failing_link(result)}"
                f'<ul class="reqs">{requirements}</ul></li>'
            )
        out.append("</ul>")
    unverified = content.unverified(run)
    if unverified:
        out += ["<h2>Not verified</h2>", "<ul>"]
        out += [
            f'<li><a href="#{anchor(r.entry.id)}">{html.escape(r.entry.id)}</a>: {_text(r.reason, 300)}</li>'
            for r in unverified
        ]
        out.append("</ul>")
    verdict = run.verdict
    if verdict.not_covered:
        out += ["<h2>Not covered (a tool path or optional capability not offered)</h2>", "<ul>"]
        out += [f"<li>{html.escape(sid)}: {_text(why, 300)}</li>" for sid, why in verdict.not_covered] + ["</ul>"]
    baseline = content.baseline_line(run)
    if baseline:
        out.append(f"<p>{html.escape(baseline)}</p>")
    return out


def _scenario_table(results: Sequence[ScenarioResult]) -> list[str]:
    """The scenario table with one radio button per status present: checking one
    hides every other row (CSS in ``_CSS``), so the filter works without script."""
    present = [status for status in STATUSES if any(result.status == status for result in results)]
    out = ["<h2>Scenarios</h2>", '<section class="filter" aria-label="filter scenarios by status">']
    out.append(
        f'<input type="radio" name="status" id="show-all" checked><label for="show-all">all ({len(results)})</label>'
    )
    for status in present:
        count = sum(result.status == status for result in results)
        out.append(
            f'<input type="radio" name="status" id="show-{status}"><label for="show-{status}">{status} ({count})</label>'
        )
    rows = []
    for result in results:
        item = result.entry
        rows.append(
            f'<tr class="row-{result.status}"><td><a href="#{anchor(item.id)}">{html.escape(item.id)}</a></td>'
            f"<td>{item.level}</td><td class='st st-{result.status}'>{_text(content.status_text(result))}</td>"
            f"<td>{result.duration_s:.2f}s</td><td>{_text(item.title)}</td></tr>"
        )
    out.append(
        "<table><thead><tr><th>id</th><th>level</th><th>status</th><th>duration</th><th>title</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></section>"
    )
    return out


def _failing_link(result: ScenarioResult) -> str:
    picture = timeline.timeline(result)
    if picture is None or picture.highlighted is None:
        return ""
    return f' <a href="#{failing_anchor(result.entry.id)}">({_text(picture.highlight_note)} on the timeline)</a>'


def _pictures(result: ScenarioResult) -> list[str]:
    out = []
    picture = timeline.timeline(result)
    if picture is not None:
        out.append(render_timeline(picture, f"{anchor(result.entry.id)}-t", _calls_anchor(result.entry.id)))
    restarts = timeline.strip(result)
    if restarts is not None:
        out.append(render_strip(restarts, f"{anchor(result.entry.id)}-k"))
    return out


def _evidence(result: ScenarioResult, black_box: bool) -> list[str]:
    item = result.entry
    broken = content.broken(result)
    resolution = content.resolution(result)
    out = [
        f'<details id="{anchor(item.id)}"{" class=broken open" if broken else ""}>',
        f"<summary><strong>{html.escape(item.id)}</strong>: {_text(item.title)} · "
        f"<span class='st st-{result.status}'>{_text(content.status_text(result))}</span>"
        f"{f' · {_text(resolution[0])}' if resolution else ''}</summary>",
    ]
    if item.description:
        out.append(f"<p><strong>What it does:</strong> {_text(item.description)}</p>")
    out.append(
        f'<p class="muted">{item.level} · checks {html.escape(", ".join(item.checks))} · answers '
        f"{html.escape(', '.join(item.checklist))} · needs {html.escape(', '.join(item.needs))} · "
        f"{result.duration_s:.2f}s</p>"
    )
    if result.reason:
        out.append(f"<p><strong>Reason:</strong> {_text(result.reason)}{_failing_link(result)}</p>")
    if resolution:
        out.append(f"<p>{_text(resolution[1])}</p>")
    if broken:
        out.append('<ul class="reqs">')
        out += [f"<li>{html.escape(req)}: {_text(text)}</li>" for req, text in content.requirements(result)]
        out.append("</ul>")
    out += _pictures(result)  # first: a reviewer looks at the picture before the tables
    facts: list[str] = []
    for block in content.evidence_blocks(result, black_box):
        if isinstance(block, Fact):
            if isinstance(block.value, list):
                items = "".join(f"<li>{_text(value)}</li>" for value in block.value)
                facts.append(f"<li>{_text(block.key)}:<ul>{items}</ul></li>")
            else:
                facts.append(f"<li>{_text(block.key)}: {_text(block.value)}</li>")
            continue
        if facts:
            out.append(f"<ul>{''.join(facts)}</ul>")
            facts = []
        if isinstance(block, Table):
            if block.caption:
                out.append(f"<p>{_text(block.caption)}:</p>")
            row_id = _calls_anchor(item.id) if block.calls else None
            out.append(_table(block.headers, block.rows, None if block.whole else CELL_LIMIT, row_id))
        elif isinstance(block, Code):
            out += [f"<p>{_text(block.caption)}:</p>", _pre(block.text, copy=block.caption == "reproduce")]
    if facts:
        out.append(f"<ul>{''.join(facts)}</ul>")
    if not broken:
        # Every scenario's reproduce line, not only a failure's: one click selects it whole.
        out += ["<p>reproduce:</p>", _pre(result.reproduce, copy=True)]
    out.append("</details>")
    return out
