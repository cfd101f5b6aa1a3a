"""The scenario catalogue of ``spec/retryproof.yaml`` as typed entries.

Levels, needs, requirements and checklist questions are stated once, in the spec;
scenario code only binds a function to an id.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from retryproof.spec import load_spec

TYPE_CHECKING = False  # not typing's: importing typing would be paid by 'retryproof list'
if TYPE_CHECKING:
    from typing import Literal

    #: RFC 2119 levels a requirement or a scenario may carry.
    Level = Literal["MUST", "SHOULD", "MAY"]


@dataclass(frozen=True)
class Entry:
    id: str
    title: str
    level: Level
    checks: tuple[str, ...]
    checklist: tuple[str, ...]
    needs: tuple[str, ...]
    description: str = ""  # what the scenario does, step by step, in the spec's words
    #: Failpoints it arms when the runtime declares them; without, it takes a black-box path.
    uses_failpoints: tuple[str, ...] = ()

    @property
    def capabilities(self) -> tuple[str, ...]:
        return tuple(need for need in self.needs if ":" not in need)

    @property
    def failpoints(self) -> tuple[str, ...]:
        return tuple(need.partition(":")[2] for need in self.needs if need.startswith("failpoint:"))

    @property
    def tamper_actions(self) -> tuple[str, ...]:
        return tuple(need.partition(":")[2] for need in self.needs if need.startswith("tamper:"))

    @property
    def protocol_parts(self) -> tuple[str, ...]:
        return tuple(need.partition(":")[2] for need in self.needs if need.startswith("protocol:"))

    @property
    def tools(self) -> tuple[str, ...]:
        return tuple(need.partition(":")[2] for need in self.needs if need.startswith("tool:"))


@cache
def catalogue() -> tuple[Entry, ...]:
    """Every scenario of the spec, in spec order (the order of every report)."""
    return tuple(
        Entry(
            id=item["id"],
            title=item["title"],
            level=item["level"],
            checks=tuple(item.get("checks", ())),
            checklist=tuple(item.get("checklist", ())),
            needs=tuple(item.get("needs", ())),
            description=" ".join(str(item.get("description", "")).split()),
            uses_failpoints=tuple(item.get("uses_failpoints", ())),
        )
        for item in load_spec()["scenarios"]
    )


def entry(scenario_id: str) -> Entry:
    for item in catalogue():
        if item.id == scenario_id:
            return item
    raise KeyError(scenario_id)


def checklist_questions() -> dict[str, str]:
    return dict(load_spec()["checklist"])


@cache
def requirement_texts() -> dict[str, str]:
    """Requirement id -> its text, so a report can quote what a failed scenario checks."""
    return {item["id"]: " ".join(str(item["text"]).split()) for item in load_spec()["requirements"]}


@cache
def requirement_questions() -> dict[str, frozenset[str]]:
    """Requirement id -> the checklist questions it answers."""
    return {item["id"]: frozenset(item.get("checklist", ())) for item in load_spec()["requirements"]}
