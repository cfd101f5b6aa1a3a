"""Escaping of harness text, one character at a time: a text is kept as it is only when
it holds nothing to escape, so each character that must be escaped is tried alone in
otherwise plain text (a hostile harness needs only one ``|`` to forge a table column)."""

from __future__ import annotations

import html

import pytest

from retryproof.conformance.writers.escape import html_text, md_inline, one_line, visible_lines, xml_text

MARKDOWN = "\\`*_[]|~"
ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
CONTROLS = [chr(code) for code in [*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0)] if code != 0x0D]


@pytest.mark.parametrize("character", list(MARKDOWN))
def test_each_markdown_metacharacter_alone_is_escaped(character):
    assert md_inline(f"a{character}b") == f"a\\{character}b"


@pytest.mark.parametrize("character", list(ENTITIES))
def test_each_markup_character_alone_is_an_entity(character):
    assert md_inline(f"a{character}b") == f"a{ENTITIES[character]}b"


def test_each_control_character_alone_is_shown():
    # One test for all 61 (named by code point when one fails): a test each cost more in
    # pytest-xdist's bookkeeping than the check itself.
    wrong = {}
    for control in CONTROLS:
        shown = f"a\\x{ord(control):02x}b"
        got = (visible_lines(f"a{control}b"), md_inline(f"a{control}b"))
        if got != (shown, shown.replace("\\", "\\\\")):
            wrong[f"U+{ord(control):04X}"] = got
    assert not wrong, wrong


def test_line_ends_become_one_line_and_plain_text_is_kept():
    assert visible_lines("a\r\nb\rc") == "a\nb\nc"
    assert one_line("a\r\nb") == "a ⏎ b"
    assert md_inline("a\nb") == "a ⏎ b"
    plain = "write-task 12.5 ms TASK-0001 sha256:5b0d"
    assert md_inline(plain) == visible_lines(plain) == plain
    assert md_inline(plain, 10) == plain[:9] + "…"


@pytest.mark.parametrize("illegal", ["\x00", "\x08", "\x0b", "\x0c", "\x1f", "\ud800", "\udfff", "\ufffe", "\uffff"])
def test_characters_xml_cannot_carry_are_replaced(illegal):
    assert xml_text(f"a{illegal}b") == "a\ufffdb"


@pytest.mark.parametrize("legal", ["\t", "\n", "\r", " ", "\ud7ff", "\ue000", "\ufffd", "\U00010000", "\U0010ffff"])
def test_characters_xml_carries_are_kept(legal):
    assert xml_text(f"a{legal}b") == f"a{legal}b"


def test_each_character_html_text_must_change_alone_is_changed():
    wrong = {}
    for character in ["&", "<", ">", '"', "'", *CONTROLS, "\r"]:
        shown = character if character in "&<>\"'" else f"\\x{ord(character):02x}"
        got = html_text(f"a{character}b")
        if not got == html.escape(f"a{shown}b") != f"a{character}b":
            wrong[f"U+{ord(character):04X}"] = got
    assert not wrong, wrong


def test_html_text_keeps_plain_text_and_line_ends():
    assert html_text("write_task\tTASK-0001\nok") == "write_task\tTASK-0001\nok"
