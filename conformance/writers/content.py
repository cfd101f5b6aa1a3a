"""What the human-readable reports say, decided once: report.md, report.html and the
GitHub step summary render these pieces, each in its own markup, so the three never
drift apart (a count, a grouping or a row of evidence is computed here and nowhere else).

Nothing here escapes: values stay as the harness gave them, and each renderer escapes
for its format (``writers/escape.py``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from retryproof.conformance.catalogue import requirement_questions, requirement_texts
from retryproof.conformance.events import RunFinished, RunInfo, ScenarioResult
from retryproof.conformance.verdict import applies, questions
from retryproof.conformance.writers.badge import tone

#: The columns of a call table, in order; ``request_digest`` shows which calls carried
#: the same request (CONFLICT-DIGEST's second call differs there and only there).
CALL_COLUMNS = (
    "op",
    "process",
    "client_submission_id",
    "request_digest",
    "kind",
    "disposition",
    "action_taken",
    "task_id",
    "conflict_reason",
    "error",
    "message",
)

#: Ids per line where a cell lists ids (WT-DIGEST-VECTORS snapshots hold dozens).
IDS_PER_LINE = 6

#: Hex digits of a digest shown in a call table; report.json keeps the whole digest.
DIGEST_HEX_SHOWN = 12


class IdList(tuple):
    """A cell that is a list of ids: renderers wrap it every ``IDS_PER_LINE`` items
    instead of cutting it or letting it widen the table."""

    def lines(self) -> list[list[str]]:
        items = [str(item) for item in self]
        return [items[start : start + IDS_PER_LINE] for start in range(0, len(items), IDS_PER_LINE)]


@dataclass(frozen=True)
class Table:
    caption: str | None
    headers: Sequence[str]
    rows: Sequence[Sequence[Any]]
    whole: bool = False  # evidence a reviewer must see uncut
    calls: bool = False  # the scenario's calls: row n is call n, bar n of its timeline


@dataclass(frozen=True)
class Fact:
    key: str
    value: str | list[str]  # a list is shown item by item, never cut


@dataclass(frozen=True)
class Code:
    caption: str
    text: str


Block = Table | Fact | Code


@dataclass(frozen=True)
class Tally:
    """The counts line: how many scenarios ended each way, as the verdict sees them."""

    passed: int
    failed: int  # MUST scenarios that failed: the runtime broke the contract
    errors: int  # MUST scenarios that ended in error: the kit could not judge (they block too)
    warnings: int  # SHOULD scenarios that failed or ended in error
    not_verified: int  # MUST scenarios skipped for a need that applies (they block)
    skipped: int  # every other skip: a feature the runtime lacks, or a SHOULD scenario's tool
    not_applicable: int

    def line(self) -> str:
        return (
            f"{self.passed} passed · {self.failed} failed (MUST) · {self.errors} errors (MUST) · "
            f"{self.warnings} SHOULD warnings · "
            f"{self.not_verified} not verified · {self.skipped} skipped · {self.not_applicable} not applicable"
        )


#: A status in one short table cell (the comparison table, the kill matrix).
STATUS_CELLS = {"passed": "pass", "failed": "FAIL", "error": "error", "skipped": "skip", "not_applicable": "n/a"}


def broken(result: ScenarioResult) -> bool:
    return result.status in ("failed", "error")


def not_verified(result: ScenarioResult) -> bool:
    """A MUST scenario skipped for something the runtime should offer: it blocks."""
    return result.status == "skipped" and result.entry.level == "MUST" and applies(result)


def tally(results: Sequence[ScenarioResult]) -> Tally:
    return Tally(
        passed=sum(result.status == "passed" for result in results),
        failed=sum(result.status == "failed" and result.entry.level == "MUST" for result in results),
        errors=sum(result.status == "error" and result.entry.level == "MUST" for result in results),
        warnings=sum(broken(result) and result.entry.level != "MUST" for result in results),
        not_verified=sum(not_verified(result) for result in results),
        skipped=sum(result.status == "skipped" and not not_verified(result) for result in results),
        not_applicable=sum(result.status == "not_applicable" for result in results),
    )


def tool_paths_line(run: RunFinished) -> str:
    """Which tool paths the verdict certifies (VERDICT-R17), so that a certificate for
    approval flows is never read as one for task creation; a partial run that blocks
    nothing says why it certifies none, so "not certified" is not read as a failure."""
    line = "Tool paths: " + " · ".join(f"{path} {state}" for path, state in run.verdict.tool_paths)
    return f"{line} (a partial run certifies none)" if tone(run) == "partial" else line


def failures(run: RunFinished) -> list[ScenarioResult]:
    """Scenarios that failed or ended in error, MUST first (they decide the verdict)."""
    return sorted((result for result in run.results if broken(result)), key=lambda r: r.entry.level != "MUST")


def unverified(run: RunFinished) -> list[ScenarioResult]:
    return [result for result in run.results if not_verified(result)]


def requirements(result: ScenarioResult) -> list[tuple[str, str]]:
    """(id, text) of the requirements a failure breaks: those of the scenario's that
    answer the questions its evidence says it exercised (a FUZZ-MODEL digest conflict
    breaks CON-1, not the six others FUZZ-MODEL checks); otherwise every one it checks."""
    texts, answering = requirement_texts(), requirement_questions()
    checked = result.entry.checks
    exercised = set(questions(result)) if result.evidence.get("checklist_questions") else set()
    broken = [requirement for requirement in checked if answering.get(requirement, frozenset()) & exercised]
    return [(requirement, texts.get(requirement, "(not in this spec version)")) for requirement in broken or checked]


def harness_line(info: RunInfo) -> tuple[str, str]:
    """The environment row of what the kit started: a binding's server is not a
    harness, and an empty command is the bundled reference only when it is a harness's."""
    if info.black_box:
        return ("server command (binding)", info.harness_command or "not recorded")
    return ("harness command", info.harness_command or "the bundled reference runtime")


