"""retryproof compare on recorded reports: the committed reference sample and the
committed DBOS Transact sample of the real-world matrix."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from retryproof.conformance.cli import main
from retryproof.conformance.commands.compare import github_anchor, load_columns, write_comparison

REPORTS = Path(__file__).resolve().parents[2] / "reports" / "samples"
REFERENCE = REPORTS / "reference"
FAILING = REPORTS / "dbos-transact"


def _copy(source: Path, target: Path) -> Path:
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("replays"))
    return target / "report.json"


def _row(markdown: str, label: str) -> list[str]:
    line = next(line for line in markdown.splitlines() if line.startswith(f"| {label} "))
    return [cell.strip() for cell in line.strip("|").split(" | ")][1:]


def test_every_failing_cell_links_to_a_heading_of_its_report(tmp_path):
    reference, failing = _copy(REFERENCE, tmp_path / "reference"), _copy(FAILING, tmp_path / "dbos")
    write_comparison(load_columns([str(reference), str(failing)]), str(tmp_path / "compare"))
    markdown = (tmp_path / "compare" / "comparison.md").read_text(encoding="utf-8")
    evidence = (tmp_path / "dbos" / "report.md").read_text(encoding="utf-8")
    anchors = {github_anchor(line[4:]) for line in evidence.splitlines() if line.startswith("### ")}
    document = json.loads(failing.read_text(encoding="utf-8"))
    failed = [s for s in document["scenarios"] if s["status"] in ("failed", "error")]
    assert failed, "the recorded DBOS report must hold failures for this test to mean anything"
    for scenario in failed:
        reference_cell, failing_cell = _row(markdown, f"{scenario['id']} ({scenario['level']})")
        assert reference_cell == "pass"
        link = re.fullmatch(r"\[FAIL\]\(\.\./dbos/report\.md#([^)]+)\)", failing_cell)
        assert link, failing_cell
        assert link.group(1) in anchors
    assert _row(markdown, "verdict") == ["CONFORMANT", "NOT CONFORMANT"]
    html = (tmp_path / "compare" / "comparison.html").read_text(encoding="utf-8")
    page = (tmp_path / "dbos" / "report.html").read_text(encoding="utf-8")
    links = re.findall(r'<a href="\.\./dbos/report\.html#([^"]+)">FAIL</a>', html)
    assert len(links) == len(failed)
    assert all(f'id="{anchor}"' in page for anchor in links)


def test_runtime_strings_are_escaped_in_both_renderings(tmp_path):
    evil = _copy(REFERENCE, tmp_path / "evil")
    document = json.loads(evil.read_text(encoding="utf-8"))
    document["implementation"]["name"] = "<script>alert(1)</script> | [x](javascript:1)"
    evil.write_text(json.dumps(document), encoding="utf-8")
    write_comparison(load_columns([str(evil)]), str(tmp_path / "compare"))
    html = (tmp_path / "compare" / "comparison.html").read_text(encoding="utf-8")
    markdown = (tmp_path / "compare" / "comparison.md").read_text(encoding="utf-8")
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "<script>" not in markdown and "\\| \\[x\\]" in markdown


def test_an_edited_report_is_refused_with_a_typed_error(tmp_path, capsys):
    edited = _copy(FAILING, tmp_path / "edited")
    document = json.loads(edited.read_text(encoding="utf-8"))
    document["scenarios"][0]["status"] = "failed" if document["scenarios"][0]["status"] == "passed" else "passed"
    edited.write_text(json.dumps(document), encoding="utf-8")
    assert main(["compare", str(edited), "--out", str(tmp_path / "compare")]) == 2
    err = capsys.readouterr().err
    assert "is not a valid report" in err and "hint: 'retryproof validate-report" in err
    assert not (tmp_path / "compare" / "comparison.md").exists()


@pytest.mark.parametrize("argument", ["missing.json", "report.md"])
def test_a_file_that_is_no_report_is_a_user_error(tmp_path, capsys, argument):
    (tmp_path / "report.md").write_text("# not json\n", encoding="utf-8")
    assert main(["compare", str(tmp_path / argument), "--out", str(tmp_path / "compare")]) == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_compare_holds_its_out_directory_until_both_files_are_written(tmp_path, monkeypatch):
    """It used to drop its claim on the directory as soon as it took it."""
    from kit import claims_while_writing

    held = claims_while_writing(monkeypatch, "retryproof.conformance.commands.compare", tmp_path / "out")
    write_comparison(load_columns([str(REFERENCE / "report.json")]), str(tmp_path / "out"))
    assert held == [True, True]
