"""A status grid as one self-contained HTML page: ``retryproof compare``'s (and so
``retryproof matrix``'s) implementations side by side, and ``retryproof selftest``'s
kill matrix. Each cell is coloured by its tone and says its status in words too (print,
colour-blind readers); a failing cell links to its evidence. Inline CSS only, no script,
no external fetch; every string escaped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from retryproof.conformance.writers.escape import html_text

Tone = Literal["pass", "fail", "error", "not-verified", "not-covered", "skip", "na", "none", "fact"]

#: tone -> (legend text, CSS of its cells)
TONES: dict[Tone, tuple[str, str]] = {
    "pass": ("passed", "background:#dafbe1"),
    "fail": ("failed (links to the evidence)", "background:#ffd8d3;font-weight:700"),
    "error": (
        "error: the kit could not judge (links to the evidence)",
        "background:repeating-linear-gradient(135deg,#ffd8d3 0 6px,#fff 6px 10px);font-weight:700",
    ),
    "not-verified": (
        "not verified: a MUST scenario skipped for something the runtime should offer",
        "background:repeating-linear-gradient(45deg,#fff1c2 0 6px,#fff 6px 10px)",
    ),
    "not-covered": ("not covered: an optional capability not declared", "background:#f6f8fa;color:#57606a"),
    "skip": ("skipped", "color:#57606a"),
    "na": ("not applicable", "color:#57606a;font-style:italic"),
    "none": ("not run", "color:#8c959f"),
    "fact": ("", ""),
}


#: A scenario status's tone (``retryproof compare`` tells the kinds of skip apart).
STATUS_TONES: dict[str, Tone] = {
    "passed": "pass",
    "failed": "fail",
    "error": "error",
    "skipped": "skip",
    "not_applicable": "na",
}


@dataclass(frozen=True)
class GridCell:
    text: str
    tone: Tone = "fact"
    link: str | None = None
    title: str | None = None  # the whole reason, on hover
    marked: bool = False  # drawn with a heavy border (the kill matrix: a declared killer)


def render_grid(
    title: str,
    intro: Sequence[str],
    columns: Sequence[str],
    rows: Sequence[tuple[str, Sequence[GridCell]]],
    notes: Sequence[str] = (),
    upright: bool = False,
) -> str:
    """The page: ``intro`` paragraphs, the grid (a header row of ``columns``, then each
    row's label and cells), the legend of the tones shown, then ``notes``. ``upright``:
    the column headers are written bottom to top, for a grid of many narrow columns."""
    shown = sorted({cell.tone for _, cells in rows for cell in cells} - {"fact"}, key=list(TONES).index)
    css = "".join(f"td.{tone}{{{style}}}" for tone, (_, style) in TONES.items() if style)
    head = "".join(f"<th>{html_text(column)}</th>" for column in columns)
    body = "\n".join(
        f"<tr><th>{html_text(label)}</th>{''.join(_cell(cell) for cell in cells)}</tr>" for label, cells in rows
    )
    legend = "".join(f'<li><span class="{tone}">{html_text(TONES[tone][0])}</span></li>' for tone in shown)
    legend_css = "".join(f"ul.legend span.{tone}{{{TONES[tone][1]};padding:0 .4rem}}" for tone in shown)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        f"<title>{html_text(title)}</title>\n<style>body{{font:14px/1.4 system-ui,sans-serif;margin:1rem}}"
        "table{border-collapse:collapse}th,td{border:1px solid #d0d7de;padding:2px 6px;text-align:left;"
        "vertical-align:top}thead th{background:#f6f8fa}tbody th{white-space:nowrap}"
        + ("thead th{writing-mode:vertical-rl;transform:rotate(180deg);text-align:left}" if upright else "")
        + "td.marked{outline:2px solid #1b1f24;outline-offset:-3px}"
        f"td a{{color:inherit}}ul.legend{{list-style:none;padding:0}}{css}{legend_css}</style>\n"
        f"</head><body><h1>{html_text(title)}</h1>\n"
        + "".join(f"<p>{html_text(text)}</p>\n" for text in intro)
        + f'<div style="overflow-x:auto"><table><thead><tr><th></th>{head}</tr></thead><tbody>\n{body}\n'
        "</tbody></table></div>\n"
        + (f'<ul class="legend">{legend}</ul>\n' if legend else "")
        + "".join(f"<p>{html_text(text)}</p>\n" for text in notes)
        + "</body></html>\n"
    )


def _cell(cell: GridCell) -> str:
    classes = " ".join(name for name in (cell.tone, "marked" if cell.marked else "") if name)
    title = f' title="{html_text(cell.title)}"' if cell.title else ""
    text = html_text(cell.text)
    body = f'<a href="{html_text(cell.link)}">{text}</a>' if cell.link else text
    return f'<td class="{classes}"{title}>{body}</td>'