def environment(run: RunFinished) -> list[tuple[str, Any]]:
    """Where and how the run happened: what a reviewer needs to trust or repeat it."""
    info, implementation = run.info, run.info.implementation
    return [
        (
            "implementation",
            f"{implementation.get('name')} {implementation.get('version')} ({implementation.get('language')})",
        ),
        ("kit version", f"retryproof {info.kit_version}"),
        ("spec version", info.spec_version),
        ("spec fingerprint", info.spec_fingerprint or "not recorded"),
        ("protocol", info.protocol),
        ("Python", info.python or "unknown"),
        ("OS", info.platform or "unknown"),
        harness_line(info),
        ("target arguments", info.target or "none (the bundled reference runtime)"),
        ("seed", info.seed),
        ("concurrency", info.concurrency),
        ("capabilities", IdList(info.capabilities)),
        ("failpoints", IdList(info.failpoints)),
        ("baseline", info.baseline or "none"),
        *([("shard", f"{info.shard} (merge the shards with retryproof merge)")] if info.shard else []),
        ("started", info.started_at),
        ("duration", f"{run.duration_s:.2f}s"),
    ]


def checklist_rows(run: RunFinished) -> list[tuple[str, str, str, IdList]]:
    return [
        (answer.question, answer.text, answer.answer, IdList(f"{sid} ({status})" for sid, status in answer.scenarios))
        for answer in run.verdict.checklist
    ]


def baseline_line(run: RunFinished) -> str | None:
    """What the baseline did to the exit code, when one was given and mattered."""
    verdict = run.verdict
    if not (verdict.expected_failures or verdict.stale_baseline):
        return None
    return (
        f"Baseline: expected failures {', '.join(verdict.expected_failures) or 'none'}; "
        f"stale entries (now passing, remove them) {', '.join(verdict.stale_baseline) or 'none'}."
    )


def status_text(result: ScenarioResult) -> str:
    return result.status + (f" ({result.baseline})" if result.baseline else "")


def resolution(result: ScenarioResult) -> tuple[str, str] | None:
    """What a KILL-NEMESIS result's kills could see (``resolution_ms`` in its evidence):
    a few words for report.html's summary line (a pass's evidence is folded away there)
    and the sentence under its status. None without a figure there (another scenario, or
    a crafted report's value: left to the facts)."""
    ms = result.evidence.get("resolution_ms", False)
    if ms is None:
        return (
            "resolution none",
            "Resolution: none. No counted kill was shown to follow an effect, so no effect -> answer window is ruled out.",
        )
    if isinstance(ms, bool) or not isinstance(ms, int | float):
        return None
    return (
        f"resolution {ms:g} ms",
        f"Resolution: {ms:g} ms. Each counted effect -> answer kill came at most {ms:g} ms after an effect; "
        f"a pass rules out only windows wider than {ms:g} ms.",
    )


