"""From scenario statuses to a verdict, checklist answers and an exit code.

The rules are data in ``spec/retryproof.yaml`` (``verdict``); this module applies
them. A baseline never changes the verdict, only the exit code.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence

from retryproof.conformance.catalogue import catalogue, checklist_questions
from retryproof.conformance.events import ScenarioResult
from retryproof.conformance.records import Answer, Verdict
from retryproof.spec import load_spec


@functools.cache
def optional_capabilities() -> frozenset[str]:
    return frozenset(load_spec()["verdict"]["optional_capabilities"])


@functools.cache
def tool_paths() -> tuple[str, ...]:
    """The side-effecting tool paths a runtime may offer, in the spec's order (write_task, approval)."""
    return tuple(load_spec()["verdict"]["tool_paths"])


@functools.cache
def checklist_tool_path() -> str:
    """The tool path the seven checklist questions ask about (VERDICT-R18)."""
    return str(load_spec()["verdict"]["checklist_tool_path"])


def _harness_hook(need: str) -> bool:
    """Test hooks only a harness can offer (VERDICT-R15): a binding reaches a server as
    its callers do, so it has no failpoints, no tamper or diagnose ops and no raw
    protocol lines."""
    return need in ("tamper", "diagnose") or need.startswith(("failpoint:", "tamper:", "protocol:"))


def needs_a_harness(result: ScenarioResult) -> bool:
    """Whether a scenario that applies was skipped for harness hooks alone: through a
    binding it cannot be verified, whatever the server does. (One that does not apply,
    such as an approval probe for a server without approval, is not covered instead.)"""
    missing = set(result.evidence.get("missing", ())) - optional_capabilities()
    return result.status == "skipped" and applies(result) and bool(missing) and all(map(_harness_hook, missing))


def applies(result: ScenarioResult) -> bool:
    """Whether a scenario applies to the runtime: it does, unless it was skipped for a
    tool path the runtime does not offer (whatever else it misses), or for optional
    features the runtime does not declare and for nothing else. A missing
    failpoint belongs to the feature its name is namespaced under (``approval.*`` to
    ``approval``): a runtime without approval cannot offer approval failpoints either."""
    missing = set(result.evidence.get("missing", ()))
    if result.status == "skipped" and missing & set(tool_paths()):
        return False  # VERDICT-R16: the whole path is not offered, whatever else is missing
    absent = missing & optional_capabilities()
    if result.status != "skipped" or not absent:
        return True
    owned = {
        need for need in missing if need.startswith("failpoint:") and need[len("failpoint:") :].split(".")[0] in absent
    }
    return bool(missing - absent - owned)


def _blocking_reason(result: ScenarioResult) -> str | None:
    if result.status in ("failed", "error"):
        return f"{result.status}: {result.reason}"
    if result.status == "skipped" and applies(result):
        return f"not verified: {result.reason}"
    return None


def judge(
    results: Sequence[ScenarioResult],
    baseline: Iterable[str] = (),
    black_box: bool = False,
    capabilities: Iterable[str] | None = None,
) -> Verdict:
    """``black_box``: the run reached the runtime through a binding, where a MUST
    scenario skipped for harness hooks alone is listed apart instead of blocking.
    ``capabilities``: what the runtime declared in hello (None: every tool path)."""
    baseline = set(baseline)
    offered = set(tool_paths()) if capabilities is None else set(capabilities) & set(tool_paths())
    blocking: list[tuple[str, str]] = []
    warnings: list[tuple[str, str]] = []
    not_covered: list[tuple[str, str]] = []
    needs_harness: list[tuple[str, str]] = []
    for result in results:
        reason = _blocking_reason(result)
        if black_box and result.entry.level == "MUST" and needs_a_harness(result):
            needs_harness.append((result.entry.id, result.reason or "skipped"))
        elif result.entry.level == "MUST" and reason:
            blocking.append((result.entry.id, reason))
        elif result.entry.level != "MUST" and result.status in ("failed", "error"):
            warnings.append((result.entry.id, reason or result.status))
        elif result.status == "skipped" and not applies(result):
            not_covered.append((result.entry.id, result.reason or "skipped"))
    expected = tuple(scenario_id for scenario_id, _ in blocking if scenario_id in baseline)
    stale = tuple(result.entry.id for result in results if result.entry.id in baseline and result.status == "passed")
    unexpected = [scenario_id for scenario_id, _ in blocking if scenario_id not in baseline]
    selected = {result.entry.id for result in results}
    catalogued = {item.id for item in catalogue()}
    complete = selected == catalogued
    conformant = complete and not blocking
    return Verdict(
        conformant=conformant,
        complete=complete,
        selected=len(selected),
        catalogued=len(catalogued),
        blocking=tuple(blocking),
        warnings=tuple(warnings),
        not_covered=tuple(not_covered),
        needs_harness=tuple(needs_harness),
        expected_failures=expected,
        stale_baseline=stale,
        checklist=answer_checklist(results, checklist_tool_path() in offered),
        exit_code=1 if unexpected or stale else 0,
        black_box=black_box,
        tool_paths=tuple(
            (path, "not offered" if path not in offered else "certified" if conformant else "not certified")
            for path in tool_paths()
        ),
    )


def questions(result: ScenarioResult) -> tuple[str, ...]:
    """The checklist questions a result answers: its catalogue entry's, except a
    failure whose evidence names the questions it exercised (FUZZ-MODEL's minimal
    history, ``checklist_questions``): a digest conflict found by the fuzzer says
    nothing about races."""
    named = result.evidence.get("checklist_questions") if result.status == "failed" else None
    return tuple(named) if named else result.entry.checklist


def answer_checklist(results: Sequence[ScenarioResult], offered: bool = True) -> tuple[Answer, ...]:
    """Each of the seven questions, answered from the scenarios behind it (``verdict.
    checklist`` of the spec): no beats unverified beats yes. Only MUST scenarios can
    answer no, as only they decide the verdict; a failed or errored SHOULD scenario
    turns yes into "yes (with warnings)", so a conformant run never answers no.
    ``offered``: whether the runtime offers the tool path the questions ask about; when
    it does not, an approval scenario that passed answers no question about task
    creation, so nothing better than "unanswered" is said (VERDICT-R18)."""
    answers = []
    for question, text in checklist_questions().items():
        behind = [result for result in results if question in questions(result)]
        judged = [result for result in behind if applies(result)]
        broken = {result.entry.level for result in behind if result.status in ("failed", "error")}
        if "MUST" in broken:
            answer = "no"
        elif not offered:
            answer = "unanswered"
        elif not judged:
            answer = "not applicable" if behind else "unverified"
        elif any(result.status == "skipped" and result.entry.level == "MUST" for result in judged) or not any(
            result.status == "passed" for result in judged
        ):
            answer = "unverified"
        else:
            answer = "yes (with warnings)" if broken else "yes"
        answers.append(Answer(question, text, answer, tuple((result.entry.id, result.status) for result in behind)))
    return tuple(answers)
