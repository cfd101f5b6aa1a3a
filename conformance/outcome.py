"""Every call the kit makes is ``ok``, ``fail`` or ``info`` (the Jepsen outcome model).

- ``ok``: a parsed success.
- ``fail``: a structured rejection that provably wrote nothing: an error code of
  ``FAIL_CODES`` (the spec's ``outcome_model.fail_codes``) or a ``conflict`` disposition (which by contract writes nothing).
- ``info``: indeterminate: no answer (timeout, EOF, garbled, killed) or an error that
  may follow the effect (``io_error``, ``internal_error``, ``in_progress``, any code
  the spec does not list as writing nothing). ``info`` is never treated as ``fail``.

A scenario's history is its calls and, between them, the faults the kit itself caused
(a process started with failpoints armed, a SIGKILL, a restart), as Jepsen records its
nemesis beside the clients: the evidence shows when each call ran relative to them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from retryproof.adapters.connection import Lost, Reply
from retryproof.adapters.digests import DigestMemo
from retryproof.spec import load_spec
from retryproof.spec.digest import DIGEST_SCHEMA_VERSION, ContractError
from retryproof.spec.protocol import Failure

#: Error codes that, per spec ``outcome_model.fail_codes``, prove nothing was written.
FAIL_CODES = frozenset(load_spec()["outcome_model"]["fail_codes"])
#: Pauses between retries of a call that answered ``in_flight`` (wrote nothing; the
#: scenarios and FUZZ-MODEL retry it within a bound and judge the retry): 50 ms,
#: doubling to 0.4 s. A holder that finishes within milliseconds is met at once, while a
#: claim stranded past the bound (a killed holder's lock that lives for hours) costs a
#: few dozen retries, not hundreds, each of them a call kept in the report's evidence.
IN_FLIGHT_RETRY_PAUSES_S = (0.05, 0.1, 0.2, 0.4)


def pause_before_retry(retries: int, deadline: float, since: float | None = None) -> None:
    """Wait before retry number ``retries + 1`` of an ``in_flight`` answer, never past
    ``deadline`` (``time.monotonic``), so the last retry is made at the bound itself.
    The pause runs from ``since``, when that answer came (now when not given): one read
    later than it came has already waited that long."""
    pause = IN_FLIGHT_RETRY_PAUSES_S[min(retries, len(IN_FLIGHT_RETRY_PAUSES_S) - 1)]
    now = time.monotonic()
    time.sleep(max(0.0, min((now if since is None else since) + pause, deadline) - now))


#: The kit's digest of each task it sent, kept by the task's ``repr``: a run sends the
#: same tasks again and again (retries, replays: 196 distinct tasks among the 1123
#: digests of the reference's run, seed 1), and a ``repr`` names its types (a tuple is no
#: list, 1 is no "1"), so two tasks with one ``repr`` are one task.
sent_digest = DigestMemo(repr)


Answer = TypeVar("Answer")


def settle_in_passes(
    answers: list[Answer], unsettled: Callable[[Answer], bool], retry: Callable[[int], Answer], deadline: float
) -> tuple[list[Answer], int]:
    """Retry each of a race's answers that is still ``unsettled`` (``in_flight``),
    ``retry(index)`` making the call at that index again, in passes with one pause
    before each, until none is or ``deadline`` passes: a service that never settles
    holds the race for one bound, not one per call. Returns the answers and how many
    retries were made."""
    answers, passes, retries = list(answers), 0, 0
    while any(unsettled(answer) for answer in answers) and time.monotonic() < deadline:
        pause_before_retry(passes, deadline)
        passes += 1
        for index, answer in enumerate(answers):
            if unsettled(answer):
                answers[index] = retry(index)
                retries += 1
    return answers, retries


CallKind = Literal["ok", "fail", "info"]
FailureMark = Literal["about", "before"]
#: What the kit did to a harness process: started one (a restart, or a start with
#: failpoints armed), SIGKILLed its group, or ended it with shutdown.
FaultKind = Literal["start", "kill", "shutdown"]


#: What a call's record (``Call.summary``) copies from its result as it is.
RESULT_FIELDS = ("disposition", "action_taken", "task_id", "idempotent", "deduplicated", "state")
#: Every field of a record that comes from an answer: an ``info`` call holding one was
#: answered, with a result that broke its schema (a garbled answer).
ANSWER_FIELDS = (*RESULT_FIELDS, "conflict_reason", "listed")


@dataclass(frozen=True)
class Call:
    """One request and what came of it, as evidence."""

    op: str
    args: Mapping[str, Any]
    kind: CallKind
    result: Mapping[str, Any] | None = None
    code: str | None = None  # the error code of a structured rejection
    message: str | None = None  # its message, or why the call is indeterminate
    duration_s: float = 0.0
    process: int = 0  # which start of the harness answered (1-based)
    #: When it was sent, in seconds from the scenario's start (monotonic); it ended
    #: ``duration_s`` later (answered, or given up on). None where nothing timed it.
    start_s: float | None = None
    #: The caller it ran on: 0 the scenario's own sequence of calls, n >= 1 the n-th of
    #: callers running at once (a pipelined batch's position, a parallel call's process).
    lane: int = 0
    connection: int = 1  # which of the scenario's harness connections (1: the first)
    #: Where the scenario's failure stands to this call: "about" it (a failed expectation
    #: on its answer), or "before": the failure named no call, and this was the last one.
    failure: FailureMark | None = None

    @property
    def answered(self) -> bool:
        """Whether the harness answered at all (success or structured error)."""
        return self.result is not None or self.code is not None

    @property
    def disposition(self) -> str | None:
        return self.result.get("disposition") if self.result else None

    @property
    def task_id(self) -> str | None:
        return self.result.get("task_id") if self.result else None

    def summary(self) -> dict[str, Any]:
        """A compact, JSON-ready record for reports."""
        record: dict[str, Any] = {
            "op": self.op,
            "kind": self.kind,
            "process": self.process,
            "ms": round(self.duration_s * 1000, 1),
        }
        if self.start_s is not None:
            record.update(_times(self.start_s, self.start_s + self.duration_s))
            record.update(lane=self.lane, connection=self.connection)
        if "client_submission_id" in self.args:
            record["client_submission_id"] = self.args["client_submission_id"]
        if self.op == "write_task":
            # The kit's own digest of what it sent, not the runtime's claim: calls
            # with other content show another digest even when the runtime lies.
            try:
                record["request_digest"] = sent_digest(self.args.get("task"))
            except ContractError:
                record["request_digest"] = "(invalid task)"
        if self.result is not None:
            for key in RESULT_FIELDS:
                if key in self.result:
                    record[key] = self.result[key]
            if isinstance(self.result.get("conflict"), Mapping):
                record["conflict_reason"] = self.result["conflict"].get("reason")
            if self.op == "list_tasks" and isinstance(self.result.get("tasks"), list):
                record["listed"] = len(self.result["tasks"])  # where an effect first shows
        if self.code is not None:
            record["error"] = self.code
        if self.message is not None:
            record["message"] = self.message[:300]
        if self.failure is not None:
            record["failure"] = self.failure
        return record


@dataclass(frozen=True)
class Fault:
    """A fault event of the history: the kit started, killed or stopped a process."""

    kind: FaultKind
    process: int  # the start it concerns (1-based): the new one for start, the ended one otherwise
    failpoints: Mapping[str, str] = field(default_factory=dict)
    #: When the kit began and finished doing it, in seconds from the scenario's start
    #: (a start lasts until the handshake is done); None where nothing timed it.
    start_s: float | None = None
    end_s: float | None = None
    connection: int = 1  # which of the scenario's harness connections it hit

    def summary(self) -> dict[str, Any]:
        """The same shape as a call's record, so a report lists both in one history."""
        record: dict[str, Any] = {"op": self.kind, "kind": "fault", "process": self.process}
        if self.start_s is not None and self.end_s is not None:
            record.update(_times(self.start_s, self.end_s), connection=self.connection)
        if self.failpoints:
            record["message"] = "armed " + ",".join(f"{name}={action}" for name, action in self.failpoints.items())
        return record


