"""SVG pictures: for report.html, a scenario's timeline and restart strip (what they
say is decided in ``writers/timeline.py``); for a README, badge.svg (the verdict and the
seven checklist answers).

No script, no external resource, no web font: the page's Content-Security-Policy
allows none. Every outcome has a pattern besides its colour and every fault a line
style and a number, so the pictures read in print and for colour-blind readers; each
picture has its legend. Every string in a picture is escaped (``writers/escape.py``):
harness text is never markup, in SVG as in HTML.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from retryproof.conformance.events import RunFinished
from retryproof.conformance.writers.badge import message, tone
from retryproof.conformance.writers.escape import html_text, one_line, visible_lines
from retryproof.conformance.writers.timeline import INDETERMINATE, OUTCOMES, Bar, Outcome, Strip, Timeline

WIDTH = 1100
LABEL_W = 150
LANE_H = 20
BAR_H = 12
HEAD_H = 30
AXIS_H = 24
LEGEND_ROW_H = 18
FONT = 'font-family="system-ui,sans-serif" font-size="11"'

#: outcome -> (colour, pattern drawn over it as SVG, or "" for a solid fill)
STYLES: dict[Outcome, tuple[str, str]] = {
    "created": ("#1a7f37", ""),
    "reused": ("#0969da", '<path d="M-1,1 l2,-2 M0,6 l6,-6 M5,7 l2,-2" stroke="#fff" stroke-width="1.6"/>'),
    "conflict": ("#bc4c00", '<path d="M0,0 L6,6 M6,0 L0,6" stroke="#fff" stroke-width="1.2"/>'),
    "in_flight": ("#8250df", '<circle cx="3" cy="3" r="1.3" fill="#fff"/>'),
    "lost": ("#ffffff", '<path d="M0,3 h6" stroke="#cf222e" stroke-width="1"/>'),
    "garbled": (
        "#ffffff",
        '<path d="M0,4.5 l1.5,-3 l1.5,3 l1.5,-3 l1.5,3" stroke="#cf222e" stroke-width="0.9" fill="none"/>',
    ),
    "error": ("#cf222e", '<path d="M0,1.5 h6 M0,4.5 h6" stroke="#fff" stroke-width="1"/>'),
    "ok": ("#afb8c1", ""),
}

#: fault op -> (stroke colour, dash pattern) of its line across the lanes
FAULT_LINES = {"kill": ("#cf222e", "5 3"), "shutdown": ("#57606a", "2 2"), "start": ("#1a7f37", "")}
OTHER_FAULT = ("#6e7781", "8 2 2 2")


def _x(value: object, limit: int | None = None) -> str:
    """Harness text as SVG text or attribute value: one line, escaped."""
    return html_text(one_line(value, limit))


def _title(value: object) -> str:
    return f"<title>{html_text(visible_lines(value))}</title>"


def _defs(prefix: str) -> str:
    """One pattern per outcome; ids carry the picture's prefix, unique in the page."""
    patterns = []
    for name, (colour, overlay) in STYLES.items():
        patterns.append(
            f'<pattern id="{prefix}-{name}" width="6" height="6" patternUnits="userSpaceOnUse">'
            f'<rect width="6" height="6" fill="{colour}"/>{overlay}</pattern>'
        )
    return f"<defs>{''.join(patterns)}</defs>"


def _swatch(prefix: str, outcome: Outcome, x: float, y: float, width: float, height: float, extra: str = "") -> str:
    dash = ' stroke-dasharray="3 2"' if outcome in INDETERMINATE else ""
    return (
        f'<rect x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" height="{height:.1f}" fill="url(#{prefix}-{outcome})" '
        f'stroke="#1b1f24" stroke-width="0.6"{dash}{extra}/>'
    )


def _ticks(start: float, end: float) -> list[float]:
    span = max(end - start, 1e-3)
    raw = span / 8
    power = 10 ** math.floor(math.log10(raw))
    step = next(power * m for m in (1, 2, 5, 10) if power * m >= raw)
    first = math.ceil(start / step) * step
    return [first + n * step for n in range(int((end - first) / step) + 1)]


