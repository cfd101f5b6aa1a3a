"""report.md: what a reviewer reads. Verdict, the seven questions with the scenarios
behind each answer, the scenario table, and every scenario's evidence."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from tabulate import tabulate

from retryproof.conformance.events import RunFinished, ScenarioResult
from retryproof.conformance.writers.escape import md_block, md_inline

CALL_COLUMNS = (
    "op",
    "process",
    "client_submission_id",
    "kind",
    "disposition",
    "action_taken",
    "task_id",
    "conflict_reason",
    "error",
    "message",
)


def _table(headers: Sequence[str], rows: Iterable[Sequence[Any]], limit: int | None = 300) -> str:
    """A GitHub table whose every cell is escaped (cells may hold harness text) and
    cut at ``limit`` characters; ``None`` for cells that are evidence lists, which a
    reviewer must see whole."""
    cells = [[md_inline("" if cell is None else cell, limit) for cell in row] for row in rows]
    return tabulate(cells, headers=[md_inline(h) for h in headers], tablefmt="github", disable_numparse=True)


def render_markdown(run: RunFinished) -> str:
    info, verdict = run.info, run.verdict
    implementation = info.implementation
    out = [
        f"# retryproof report: {md_inline(implementation.get('name', '?'))} {md_inline(implementation.get('version', ''))}",
        "",
        f"**Verdict: {md_inline(verdict.headline)}** (exit code {verdict.exit_code})",
        "",
        _table(
            ("", ""),
            [
                (
                    "implementation",
                    f"{implementation.get('name')} {implementation.get('version')} ({implementation.get('language')})",
                ),
                ("spec version", info.spec_version),
                ("protocol", info.protocol),
                ("kit version", f"retryproof {info.kit_version}"),
                ("seed", info.seed),
                ("concurrency", info.concurrency),
                ("target", info.target or "the bundled reference runtime"),
                ("capabilities", ", ".join(info.capabilities)),
                ("failpoints", ", ".join(info.failpoints)),
                ("baseline", info.baseline or "none"),
                ("started", info.started_at),
                ("duration", f"{run.duration_s:.2f}s"),
            ],
        ),
        "",
    ]
    if verdict.blocking:
        out += ["What keeps the runtime from conformant:", ""]
        out += [f"- `{scenario_id}`: {md_inline(why, 300)}" for scenario_id, why in verdict.blocking]
        out.append("")
    for title, entries in (
        ("Warnings (SHOULD)", verdict.warnings),
        ("Not covered (optional capability not declared)", verdict.not_covered),
    ):
        if entries:
            out += (
                [f"{title}:", ""] + [f"- `{scenario_id}`: {md_inline(why, 300)}" for scenario_id, why in entries] + [""]
            )
    if verdict.expected_failures or verdict.stale_baseline:
        out += [
            f"Baseline: expected failures {', '.join(verdict.expected_failures) or 'none'}; "
            f"stale entries (now passing, remove them) {', '.join(verdict.stale_baseline) or 'none'}.",
            "",
        ]
    out += ["## The seven checklist questions", ""]
    out.append(
        _table(
            ("", "question", "answer", "scenarios behind the answer"),
            [
                (a.question, a.text, a.answer, ", ".join(f"{sid} ({status})" for sid, status in a.scenarios))
                for a in verdict.checklist
            ],
            limit=None,
        )
    )
    out += ["", "## Scenarios", ""]
    out.append(
        _table(
            ("id", "level", "status", "duration", "baseline", "title"),
            [
                (r.entry.id, r.entry.level, r.status, f"{r.duration_s:.2f}s", r.baseline or "", r.entry.title)
                for r in run.results
            ],
        )
    )
    out += ["", *_merged_tables(run.results)]
    out += ["## Evidence", ""]
    for result in run.results:
        out += _evidence(result)
    return "\n".join(out) + "\n"


def _merged_tables(results: Sequence[ScenarioResult]) -> list[str]:
    """Evidence tables (``evidence["tables"]``: ``[{title, columns, rows}]``) that
    share a title, merged across scenarios in catalogue order, so a table whose rows
    come from several scenarios reads as one."""
    merged: dict[str, tuple[list[str], list[list[Any]], list[str]]] = {}
    for result in results:
        for table in result.evidence.get("tables", ()):
            columns, rows, sources = merged.setdefault(table["title"], (table["columns"], [], []))
            rows.extend(table["rows"])
            if result.entry.id not in sources:
                sources.append(result.entry.id)
    out: list[str] = []
    for title, (columns, rows, sources) in merged.items():
        out += [f"## {md_inline(title)}", "", f"From {', '.join(sources)}.", "", _table(columns, rows), ""]
    return out


def _evidence(result: ScenarioResult) -> list[str]:
    item = result.entry
    out = [f"### {item.id}: {md_inline(item.title)}", ""]
    out.append(
        f"{item.level} · checks {', '.join(item.checks)} · answers {', '.join(item.checklist)} · needs {', '.join(item.needs)}"
    )
    out.append("")
    status = f"**{result.status}**" + (f" ({result.baseline})" if result.baseline else "")
    out += [
        f"Status: {status} in {result.duration_s:.2f}s"
        + (f": {md_inline(result.reason, 500)}" if result.reason else ""),
        "",
    ]
    evidence = dict(result.evidence)
    tasks = evidence.pop("tasks", None)
    if tasks:
        out += [
            _table(
                ("snapshot (list_tasks)", "count", "task ids"),
                [(label, s["count"], ", ".join(map(str, s["task_ids"]))) for label, s in tasks.items()],
                limit=None,
            ),
            "",
        ]
    receipts = evidence.pop("receipts", None)
    if receipts:
        keys = ("state", "task_id", "task_exists", "digest_matches", "stalled", "age_s")
        out += [
            _table(
                ("receipt (diagnose)", *keys), [(label, *(r.get(k) for k in keys)) for label, r in receipts.items()]
            ),
            "",
        ]
    for table in evidence.pop("tables", ()):
        out += [f"{md_inline(table['title'])}:", "", _table(table["columns"], table["rows"]), ""]
    trace = evidence.pop("traceback", None)
    for key, value in evidence.items():
        if isinstance(value, list) and value:
            # A list (a minimal history, a set of ids) is listed item by item, never cut.
            out.append(f"- {md_inline(key)}:")
            out += [
                f"  - {md_inline(item if isinstance(item, str) else json.dumps(item, ensure_ascii=False))}"
                for item in value
            ]
        else:
            out.append(f"- {md_inline(key)}: {md_inline(json.dumps(value, ensure_ascii=False))}")
    if evidence:
        out.append("")
    if result.calls:
        dispositions: dict[str, int] = {}
        for call in result.calls:
            if call.get("disposition"):
                dispositions[call["disposition"]] = dispositions.get(call["disposition"], 0) + 1
        if dispositions:
            out += ["Dispositions: " + ", ".join(f"{md_inline(k)}={v}" for k, v in dispositions.items()), ""]
        out += [_table(CALL_COLUMNS, [[call.get(column) for column in CALL_COLUMNS] for call in result.calls]), ""]
    if result.status in ("failed", "error"):
        out += ["Reproduce:", "", md_block(result.reproduce), ""]
        if result.stderr:
            out += ["Harness stderr (tail):", "", md_block(result.stderr), ""]
        if trace:
            out += ["Kit traceback:", "", md_block(trace), ""]
    return out
