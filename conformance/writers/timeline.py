"""What a scenario's pictures say, decided once from its history (report.json's
``calls``): the lanes, one bar per call from send to answer coloured by outcome, the
faults as marks across every lane, the listing where an effect first shows, the failing
call, and for a history of restarts the strip of what each key answered after each.
``writers/svg.py`` only draws these; nothing here knows pixels or markup.

Like Jepsen's timeline, the picture is read against the calls table: bar ``n`` is row
``n`` of that table. Values stay as the harness gave them; the renderer escapes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from retryproof.conformance.events import ScenarioResult
from retryproof.conformance.outcome import ANSWER_FIELDS

Outcome = Literal["created", "reused", "conflict", "in_flight", "lost", "garbled", "error", "ok"]

#: Every outcome a bar can have, in legend order, with its legend text.
OUTCOMES: dict[Outcome, str] = {
    "created": "created (this call wrote the effect)",
    "reused": "reused (answered the earlier effect)",
    "conflict": "conflict",
    "in_flight": "in flight or in progress (busy: retry)",
    "lost": "no answer (killed, timed out, lost)",
    "garbled": "garbled answer (it broke its schema: indeterminate)",
    "error": "error",
    "ok": "other success (listing, diagnostics)",
}

#: How a call's ``failure`` mark reads under the picture.
NOTES = {"about": "the call the failure is about", "before": "the last call before the failure"}

#: Error codes that mean "another call holds this key right now".
BUSY_CODES = frozenset({"in_flight", "in_progress"})
#: The outcomes of ``info`` calls without an error code, drawn alike: nothing is known
#: of their effect (the outcome model's indeterminate).
INDETERMINATE = frozenset({"lost", "garbled"})


@dataclass(frozen=True)
class Bar:
    index: int  # the call's row in the scenario's calls table
    lane: int
    start_ms: float
    end_ms: float
    outcome: Outcome
    label: str  # what the call was and what came of it, in a few words
    detail: str  # everything a hover should say
    failure: str | None  # the call's ``failure`` mark: "about", "before" or None


@dataclass(frozen=True)
class Mark:
    """A fault the kit caused (across every lane), or the listing where new effects
    first showed (on its own lane)."""

    number: int  # the mark's number in the picture and in the list under it
    kind: str  # the fault's op (kill, start, shutdown, ...) or "listed"
    start_ms: float
    end_ms: float
    label: str
    lane: int | None = None  # None: every lane


@dataclass(frozen=True)
class Lane:
    number: int
    label: str


@dataclass(frozen=True)
class Timeline:
    lanes: tuple[Lane, ...]
    bars: tuple[Bar, ...]
    marks: tuple[Mark, ...]
    start_ms: float
    end_ms: float
    #: The call a failed scenario's reason is about, or the last call before a failure
    #: that names none; None when the history marks no call (a pass, an error the
    #: harness caused before any judgement, a report that predates the marks).
    highlighted: Bar | None
    highlight_note: str

    @property
    def outcomes(self) -> list[Outcome]:
        """The outcomes the picture shows, in legend order (its legend lists only those)."""
        present = {bar.outcome for bar in self.bars}
        return [outcome for outcome in OUTCOMES if outcome in present]


def outcome(call: Mapping[str, Any]) -> Outcome:
    """The colour of a call's bar: its disposition, or how it failed to have one. An
    ``info`` call's disposition is not its outcome: a garbled answer vouches for
    nothing, so it is drawn as indeterminate, not as what it claimed."""
    if call["kind"] == "info" and call.get("error") is None:
        return "garbled" if any(field in call for field in ANSWER_FIELDS) else "lost"
    disposition = call.get("disposition")
    if disposition in ("created", "reused", "conflict"):
        return disposition
    if isinstance(call.get("error"), str) and call["error"] in BUSY_CODES:
        return "in_flight"
    if call.get("error") is not None:
        return "error"
    return "ok"


def _number(value: Any, default: int) -> int:
    """An integer field of a call (lane, connection, process), or ``default`` where a
    report (a merged shard's, say) holds something else: a picture never raises."""
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _timed(call: Mapping[str, Any]) -> bool:
    return isinstance(call.get("start_ms"), int | float) and isinstance(call.get("end_ms"), int | float)


def _answer(call: Mapping[str, Any]) -> str:
    kind = outcome(call)
    if kind in ("created", "reused"):
        return f"{kind} {call.get('task_id')}"
    if kind == "conflict":
        return f"conflict {call.get('conflict_reason')}"
    if kind in ("error", "in_flight"):
        return f"error {call.get('error')}"
    if kind == "lost":
        return "no answer"
    if kind == "garbled":
        claimed = call.get("disposition")
        return "garbled answer" + (f" (claimed {claimed})" if isinstance(claimed, str) else "")
    if "listed" in call:
        return f"{call['listed']} task(s)"
    return "ok" + (f" ({call['state']})" if isinstance(call.get("state"), str) else "")


def _bar(index: int, call: Mapping[str, Any]) -> Bar:
    answer = _answer(call)
    key = call.get("client_submission_id")
    detail = [
        f"call {index}: {call['op']}" + (f" {key}" if key is not None else ""),
        f"{answer} ({call['kind']})",
        f"sent {call['start_ms']:.1f} ms, ended {call['end_ms']:.1f} ms; process {call.get('process')}",
    ]
    if call.get("message"):
        detail.append(str(call["message"]))
    return Bar(
        index=index,
        lane=_number(call.get("lane"), 0),
        start_ms=float(call["start_ms"]),
        end_ms=max(float(call["end_ms"]), float(call["start_ms"])),
        outcome=outcome(call),
        label=f"{call['op']}: {answer}",
        detail="\n".join(detail),
        failure=call.get("failure") if call.get("failure") in NOTES else None,
    )


def fault_label(call: Mapping[str, Any]) -> str:
    """A fault in words: what the kit did, to which start of the harness."""
    names = {"kill": "SIGKILL", "start": "start", "shutdown": "shutdown"}
    what = names.get(call["op"], call["op"])
    text = f"{what} (process {call.get('process')})"
    return text + (f": {call['message']}" if call.get("message") else "")


def _lane_label(number: int, connections: set[int]) -> str:
    if number == 0:
        return "scenario"
    own = f" · harness {next(iter(connections))}" if len(connections) == 1 and connections != {1} else ""
    return f"caller {number}{own}"


def timeline(result: ScenarioResult) -> Timeline | None:
    """The scenario's timeline, or None when its history holds no timed call (a
    report written before calls were timed, or a scenario that made no call)."""
    bars: list[Bar] = []
    marks: list[Mark] = []
    lanes: dict[int, set[int]] = {}
    most_listed = 0
    for index, call in enumerate(result.calls, 1):
        if not _timed(call):
            continue
        if call["kind"] == "fault":
            number = len(marks) + 1
            marks.append(Mark(number, call["op"], call["start_ms"], call["end_ms"], fault_label(call)))
            continue
        bar = _bar(index, call)
        bars.append(bar)
        lanes.setdefault(bar.lane, set()).add(_number(call.get("connection"), 1))
        listed = call.get("listed")
        if isinstance(listed, int) and listed > most_listed:
            label = f"effect listed: {listed} task(s), {listed - most_listed} more than any earlier listing"
            marks.append(Mark(len(marks) + 1, "listed", bar.end_ms, bar.end_ms, label, bar.lane))
            most_listed = listed
    if not bars:
        return None
    events = [*((bar.start_ms, bar.end_ms) for bar in bars), *((mark.start_ms, mark.end_ms) for mark in marks)]
    highlighted = next((bar for bar in bars if bar.failure), None)
    return Timeline(
        lanes=tuple(Lane(number, _lane_label(number, lanes[number])) for number in sorted(lanes)),
        bars=tuple(bars),
        marks=tuple(sorted(marks, key=lambda mark: mark.number)),
        start_ms=min(start for start, _ in events),
        end_ms=max(end for _, end in events),
        highlighted=highlighted,
        highlight_note="" if highlighted is None else NOTES[str(highlighted.failure)],
    )


@dataclass(frozen=True)
class StripCell:
    outcome: Outcome | None  # the key's first answer from the new process; None: not called
    cut: bool  # a call of the key was cut (no answer) in the process that ended
    detail: str


@dataclass(frozen=True)
class Strip:
    """After each restart: which keys' calls the end of the process cut, and what each
    key answered first from the new process (KILL-NEMESIS, crash points)."""

    columns: tuple[str, ...]  # one per restart
    keys: tuple[str, ...]
    cells: tuple[tuple[StripCell, ...], ...]  # cells[key][column]


#: A strip is drawn for a history of at least this many restarts; one restart reads
#: well enough on the timeline itself.
STRIP_RESTARTS = 2


def strip(result: ScenarioResult) -> Strip | None:
    calls = result.calls
    restarts = [
        call
        for call in calls
        if call["kind"] == "fault" and call["op"] == "start" and _number(call.get("process"), 0) > 1
    ]
    if len(restarts) < STRIP_RESTARTS:
        return None
    writes = [
        call
        for call in calls
        if call["op"] == "write_task" and call["kind"] != "fault" and isinstance(call.get("client_submission_id"), str)
    ]
    keys = list(dict.fromkeys(call["client_submission_id"] for call in writes))
    if not keys:
        return None
    columns: list[str] = []
    rows: dict[str, list[StripCell]] = {key: [] for key in keys}
    ended = {
        _number(call.get("process"), 0): fault_label(call)
        for call in calls
        if call["kind"] == "fault" and call["op"] != "start"
    }
    for number, restart in enumerate(restarts, 1):
        process = _number(restart.get("process"), 0)
        at = f" at {restart['start_ms']:.0f} ms" if _timed(restart) else ""
        columns.append(f"restart {number}{at}, after {ended.get(process - 1, 'a crash')}")
        for key in keys:
            own = [call for call in writes if call["client_submission_id"] == key]
            cut = any(call.get("process") == process - 1 and outcome(call) == "lost" for call in own)
            first = next((call for call in own if call.get("process") == process), None)
            answer = "not called" if first is None else _answer(first)
            detail = f"{key}, restart {number}: " + ("a call was cut; " if cut else "") + f"then {answer}"
            rows[key].append(StripCell(None if first is None else outcome(first), cut, detail))
    return Strip(tuple(columns), tuple(keys), tuple(tuple(rows[key]) for key in keys))