def _legend(
    prefix: str, outcomes: Sequence[Outcome], extra: Sequence[tuple[str, str]], top: float
) -> tuple[str, float]:
    """The legend at ``top``: a swatch per outcome shown, then ``extra`` (svg symbol,
    text) items; wrapped into rows. Returns its markup and its height."""
    items = [(_swatch(prefix, outcome, 0, 3, 16, 10), OUTCOMES[outcome]) for outcome in outcomes] + list(extra)
    out, x, y = [], 0.0, top
    for symbol, text in items:
        width = 24 + len(text) * 6.0 + 16
        if x + width > WIDTH and x > 0:
            x, y = 0.0, y + LEGEND_ROW_H
        out.append(f'<g transform="translate({x:.1f},{y:.1f})">{symbol}<text x="22" y="12">{_x(text)}</text></g>')
        x += width
    return "".join(out), y + LEGEND_ROW_H - top


def render_timeline(picture: Timeline, prefix: str, link: str) -> str:
    """A figure with the timeline of one scenario. ``prefix`` makes its ids unique in
    the page (the failing call's is ``<prefix>-failing``); bar n links to
    ``#<link>-<n>``, row n of the calls table."""
    lanes = {lane.number: row for row, lane in enumerate(picture.lanes)}
    plot_w = WIDTH - LABEL_W - 10
    span = max(picture.end_ms - picture.start_ms, 1e-3)

    def x(moment: float) -> float:
        return LABEL_W + (moment - picture.start_ms) / span * plot_w

    lanes_h = len(picture.lanes) * LANE_H
    bottom = HEAD_H + lanes_h
    out = [_defs(prefix)]
    for lane in picture.lanes:
        y = HEAD_H + lanes[lane.number] * LANE_H
        shade = "#f6f8fa" if lanes[lane.number] % 2 == 0 else "#ffffff"
        out.append(f'<rect x="{LABEL_W}" y="{y}" width="{plot_w}" height="{LANE_H}" fill="{shade}"/>')
        out.append(f'<text x="{LABEL_W - 6}" y="{y + 14}" text-anchor="end">{_x(lane.label, 24)}</text>')
    for tick in _ticks(picture.start_ms, picture.end_ms):
        anchor = "end" if x(tick) > WIDTH - 30 else "middle"  # the last label stays inside the picture
        out.append(
            f'<line x1="{x(tick):.1f}" y1="{bottom}" x2="{x(tick):.1f}" y2="{bottom + 4}" stroke="#57606a"/>'
            f'<text x="{x(tick):.1f}" y="{bottom + 16}" text-anchor="{anchor}" fill="#57606a">{tick:g} ms</text>'
        )
    out.append(f'<line x1="{LABEL_W}" y1="{bottom}" x2="{LABEL_W + plot_w}" y2="{bottom}" stroke="#57606a"/>')
    for bar in picture.bars:
        out.append(_bar(bar, prefix, link, x, HEAD_H + lanes[bar.lane] * LANE_H, bar is picture.highlighted))
    # The marks last, over the bars: a fault line must not hide under a bar.
    numbers_at: list[list[float]] = [[], []]
    for mark in picture.marks:
        left, right = x(mark.start_ms), x(mark.end_ms)
        row = 0 if all(abs(left - taken) > 14 for taken in numbers_at[0]) else 1
        numbers_at[row].append(left)
        number = f'<text x="{left:.1f}" y="{11 + row * 12}" text-anchor="middle" font-weight="700">{mark.number}</text>'
        if mark.lane is not None:
            middle = HEAD_H + lanes[mark.lane] * LANE_H + LANE_H / 2
            out.append(
                f"<g>{_title(f'{mark.number}: {mark.label}')}{number}"
                f'<path class="listed" d="M{left:.1f},{middle - 6:.1f} l5,6 l-5,6 l-5,-6 z" fill="#1b1f24" stroke="#fff"/></g>'
            )
            continue
        colour, dash = FAULT_LINES.get(mark.kind, OTHER_FAULT)
        band = (
            f'<rect x="{left:.1f}" y="{HEAD_H}" width="{right - left:.1f}" height="{lanes_h}" fill="{colour}" fill-opacity="0.12"/>'
            if right - left >= 1
            else ""
        )
        dashes = f' stroke-dasharray="{dash}"' if dash else ""
        out.append(
            f"<g>{_title(f'{mark.number}: {mark.label}')}{number}{band}"
            f'<line class="fault" x1="{left:.1f}" y1="{HEAD_H - 4}" x2="{left:.1f}" y2="{bottom}" stroke="{colour}" '
            f'stroke-width="2"{dashes}/></g>'
        )
    extra = _fault_legend({mark.kind for mark in picture.marks})
    if picture.highlighted is not None:
        extra.append(
            (
                '<rect x="0" y="1" width="16" height="12" fill="none" stroke="#1b1f24" stroke-width="2.5"/>',
                picture.highlight_note,
            )
        )
    legend, legend_h = _legend(prefix, picture.outcomes, extra, bottom + AXIS_H + 4)
    out.append(legend)
    height = bottom + AXIS_H + 4 + legend_h
    description = f"timeline: {len(picture.bars)} calls on {len(picture.lanes)} lane(s), {len(picture.marks)} mark(s)"
    svg = (
        f'<svg class="timeline" role="img" aria-label="{_x(description)}" viewBox="0 0 {WIDTH} {height:.0f}" '
        f'width="{WIDTH}" height="{height:.0f}" {FONT}>{"".join(out)}</svg>'
    )
    return f'<figure class="picture" id="{prefix}">{svg}{_mark_list(picture)}</figure>'