def _times(start_s: float, end_s: float) -> dict[str, float]:
    """Offsets from the scenario's start in milliseconds, to the microsecond."""
    return {"start_ms": round(start_s * 1000, 3), "end_ms": round(end_s * 1000, 3)}


#: One entry of a history, in the order it happened.
HistoryEvent = Call | Fault


def classify(op: str, args: Mapping[str, Any], reply: Reply, duration_s: float, process: int) -> Call:
    kind: CallKind
    if isinstance(reply, Lost):
        return Call(op, dict(args), "info", message=reply.reason, duration_s=duration_s, process=process)
    if isinstance(reply, Failure):
        kind = "fail" if reply.code in FAIL_CODES else "info"
        return Call(
            op, dict(args), kind, code=reply.code, message=reply.message, duration_s=duration_s, process=process
        )
    kind = "fail" if reply.result.get("disposition") == "conflict" else "ok"
    return Call(op, dict(args), kind, result=dict(reply.result), duration_s=duration_s, process=process)


def id_answer_problems(result: Mapping[str, Any], submission_id: str, digest: str) -> list[str]:
    """What is wrong with the fields an id-path answer (created or reused) owes about
    its own request, empty when nothing is: a reuse must not hand back another
    submission's result under the right task_id. Scenarios and FUZZ-MODEL share it."""
    problems = []
    if result.get("client_submission_id") != submission_id:
        problems.append(
            f"the result names client_submission_id {json.dumps(result.get('client_submission_id'))}, not {json.dumps(submission_id)}"
        )
    if result.get("idempotent") is not True:
        problems.append(f"the id path must say idempotent true, not {json.dumps(result.get('idempotent'))}")
    if result.get("request_digest") != digest:
        problems.append(f"request_digest {result.get('request_digest')} is not the write-task-v1 digest {digest}")
    if result.get("digest_schema_version") != DIGEST_SCHEMA_VERSION:
        problems.append(f"digest_schema_version is not {DIGEST_SCHEMA_VERSION}")
    return problems
