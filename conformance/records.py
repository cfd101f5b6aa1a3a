"""The value records several floors of the kit share: which part of a selection a run
holds (``Shard``), how a scenario ended (``Status``, ``BaselineMark``) and what the run
concluded (``Verdict`` and its checklist ``Answer``s).

A leaf: it imports nothing of the kit, so the options, the events, the verdict's rules
and the writers all import it and none of them has to import another for a type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

Status = Literal["passed", "failed", "error", "skipped", "not_applicable"]
STATUSES: tuple[Status, ...] = get_args(Status)
#: How a baseline marks a result: a listed failure (xfail) or a listed scenario that passed (xpass).
BaselineMark = Literal["xfail", "xpass"]


@dataclass(frozen=True)
class Shard:
    """``--shard K/N``: the K-th (1-based) of N deterministic parts of a run."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


@dataclass(frozen=True)
class Answer:
    question: str  # Q1..Q7
    text: str
    answer: str  # yes | yes (with warnings) | no | unverified | not applicable | unanswered
    scenarios: tuple[tuple[str, str], ...]  # (id, status) of every scenario behind it


@dataclass(frozen=True)
class Verdict:
    """What a run concluded; ``verdict.judge`` applies the spec's rules to make one."""

    conformant: bool  # only a complete run can be
    complete: bool  # every catalogue scenario was selected
    selected: int
    catalogued: int
    blocking: tuple[tuple[str, str], ...]  # (id, why) of MUST scenarios that keep it from conformant
    warnings: tuple[tuple[str, str], ...]  # SHOULD scenarios that failed or ended in error
    not_covered: tuple[tuple[str, str], ...]  # MUST scenarios for an optional feature the runtime lacks
    #: Through a binding (black_box): MUST scenarios that need a harness hook (VERDICT-R15).
    needs_harness: tuple[tuple[str, str], ...]
    expected_failures: tuple[str, ...]  # blocking scenarios listed in the baseline
    stale_baseline: tuple[str, ...]  # baseline entries that passed
    checklist: tuple[Answer, ...]
    exit_code: int
    #: (path, certified | not certified | not offered) for each of ``verdict.tool_paths()`` (VERDICT-R17).
    tool_paths: tuple[tuple[str, str], ...]
    black_box: bool = False  # the runtime was reached through a binding, not a harness

    @property
    def certified(self) -> tuple[str, ...]:
        return tuple(path for path, state in self.tool_paths if state == "certified")

    @property
    def not_offered(self) -> tuple[str, ...]:
        return tuple(path for path, state in self.tool_paths if state == "not offered")

    @property
    def scope(self) -> str:
        """What a certificate covers when it lacks a tool path (VERDICT-R17): ``approval
        only: write_task not offered, not certified``; empty when it covers every one,
        or certifies nothing."""
        if not (self.certified and self.not_offered):
            return ""
        return f"{', '.join(self.certified)} only: {', '.join(self.not_offered)} not offered, not certified"

    @property
    def headline(self) -> str:
        if self.complete and self.conformant:
            notes = [self.scope] if self.scope else []
            if self.black_box:
                hooks = f"{len(self.needs_harness)} MUST scenarios need test hooks only a harness offers"
                notes.insert(0, f"black-box: {hooks} and were not verified")
            return "CONFORMANT" + (f" ({'; '.join(notes)})" if notes else "")
        if self.complete:
            return "NOT CONFORMANT"
        partial = f"partial run: {self.selected} of {self.catalogued} catalogue scenarios selected"
        if self.blocking:
            return f"NOT CONFORMANT ({partial})"
        return f"PARTIAL ({partial}; none of them blocks, conformance is not established)"
