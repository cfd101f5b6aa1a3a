"""``retryproof compare REPORT.json...``: implementations side by side.

One column per report, one row per verdict fact, checklist question and catalogue
scenario, as markdown (``comparison.md``) and as a grid of status cells in a
self-contained HTML page (``comparison.html``, ``writers/grid.py``). A failing cell
links to that scenario's evidence in the report's own ``report.md`` beside the
``report.json`` (in the HTML grid: its timeline in ``report.html`` when one was
written), or to the ``report.json`` when neither was. Every input must be a valid report: the checks of
``retryproof validate-report``, so a table never shows a verdict its report
contradicts.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from retryproof.conformance.catalogue import catalogue
from retryproof.conformance.commands.validate_report import load_report
from retryproof.conformance.errors import KitError
from retryproof.conformance.writers.content import STATUS_CELLS
from retryproof.conformance.writers.document import scenario_result
from retryproof.conformance.writers.escape import md_inline
from retryproof.conformance.writers.files import prepare_directory, write_atomically
from retryproof.conformance.writers.grid import STATUS_TONES, GridCell, Tone, render_grid
from retryproof.conformance.writers.html import evidence_anchor

#: Failed and error cells link to their evidence.
LINKED = ("failed", "error")
OUTPUTS = ("comparison.md", "comparison.html")


@dataclass(frozen=True)
class Column:
    """One report: where it is, what it says, and where its evidence reads best."""

    label: str
    path: str
    document: dict[str, Any]
    evidence: str  # report.md beside the report.json, or the report.json itself
    html_evidence: str | None  # report.html beside it, if written

    @cached_property
    def _scenarios(self) -> dict[str, dict[str, Any]]:
        return {scenario["id"]: scenario for scenario in self.document["scenarios"]}

    def scenario(self, scenario_id: str) -> dict[str, Any] | None:
        return self._scenarios.get(scenario_id)


@dataclass(frozen=True)
class Cell:
    text: str
    link: str | None = None  # relative to the comparison's folder
    html_link: str | None = None  # the same evidence in report.html, for the HTML table
    title: str | None = None  # the reason, shown on hover in HTML
    tone: Tone = "fact"  # the HTML grid's colour of the cell


def load_columns(paths: Sequence[str]) -> list[Column]:
    """Read and validate every report; a bad one is a ``KitError`` naming its first problems."""
    if not paths:
        raise KitError("compare needs at least one report.json", "pass the report.json of each run")
    return columns_of([(path, load_report(path)) for path in paths])


def columns_of(loaded: Sequence[tuple[str, dict[str, Any]]]) -> list[Column]:
    """A column per report already read and validated (``load_report``), in order."""
    columns: list[Column] = []
    for path, document in loaded:
        markdown, page = (os.path.join(os.path.dirname(path), name) for name in ("report.md", "report.html"))
        implementation = document["implementation"]
        label = f"{implementation['name']} {implementation['version']}"
        columns.append(
            Column(
                label,
                path,
                document,
                markdown if os.path.isfile(markdown) else path,
                page if os.path.isfile(page) else None,
            )
        )
    labels = [column.label for column in columns]
    # Two runs of one implementation (variants, or before and after) are told apart by folder.
    return [
        replace(c, label=f"{c.label} ({os.path.basename(os.path.dirname(os.path.abspath(c.path)))})")
        if labels.count(c.label) > 1
        else c
        for c in columns
    ]


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a markdown heading: lower case, punctuation dropped,
    spaces to hyphens (``### CONFLICT-DIGEST: The same id`` -> ``conflict-digest-the-same-id``)."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def rows(columns: Sequence[Column], out: str) -> list[tuple[str, list[Cell]]]:
    """The table: (row label, one cell per column)."""

    def facts(read: Callable[[dict[str, Any]], Any]) -> list[Cell]:
        return [Cell(str(read(column.document))) for column in columns]

    table = [
        ("verdict", [Cell(c.document["verdict"]["headline"], tone=_verdict_tone(c.document)) for c in columns]),
        (
            "counts",
            [Cell(", ".join(f"{n} {status}" for status, n in c.document["counts"].items() if n)) for c in columns],
        ),
        ("language", facts(lambda document: document["implementation"].get("language", ""))),
        ("run started", facts(lambda document: document["started_at"])),
        ("seed", facts(lambda document: document["seed"])),
    ]
    questions = {item["id"]: item["question"] for item in columns[0].document["checklist"]}
    for question, text in questions.items():
        table.append(
            (
                f"{question} {text}",
                [
                    _answer_cell(next((i["answer"] for i in c.document["checklist"] if i["id"] == question), ""))
                    for c in columns
                ],
            )
        )
    for item in catalogue():
        if not any(column.scenario(item.id) for column in columns):
            continue
        table.append((f"{item.id} ({item.level})", [_scenario_cell(column, item.id, out) for column in columns]))
    return table


def _verdict_tone(document: dict[str, Any]) -> Tone:
    verdict = document["verdict"]
    return "pass" if verdict["conformant"] else "fail" if verdict["blocking"] else "not-verified"


#: A checklist answer's tone in the grid.
ANSWER_TONES: dict[str, Tone] = {
    "yes": "pass",
    "yes (with warnings)": "pass",
    "no": "fail",
    "unverified": "not-verified",
    "not applicable": "na",
    "unanswered": "not-covered",
}


def _answer_cell(answer: str) -> Cell:
    return Cell(answer, tone=ANSWER_TONES.get(answer, "fact"))


#: The verdict's lists that name a skip, and how its cell reads.
SKIPS: tuple[tuple[str, str, Tone], ...] = (
    ("blocking", "not verified", "not-verified"),
    ("needs_harness", "not verified", "not-verified"),
    ("not_covered", "not covered", "not-covered"),
)


def _skip(document: dict[str, Any], scenario_id: str) -> Cell | None:
    """A skip the verdict counts: not verified (it blocks, or a binding lacks the
    harness's hooks) or not covered (an optional capability); None for any other."""
    verdict = document["verdict"]
    for key, text, tone in SKIPS:
        why = next((item["why"] for item in verdict.get(key, ()) if item["id"] == scenario_id), None)
        if why is not None:
            return Cell(text, title=why, tone=tone)
    return None


def _scenario_cell(column: Column, scenario_id: str, out: str) -> Cell:
    scenario = column.scenario(scenario_id)
    if scenario is None:
        return Cell("not run", tone="none")
    status = scenario["status"]
    if status == "skipped":
        return _skip(column.document, scenario_id) or Cell(STATUS_CELLS[status], title=scenario["reason"], tone="skip")
    if status not in LINKED:
        return Cell(STATUS_CELLS[status], title=scenario["reason"], tone=STATUS_TONES[status])
    target = _relative(column.evidence, out)
    if column.evidence.endswith(".md"):
        target += "#" + github_anchor(f"{scenario_id}: {scenario['title']}")
    page = (
        column.html_evidence and f"{_relative(column.html_evidence, out)}#{evidence_anchor(scenario_result(scenario))}"
    )
    return Cell(STATUS_CELLS[status], target, page, scenario["reason"], STATUS_TONES[status])


def _relative(path: str, out: str) -> str:
    return os.path.relpath(path, out).replace(os.sep, "/")


def render_markdown(columns: Sequence[Column], table: list[tuple[str, list[Cell]]]) -> str:
    def cell(value: Cell) -> str:
        text = md_inline(value.text, 120)
        return f"[{text}]({value.link})" if value.link else text

    header = "| | " + " | ".join(md_inline(column.label) for column in columns) + " |"
    out = [
        "# retryproof comparison",
        "",
        "Each column is one report; a FAIL or error cell links to that scenario's evidence.",
        "",
        header,
        "|---|" + "---|" * len(columns),
    ]
    out += ["| " + md_inline(label) + " | " + " | ".join(cell(c) for c in cells) + " |" for label, cells in table]
    return "\n".join(out) + "\n"


def render_html(columns: Sequence[Column], table: list[tuple[str, list[Cell]]]) -> str:
    grid = [
        (label, [GridCell(c.text, c.tone, c.html_link or c.link, c.title) for c in cells]) for label, cells in table
    ]
    return render_grid(
        "retryproof comparison",
        ["Each column is one report; a FAIL or error cell links to that scenario's evidence (its timeline)."],
        [column.label for column in columns],
        grid,
    )


def write_comparison(columns: list[Column], out: str) -> list[str]:
    """Write both renderings of the loaded reports into ``out``; the paths written."""
    with prepare_directory(out):
        table = rows(columns, out)
        written = []
        for name, text in zip(OUTPUTS, (render_markdown(columns, table), render_html(columns, table)), strict=True):
            path = os.path.join(out, name)
            write_atomically(path, text)
            written.append(path)
    return written


def main(args) -> int:
    for path in write_comparison(load_columns(args.reports), args.out):
        print(f"wrote {path}")
    return 0
