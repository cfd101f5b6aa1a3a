"""report.md: what a reviewer reads. Verdict and counts, the failures with the text of
the requirements they break, what was not verified, the environment, the seven
questions with the scenarios behind each answer, the scenario table, and every
scenario's evidence. What is said is decided in ``content``; this module is markdown."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from retryproof.conformance.events import RunFinished, ScenarioResult
from retryproof.conformance.writers import content
from retryproof.conformance.writers.content import Code, Fact, IdList, Table
from retryproof.conformance.writers.escape import md_block, md_inline


def md_cell(value: Any, limit: int | None = 300) -> str:
    """One escaped table cell; an id list is wrapped with ``<br>`` (the only markup
    added, between escaped items), so a long list neither widens the table nor is cut."""
    if isinstance(value, IdList):
        return "<br>".join(", ".join(md_inline(item) for item in line) for line in value.lines())
    return md_inline("" if value is None else value, limit)


def md_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], limit: int | None = 300) -> str:
    """A GitHub table whose every cell is escaped (cells may hold harness text) and
    cut at ``limit`` characters; ``None`` for evidence a reviewer must see whole."""
    # Imported here: every run imports this module (the step summary's lines), and
    # tabulate costs its start about 20 ms of CPU; only a markdown report draws tables.
    from tabulate import tabulate

    cells = [[md_cell(cell, limit) for cell in row] for row in rows]
    return tabulate(cells, headers=[md_inline(h) for h in headers], tablefmt="github", disable_numparse=True)


def verdict_lines(run: RunFinished) -> list[str]:
    """The verdict and the counts line: the head of report.md and of the step summary."""
    verdict = run.verdict
    return [
        f"**Verdict: {md_inline(verdict.headline)}** (exit code {verdict.exit_code})",
        "",
        content.tally(run.results).line(),
        "",
        md_inline(content.tool_paths_line(run)),
        "",
    ]


def failure_lines(run: RunFinished, reason_limit: int | None = 500, heading: str = "##") -> list[str]:
    """Failures, each with the text of the requirements it checks, then what was not
    verified: a failure is a defect, a missing test hook is not (but blocks too)."""
    out: list[str] = []
    failures = content.failures(run)
    if failures:
        out += [f"{heading} Failures", ""]
        for result in failures:
            out.append(
                f"- `{result.entry.id}` ({result.entry.level}, {content.status_text(result)}): "
                f"{md_inline(result.reason or result.status, reason_limit)}"
            )
            out += [f"  - {requirement}: {md_inline(text)}" for requirement, text in content.requirements(result)]
        out.append("")
    unverified = content.unverified(run)
    if unverified:
        out += [f"{heading} Not verified", ""]
        out += [f"- `{result.entry.id}`: {md_inline(result.reason or 'skipped', 300)}" for result in unverified]
        out.append("")
    return out


class Sections:
    """Each scenario's evidence section, drawn when the scenario finishes (``add``),
    for ``render_markdown`` at the run's end. The sections are most of the drawing
    (about 55 ms of the reference's 60, seed 1), and the end of a run is the one
    stretch where nothing else runs beside the kit: drawn as the results come in,
    they overlap the scenarios still running. A section depends on its result and on
    whether the run is black-box, nothing else; ``render_markdown`` draws any result
    this holds no section of (a report rendered from a file) as it always did."""

    def __init__(self) -> None:
        self._drawn: dict[int, tuple[ScenarioResult, bool, list[str]]] = {}

    def add(self, result: ScenarioResult, black_box: bool) -> None:
        self._drawn[id(result)] = (result, black_box, _evidence(result, black_box))

    def of(self, result: ScenarioResult, black_box: bool) -> list[str]:
        drawn = self._drawn.get(id(result))
        if drawn is not None and drawn[0] is result and drawn[1] == black_box:
            return drawn[2]
        return _evidence(result, black_box)


def render_markdown(run: RunFinished, sections: Sections | None = None) -> str:
    verdict = run.verdict
    implementation = run.info.implementation
    out = [
        f"# retryproof report: {md_inline(implementation.get('name', '?'))} {md_inline(implementation.get('version', ''))}",
        "",
        *verdict_lines(run),
        *failure_lines(run),
    ]
    if verdict.not_covered:
        out += ["Not covered (a tool path or optional capability not offered):", ""]
        out += [f"- `{scenario_id}`: {md_inline(why, 300)}" for scenario_id, why in verdict.not_covered] + [""]
    baseline = content.baseline_line(run)
    if baseline:
        out += [baseline, ""]
    out += ["## Environment", "", md_table(("", ""), content.environment(run)), ""]
    out += ["## The seven checklist questions", ""]
    out += [
        md_table(("", "question", "answer", "scenarios behind the answer"), content.checklist_rows(run), limit=None)
    ]
    out += ["", "## Scenarios", ""]
    out.append(
        md_table(
            ("id", "level", "status", "duration", "baseline", "title"),
            [
                (r.entry.id, r.entry.level, r.status, f"{r.duration_s:.2f}s", r.baseline or "", r.entry.title)
                for r in run.results
            ],
        )
    )
    out.append("")
    for table, sources in content.merged_tables(run.results):
        out += [f"## {md_inline(table.caption)}", "", f"From {', '.join(sources)}.", ""]
        out += [md_table(table.headers, table.rows), ""]
    out += ["## Evidence", ""]
    sections = sections or Sections()
    for result in run.results:
        out += sections.of(result, run.info.black_box)
    return "\n".join(out) + "\n"


def _evidence(result: ScenarioResult, black_box: bool) -> list[str]:
    item = result.entry
    out = [f"### {item.id}: {md_inline(item.title)}", ""]
    if item.description:
        out += [f"What it does: {md_inline(item.description)}", ""]
    out += [
        f"{item.level} · checks {', '.join(item.checks)} · answers {', '.join(item.checklist)} · needs {', '.join(item.needs)}",
        "",
        f"Status: **{content.status_text(result)}** in {result.duration_s:.2f}s"
        + (f": {md_inline(result.reason, 500)}" if result.reason else ""),
        "",
    ]
    resolution = content.resolution(result)
    if resolution:
        out += [md_inline(resolution[1]), ""]
    facts = False
    for block in content.evidence_blocks(result, black_box):
        if isinstance(block, Fact):
            facts = True
            if isinstance(block.value, list):
                # A list (a minimal history, a set of ids) is listed item by item, never cut.
                out.append(f"- {md_inline(block.key)}:")
                out += [f"  - {md_inline(value)}" for value in block.value]
            else:
                out.append(f"- {md_inline(block.key)}: {md_inline(block.value)}")
            continue
        if facts:
            out.append("")
            facts = False
        if isinstance(block, Table):
            if block.caption and block.caption != "calls":
                out += [f"{md_inline(block.caption)}:", ""]
            out += [md_table(block.headers, block.rows, None if block.whole else 300), ""]
        elif isinstance(block, Code):
            out += [f"{block.caption[0].upper()}{block.caption[1:]}:", "", md_block(block.text), ""]
    if facts:
        out.append("")
    return out
