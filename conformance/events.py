"""The run as a stream of typed events.

The runner emits them; the console, JSON, Markdown and JUnit writers consume them as
peers. Nothing downstream talks back to the runner.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from retryproof.conformance.catalogue import Entry
from retryproof.conformance.records import BaselineMark, Shard, Status, Verdict


@dataclass(frozen=True)
class RunInfo:
    kit_version: str
    spec_version: str
    protocol: str
    implementation: Mapping[str, Any]
    target: str  # how the runtime was reached, as the CLI arguments that select it
    capabilities: tuple[str, ...]
    failpoints: tuple[str, ...]
    seed: int
    concurrency: int
    started_at: str
    baseline: str | None = None
    harness_command: str = ""  # the command line the kit started ("" for a report that predates it)
    python: str = ""  # the interpreter the kit ran on
    platform: str = ""  # the operating system the kit ran on
    only: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()
    shard: Shard | None = None  # a --shard run: the part of the selection this run holds
    black_box: bool = False  # reached through a binding (an MCP server or HTTP API), not a harness
    spec_fingerprint: str = ""  # retryproof.spec.fingerprint() of the contract run ("" for older reports)


@dataclass(frozen=True)
class ScenarioResult:
    entry: Entry
    status: Status
    reason: str | None
    duration_s: float
    reproduce: str
    evidence: Mapping[str, Any] = field(default_factory=dict)
    calls: tuple[Mapping[str, Any], ...] = ()
    stderr: str | None = None
    baseline: BaselineMark | None = None


@dataclass(frozen=True)
class RunStarted:
    info: RunInfo
    total: int


@dataclass(frozen=True)
class ScenarioStarted:
    entry: Entry
    index: int
    total: int


@dataclass(frozen=True)
class ScenarioFinished:
    result: ScenarioResult
    index: int
    total: int


@dataclass(frozen=True)
class RunFinished:
    info: RunInfo
    results: tuple[ScenarioResult, ...]
    verdict: Verdict
    duration_s: float


Event = RunStarted | ScenarioStarted | ScenarioFinished | RunFinished


class Sink(Protocol):
    def handle(self, event: Event) -> None: ...