def _bar(bar: Bar, prefix: str, link: str, x, top: float, highlighted: bool) -> str:
    left, right = x(bar.start_ms), x(bar.end_ms)
    width = max(right - left, 2.0)
    y = top + (LANE_H - BAR_H) / 2
    shape = _swatch(prefix, bar.outcome, left, y, width, BAR_H)
    attributes = f' id="{prefix}-failing" class="failing"' if highlighted else ""
    outline = (
        f'<rect x="{left - 3:.1f}" y="{y - 3:.1f}" width="{width + 6:.1f}" height="{BAR_H + 6}" fill="none" '
        'stroke="#1b1f24" stroke-width="2.5"/>'
        if highlighted
        else ""
    )
    return (
        f'<a href="#{link}-{bar.index}"{attributes} data-call="{bar.index}" data-lane="{bar.lane}" '
        f'data-outcome="{bar.outcome}">{_title(bar.detail)}{shape}{outline}</a>'
    )


def _fault_legend(kinds: set[str]) -> list[tuple[str, str]]:
    texts = {
        "kill": "SIGKILL of the process group",
        "start": "harness (re)start, shaded until its handshake",
        "shutdown": "graceful shutdown",
    }
    out = []
    for kind in sorted(kinds - {"listed"}):
        colour, dash = FAULT_LINES.get(kind, OTHER_FAULT)
        dashes = f' stroke-dasharray="{dash}"' if dash else ""
        symbol = f'<line x1="8" y1="0" x2="8" y2="14" stroke="{colour}" stroke-width="2"{dashes}/>'
        out.append((symbol, texts.get(kind, f"fault: {kind}")))
    if "listed" in kinds:
        out.append(('<path d="M8,1 l5,6 l-5,6 l-5,-6 z" fill="#1b1f24"/>', "an effect first shows in list_tasks"))
    return out


def _mark_list(picture: Timeline) -> str:
    """The marks in words under the picture (numbered as in it): for print, for a
    screen reader, and for text search."""
    items = [
        f"<li value={mark.number}>{_x(mark.label)} ({mark.start_ms:.1f}"
        + (f"–{mark.end_ms:.1f}" if mark.end_ms - mark.start_ms >= 0.1 else "")
        + " ms)</li>"
        for mark in picture.marks
    ]
    highlight = ""
    if picture.highlighted is not None:
        bar = picture.highlighted
        highlight = f"<p>Outlined: {_x(picture.highlight_note)}, call {bar.index} ({_x(bar.label)}).</p>"
    return f"<figcaption>{highlight}{f'<ol class=marks>{chr(10).join(items)}</ol>' if items else ''}</figcaption>"


