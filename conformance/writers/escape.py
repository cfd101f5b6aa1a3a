"""Escaping of every string that came from a harness, for each report format.

A harness is untrusted: its names, messages and stderr may hold pipes, backticks,
newlines, HTML or control characters meant to forge a table row or a verdict.
"""

from __future__ import annotations

import html
import re

# XML 1.0 allows only TAB, LF, CR, U+0020-U+D7FF, U+E000-U+FFFD and U+10000-U+10FFFF;
# the rest (listed here: compiling the allowed ranges' complement took 3-5 ms, paid at
# every run's start) cannot appear even escaped.
_XML_ILLEGAL = re.compile("[\u0000-\u0008\u000b\u000c\u000e-\u001f\ud800-\udfff\ufffe\uffff]")
_CONTROL = re.compile("[\u0000-\u0008\u000b-\u001f\u007f-\u009f]")
# Inline markdown metacharacters; & < > are HTML-escaped instead, and cells never
# start a line, so heading and list markers cannot take effect.
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")
# What ``md_inline`` escapes in a line: most report text holds none of it, and is kept
# as it is after one search (report.md escapes every cell of every calls table).
_MD_ESCAPED = re.compile(r"[&<>\\`*_\[\]|~]")
# What ``html_text`` changes: markup, quotes and the control characters (report.html
# escapes every cell; most hold none of them).
_HTML_CHANGED = re.compile("[&<>\"'\u0000-\u0008\u000b-\u001f\u007f-\u009f]")


def xml_text(value: object) -> str:
    """Text safe for an XML document (xml.etree escapes markup; this removes what
    XML cannot carry at all)."""
    return _XML_ILLEGAL.sub("\ufffd", str(value))


def _visible_controls(text: str) -> str:
    return _CONTROL.sub(lambda match: f"\\x{ord(match.group()):02x}", text)


def visible_lines(value: object) -> str:
    """Multi-line text with its lines kept (CRLF and a lone CR become LF) and every
    other control character made visible."""
    text = str(value)
    if not _CONTROL.search(text):  # no CR and nothing to show (most text): nothing to change
        return text
    return _visible_controls(text.replace("\r\n", "\n").replace("\r", "\n"))


def one_line(value: object, limit: int | None = None) -> str:
    """A single console/markdown line: newlines and control characters made visible."""
    text = visible_lines(value).replace("\n", " ⏎ ")
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


def md_inline(value: object, limit: int | None = None) -> str:
    """Text for a markdown table cell or paragraph: one line, HTML entities escaped,
    every markdown metacharacter backslash-escaped, so it renders as the literal text."""
    text = one_line(value, limit)
    if not _MD_ESCAPED.search(text):
        return text
    return _MD_SPECIAL.sub(r"\\\1", html.escape(text, quote=False))


def md_block(value: object) -> str:
    """Multi-line text (stderr) as a fenced block that the text cannot close."""
    text = visible_lines(value)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def html_text(value: object) -> str:
    """Text for an HTML element or a quoted attribute: markup and quotes escaped,
    control characters made visible (they have no business in a page)."""
    text = str(value)
    if not _HTML_CHANGED.search(text):
        return text
    return html.escape(_visible_controls(text), quote=True)
