"""``retryproof diff OLD.json NEW.json``: what changed between two runs, as markdown.

Regressions (a scenario that passed, or was not applicable, now fails, ends in error
or blocks the verdict as not verified), fixes (the reverse), other status changes, scenarios new or removed (a
different selection), and the verdict. Exit 1 on any regression, or on a verdict that
was conformant and is not (a lost verdict is a regression however it was lost), so a
CI job can gate on it; 0 otherwise; 2 when either file is unreadable or not a valid report
(the checks of ``retryproof validate-report``).
"""

from __future__ import annotations

from typing import Any

from retryproof.conformance.commands.validate_report import load_report, scenario_result
from retryproof.conformance.writers.content import tally
from retryproof.conformance.writers.escape import md_inline
from retryproof.conformance.writers.markdown import md_table

#: Statuses that hold a runtime to its contract; leaving them for BROKEN is a regression.
GOOD = ("passed", "not_applicable")
BROKEN = ("failed", "error")


def _run_line(document: dict[str, Any]) -> str:
    implementation = document["implementation"]
    return md_inline(
        f"{implementation.get('name', '?')} {implementation.get('version', '')}, retryproof "
        f"{document['kit']['version']}, seed {document['seed']}, started {document['started_at']}"
    )


def _counts(document: dict[str, Any]) -> str:
    return tally([scenario_result(scenario) for scenario in document["scenarios"]]).line()


def render_diff(old: dict[str, Any], new: dict[str, Any]) -> tuple[str, int]:
    """The markdown and the number of regressions (at least 1 when the verdict was lost)."""
    before = {scenario["id"]: scenario for scenario in old["scenarios"]}
    after = {scenario["id"]: scenario for scenario in new["scenarios"]}
    common = [sid for sid in after if sid in before]
    changed = [sid for sid in common if before[sid]["status"] != after[sid]["status"]]
    # Blocking now: failed or error, or a MUST scenario skipped where it applies (not verified).
    blocks = {item["id"] for item in new["verdict"]["blocking"]}
    blocked = {item["id"] for item in old["verdict"]["blocking"]}
    regressions = [
        sid for sid in changed if before[sid]["status"] in GOOD and (after[sid]["status"] in BROKEN or sid in blocks)
    ]
    fixes = [
        sid for sid in changed if (before[sid]["status"] in BROKEN or sid in blocked) and after[sid]["status"] in GOOD
    ]
    others = [sid for sid in changed if sid not in regressions and sid not in fixes]
    added = [sid for sid in after if sid not in before]
    removed = [sid for sid in before if sid not in after]
    old_verdict, new_verdict = old["verdict"]["headline"], new["verdict"]["headline"]
    lost = old["verdict"]["conformant"] and not new["verdict"]["conformant"]
    out = [
        "# retryproof diff",
        "",
        f"- old: {_run_line(old)}",
        f"- new: {_run_line(new)}",
        "",
        f"**Verdict: {md_inline(old_verdict)} → {md_inline(new_verdict)}**"
        + (" (unchanged)" if old_verdict == new_verdict else " (lost: a regression)" if lost else " (changed)"),
        "",
        f"- old: {_counts(old)}",
        f"- new: {_counts(new)}",
        "",
        f"{len(regressions)} regression(s), {len(fixes)} fix(es), {len(others)} other status change(s), "
        f"{len(added)} new and {len(removed)} removed scenario(s).",
        "",
    ]

    def section(title: str, ids: list[str], headers: tuple[str, ...], row) -> None:
        if ids:
            out.extend([f"## {title}", "", md_table(headers, [row(sid) for sid in ids]), ""])

    changes = ("id", "level", "old", "new", "reason now")
    section(
        "Regressions",
        regressions,
        (*changes, "reproduce"),
        lambda sid: (*_change(before[sid], after[sid]), after[sid]["reproduce"]),
    )
    section("Fixes", fixes, changes, lambda sid: _change(before[sid], after[sid]))
    section("Other status changes", others, changes, lambda sid: _change(before[sid], after[sid]))
    section("New scenarios", added, ("id", "level", "status", "reason"), lambda sid: _state(after[sid]))
    section("Removed scenarios", removed, ("id", "level", "old status", "old reason"), lambda sid: _state(before[sid]))
    return "\n".join(out) + "\n", len(regressions) or int(lost)


def _change(old: dict[str, Any], new: dict[str, Any]) -> tuple[Any, ...]:
    return (new["id"], new["level"], old["status"], new["status"], new["reason"])


def _state(scenario: dict[str, Any]) -> tuple[Any, ...]:
    return (scenario["id"], scenario["level"], scenario["status"], scenario["reason"])


def main(args) -> int:
    old, new = load_report(args.old), load_report(args.new)
    text, regressions = render_diff(old, new)
    print(text, end="")
    return 1 if regressions else 0