def render_strip(picture: Strip, prefix: str) -> str:
    """The restart strip: a row per key, a column per restart; each cell the key's
    first answer from the new process, cornered when the end of the old one cut a
    call of that key."""
    cell_w, cell_h, head = 64, 16, 22
    key_w = 230
    out = [_defs(prefix)]
    for column, text in enumerate(picture.columns):
        cx = key_w + column * cell_w + cell_w / 2
        out.append(
            f'<text x="{cx:.1f}" y="14" text-anchor="middle" font-weight="700">{_title(text)}R{column + 1}</text>'
        )
    for row, key in enumerate(picture.keys):
        y = head + row * cell_h
        out.append(f'<text x="{key_w - 6}" y="{y + 12}" text-anchor="end">{_title(key)}{_x(key, 34)}</text>')
        for column, cell in enumerate(picture.cells[row]):
            cx = key_w + column * cell_w
            shape = (
                _swatch(prefix, cell.outcome, cx + 2, y + 2, cell_w - 4, cell_h - 4)
                if cell.outcome
                else f'<rect x="{cx + 2}" y="{y + 2}" width="{cell_w - 4}" height="{cell_h - 4}" fill="none" stroke="#d0d7de"/>'
            )
            corner = f'<path d="M{cx + 2},{y + 2} h9 l-9,9 z" fill="#1b1f24"/>' if cell.cut else ""
            out.append(f"<g>{_title(cell.detail)}{shape}{corner}</g>")
    top = head + len(picture.keys) * cell_h + 8
    present = [o for o in OUTCOMES if any(cell.outcome == o for row in picture.cells for cell in row)]
    extra = [
        ('<path d="M2,1 h9 l-9,9 z" fill="#1b1f24"/>', "a call of this key was cut when the process ended"),
        ('<rect x="2" y="2" width="14" height="10" fill="none" stroke="#d0d7de"/>', "key not called from that process"),
    ]
    legend, legend_h = _legend(prefix, present, extra, top)
    out.append(legend)
    height = top + legend_h
    svg = (
        f'<svg class="strip" role="img" aria-label="what each key answered after each restart" '
        f'viewBox="0 0 {WIDTH} {height:.0f}" width="{WIDTH}" height="{height:.0f}" {FONT}>{"".join(out)}</svg>'
    )
    columns = "".join(f"<li>{_x(text)}</li>" for text in picture.columns)
    return (
        f'<figure class="picture" id="{prefix}">{svg}<figcaption>After each restart (R1, R2, …), what each key '
        f"answered first:<ol>{columns}</ol></figcaption></figure>"
    )


#: A checklist answer on the badge: (glyph, fill).
ANSWER_MARKS = {
    "yes": ("✓", "#1a7f37"),
    "yes (with warnings)": ("✓!", "#9a6700"),
    "no": ("✗", "#cf222e"),
    "unverified": ("?", "#6e7781"),
    "not applicable": ("–", "#8c959f"),
    "unanswered": ("○", "#8c959f"),
}
#: The verdict's fill on the badge, by ``writers/badge.py``'s tone.
TONE_FILLS = {"conformant": "#1a7f37", "blocked": "#cf222e", "partial": "#6e7781"}


def render_checklist_badge(run: RunFinished) -> str:
    """badge.svg: a README-sized picture of the verdict and the seven checklist answers,
    each a cell with its question number, a glyph and a colour (the glyph carries the
    answer without colour), and the question and answer on hover."""
    verdict = run.verdict
    segments = [("retryproof", "#555", "retryproof"), (message(run), TONE_FILLS[tone(run)], verdict.headline)]
    for answer in verdict.checklist:
        glyph, fill = ANSWER_MARKS.get(answer.answer, ("?", "#6e7781"))
        segments.append((f"{answer.question}{glyph}", fill, f"{answer.question} {answer.text} {answer.answer}"))
    out, x = [], 0.0
    for text, fill, hover in segments:
        width = 10 + 6.6 * len(text)
        out.append(
            f'<g>{_title(hover)}<rect x="{x:.1f}" width="{width:.1f}" height="20" fill="{fill}"/>'
            f'<text x="{x + width / 2:.1f}" y="14" text-anchor="middle">{_x(text)}</text></g>'
        )
        x += width
    answers = "; ".join(f"{answer.question} {answer.answer}" for answer in verdict.checklist)
    label = f"retryproof: {message(run)}; {answers}"
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{x:.0f}" height="20" viewBox="0 0 {x:.0f} 20" role="img" '
        f'aria-label="{_x(label)}">'
        f"<title>{_x(label)}</title>"
        f'<g fill="#fff" font-family="Verdana,DejaVu Sans,sans-serif" font-size="11">{"".join(out)}</g></svg>\n'
    )