def short_digest(value: Any) -> Any:
    """``sha256:`` and the first hex digits: enough to tell two requests apart in a table."""
    if isinstance(value, str) and value.startswith("sha256:") and len(value) > 7 + DIGEST_HEX_SHOWN:
        return value[: 7 + DIGEST_HEX_SHOWN] + "…"
    return value


def merged_tables(results: Sequence[ScenarioResult]) -> list[tuple[Table, list[str]]]:
    """Evidence tables (``evidence["tables"]``: ``[{title, columns, rows}]``) that
    share a title, merged across scenarios in catalogue order, so a table whose rows
    come from several scenarios reads as one; with the ids of the scenarios behind each."""
    merged: dict[str, tuple[Sequence[str], list[Sequence[Any]], list[str]]] = {}
    for result in results:
        for table in result.evidence.get("tables", ()):
            _, rows, sources = merged.setdefault(table["title"], (table["columns"], [], []))
            rows.extend(table["rows"])
            if result.entry.id not in sources:
                sources.append(result.entry.id)
    return [(Table(title, columns, rows), sources) for title, (columns, rows, sources) in merged.items()]


def evidence_blocks(result: ScenarioResult, black_box: bool = False) -> list[Block]:
    """A scenario's evidence in reading order: snapshots, receipts, its own tables,
    the other facts, the calls, and for a failure how to reproduce it and the stderr
    of what the kit started (through a binding, a server, not a harness)."""
    evidence = dict(result.evidence)
    blocks: list[Block] = []
    tasks = evidence.pop("tasks", None)
    if tasks:
        rows = [(label, snap["count"], IdList(map(str, snap["task_ids"]))) for label, snap in tasks.items()]
        blocks.append(Table(None, ("snapshot (list_tasks)", "count", "task ids"), rows, whole=True))
    receipts = evidence.pop("receipts", None)
    if receipts:
        keys = ("state", "task_id", "task_exists", "digest_matches", "stalled", "age_s")
        rows = [(label, *(receipt.get(key) for key in keys)) for label, receipt in receipts.items()]
        blocks.append(Table(None, ("receipt (diagnose)", *keys), rows))
    for table in evidence.pop("tables", ()):
        blocks.append(Table(table["title"], table["columns"], table["rows"]))
    trace = evidence.pop("traceback", None)
    for key, value in evidence.items():
        if isinstance(value, list) and value:
            blocks.append(Fact(key, [item if isinstance(item, str) else _json(item) for item in value]))
        else:
            blocks.append(Fact(key, _json(value)))
    if result.calls:
        tallied = dispositions(result.calls)
        if tallied:
            blocks.append(Fact("dispositions", tallied))
        calls = [[n, *(_call_cell(call, column) for column in CALL_COLUMNS)] for n, call in enumerate(result.calls, 1)]
        blocks.append(Table("calls", ("#", *CALL_COLUMNS), calls, calls=True))
    if broken(result):
        blocks.append(Code("reproduce", result.reproduce))
        if result.stderr:
            blocks.append(Code(f"{'server' if black_box else 'harness'} stderr (tail)", result.stderr))
        if trace:
            blocks.append(Code("kit traceback", str(trace)))
    return blocks


def dispositions(calls: Sequence[Mapping[str, Any]]) -> str | None:
    """The dispositions a scenario's calls answered, as a reviewer reads them: what the
    runtime did. Only answers the kit accepted count (``ok``, and ``fail`` for a
    conflict); a garbled answer (``info``: its result broke its schema) vouches for
    nothing, so it is counted apart with what it claimed. None when no call has one."""
    accepted: dict[str, int] = {}
    garbled: dict[str, int] = {}
    for call in calls:
        claimed = call.get("disposition")
        if claimed:
            counts = garbled if call.get("kind") == "info" else accepted
            counts[claimed] = counts.get(claimed, 0) + 1
    parts = [_counted(accepted)] if accepted else []
    if garbled:
        total = sum(garbled.values())
        parts.append(
            f"{total} garbled answer{'s' if total > 1 else ''} (indeterminate, not counted: claimed {_counted(garbled)})"
        )
    return "; ".join(parts) or None


def _counted(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{name}={count}" for name, count in counts.items())


def _call_cell(call: Mapping[str, Any], column: str) -> Any:
    value = call.get(column)
    if value == "":
        return '""'  # an empty key sent, not a blank cell (which is no key: the legacy path)
    return short_digest(value) if column == "request_digest" else value


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
