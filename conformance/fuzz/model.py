"""The FUZZ-MODEL step language, the model of what a conformant runtime may do, and
the driver that runs steps against any harness and checks the invariants after each.

Hypothesis (``retryproof.conformance.fuzz.machine``) only *chooses* steps; this module runs them.
A replay file is the list of steps of a shrunk failure, and ``retryproof replay``
feeds it to the same driver, so a replay means exactly what the fuzz run meant.

Invariants, checked on authoritative state (``list_tasks``) after every step:

* at most one task per submission id;
* every ``ok`` result of an id names the same task, and that task is listed under
  that id (else it is *lost*, or it belongs to another id);
* ``created`` is answered at most once per id;
* a conflict creates nothing, and a different request under a bound id is a conflict;
* a normalized-equal variant or another invocation is the same request, never a conflict;
* an indeterminate call (crash, SIGKILL) resolves, after restart and retry, to one task;
* no task appears that no call could have made (*unexpected*); legacy calls say
  ``idempotent: false`` and id calls ``idempotent: true``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Any

from retryproof.adapters.connection import Connection, HarnessStartError, Lost, Reply
from retryproof.conformance.options import CALL_TIMEOUT_S
from retryproof.conformance.outcome import (
    Call,
    Fault,
    FaultKind,
    HistoryEvent,
    classify,
    id_answer_problems,
    settle_in_passes,
)
from retryproof.conformance.set_check import check_sets
from retryproof.conformance.validation import result_problem
from retryproof.conformance.variants import VARIANT_KINDS, VariantKind, changed, variant
from retryproof.spec import load_spec
from retryproof.spec.digest import SCALAR_FIELDS, request_digest
from retryproof.spec.protocol import Failure, Hello, Success

SUBMISSION_IDS = ("fz-a", "fz-b", "fz-c", "fz-d")
# Two tasks share a subject and a body, so fuzzy matching on either merges two
# intents; every body holds a composed character and a line break, so the NFD and
# CRLF variants change bytes but not meaning.
TASKS = (
    {
        "sender": "PM",
        "recipient": "DEV",
        "subject": "Fix login",
        "body": "Café login fails\nafter retry",
        "references": ["R-1"],
    },
    {
        "sender": "PM",
        "recipient": "OPS",
        "subject": "Fix login",
        "body": "Café login fails\nafter retry",
        "priority": "high",
    },
    {
        "sender": "QA",
        "recipient": "DEV",
        "subject": "Résumé upload",
        "body": "Naïve check\non size",
        "depends_on": ["R-1", "R-2"],
    },
)
EQUAL_VARIANTS = VARIANT_KINDS
CRASH_FAILPOINT_PREFIX = "write_task."


#: FUZZ-MODEL's concurrency probe: every run, whatever its seed, first runs this many
#: ``race`` steps, each on ``PROBE_IDS`` fresh ids, as wide as the run's concurrency
#: setting: A4-CONCURRENT's races and rounds (``scenarios/retries.py`` says why several
#: ids race at once, and why three rounds). Exploration
#: alone checked races only when a seed's histories happened to burst on a fresh id and
#: that burst happened to interleave, so a lookup-then-SET library failed FUZZ-MODEL on
#: one seed and passed it on another.
PROBE_ROUNDS = 3  # A4_ROUNDS (tests/conformance/test_races.py holds them equal)
PROBE_IDS = 8

# Generous bounds for hand-edited replays; the explorer stays far inside them.
MAX_BURST = 64
MAX_RACE_IDS = 64
MAX_KILL_DELAY_MS = 10_000


class StepError(ValueError):
    """A step outside the step language, or one this harness cannot take: a replay
    file the user must fix, found before any step runs."""


@dataclass(frozen=True)
class StepField:
    """One field of a step: what it accepts, said in words for the error message."""

    accepts: Callable[[Any], bool]
    expected: str
    required: bool = True


def _choice(values: Sequence[Any], required: bool = True) -> StepField:
    return StepField(
        lambda value: isinstance(value, str) and value in values,
        "one of " + ", ".join(map(json.dumps, values)),
        required,
    )


def _integer(low: int, high: int, required: bool = True) -> StepField:
    accepts = lambda value: isinstance(value, int) and not isinstance(value, bool) and low <= value <= high  # noqa: E731
    return StepField(accepts, f"an integer from {low} to {high}", required)


def _crash_failpoints() -> list[str]:
    return [name for name in load_spec()["protocol_spec"]["failpoints"] if name.startswith(CRASH_FAILPOINT_PREFIX)]


def step_language() -> dict[str, dict[str, StepField]]:
    """Each step the driver runs (a ``_step_<kind>`` method) and its fields."""
    submission_id, task = _choice(SUBMISSION_IDS), _integer(0, len(TASKS) - 1)
    return {
        "submit": {
            "id": submission_id,
            "task": task,
            "variant_kind": _choice(EQUAL_VARIANTS, required=False),
            "burst": _integer(1, MAX_BURST, required=False),
        },
        "race": {"ids": _integer(1, MAX_RACE_IDS), "burst": _integer(1, MAX_BURST)},
        "conflict": {"id": submission_id},
        "legacy": {},
        "crash": {"failpoint": _choice(_crash_failpoints()), "id": submission_id, "task": task},
        "kill": {"id": submission_id, "task": task, "delay_ms": _integer(0, MAX_KILL_DELAY_MS)},
        "restart": {"graceful": StepField(lambda value: isinstance(value, bool), "true or false")},
    }


def validate_steps(steps: Sequence[Any], hello: Hello | None = None) -> None:
    """Raise ``StepError`` naming the first step (by index) and field that the step
    language does not allow; with ``hello``, also a step the harness cannot take (a
    legacy call without ``legacy``, a crash at a failpoint it does not declare)."""
    language = step_language()
    for index, step in enumerate(steps):
        if not isinstance(step, dict):
            raise StepError(f'step {index}: not an object; expected {{"step": ..., ...}}')
        kind = step.get("step")
        if kind not in language:
            raise StepError(
                f"step {index}: step: {json.dumps(kind)} is not a step; expected one of {', '.join(language)}"
            )
        fields = language[kind]
        where = f"step {index} ({kind})"
        for name, value in step.items():
            if name == "step":
                continue
            if name not in fields:
                raise StepError(
                    f"{where}: {name}: not a field of this step; its fields are {', '.join(fields) or 'none'}"
                )
            if not fields[name].accepts(value):
                raise StepError(f"{where}: {name}: {json.dumps(value)} is not {fields[name].expected}")
        for name, spec_field in fields.items():
            if spec_field.required and name not in step:
                raise StepError(f"{where}: {name}: missing; expected {spec_field.expected}")
        if hello is None:
            continue
        if kind == "legacy" and "legacy" not in hello.capabilities:
            raise StepError(f"{where}: a legacy call, but this harness does not declare the legacy capability")
        if kind == "crash" and step["failpoint"] not in hello.failpoints:
            raise StepError(f"{where}: failpoint: this harness does not declare {step['failpoint']}")


@dataclass
class _Sent:
    """A write_task on its way: what was sent, by which start of the harness, when,
    and when its answer arrived (filled by the future's callback)."""

    args: Mapping[str, Any]
    process: int
    at: float
    pending: Future
    answered: list[float] = field(default_factory=list)


class ModelViolation(AssertionError):
    """The runtime did something no conformant runtime may do. An AssertionError, so
    Hypothesis treats it as the failure to shrink. ``questions`` are the checklist
    questions the violation answers no (set where it is raised, or from the step
    that broke, by ``Driver.apply``)."""

    def __init__(self, message: str, questions: Sequence[str] = ()):
        super().__init__(message)
        self.questions = tuple(questions)
        #: The history that broke it, timed from ``began`` (``time.perf_counter``):
        #: set by ``run_steps`` for the minimal history's report.
        self.history: tuple[HistoryEvent, ...] = ()
        self.began = 0.0


def step_questions(step: Mapping[str, Any]) -> tuple[str, ...]:
    """The checklist questions a step exercises: a lone submission reuse (Q2), a burst
    of one id races (Q4), a conflicting request conflicts (Q3), a legacy call is Q6,
    a crash or SIGKILL inside a creation is recovery (Q1, Q5), a restart Q1."""
    kind = str(step.get("step"))
    if kind == "submit":
        return ("Q4",) if step.get("burst", 1) > 1 else ("Q2",)
    if kind == "race":
        return ("Q4",)
    return {"conflict": ("Q3",), "legacy": ("Q6",), "crash": ("Q1", "Q5"), "kill": ("Q1", "Q5")}.get(kind, ("Q1",))


class HarnessSilent(Exception):
    """A call the model cannot do without got no answer (or only an indeterminate
    error): nothing can be judged, so FUZZ-MODEL ends in error, never failed."""


@dataclass
class Model:
    """What the history alone does not say: which request each id stands for, and
    how often a runtime answered created. The set invariants are judged from the
    history itself (``check_sets``)."""

    intended: dict[str, int] = field(default_factory=dict)  # id -> task index, fixed at first use
    created: dict[str, int] = field(default_factory=dict)
    attempted: set[str] = field(default_factory=set)  # ids any call may have reached


@dataclass(frozen=True)
class _Garbled:
    """A success whose result violates its op's schema: a violation, and ``info`` in
    the history (the outcome model: a garbled answer vouches for nothing). Checked once,
    where the call is recorded; ``problem`` says what the schema refused."""

    reply: Success
    problem: str


#: What the driver heard: a reply, or a success it found garbled.
Heard = Reply | _Garbled


def _checked(op: str, reply: Reply) -> Heard:
    """``reply``, or ``_Garbled`` when it is a success that violates ``op``'s result schema."""
    if isinstance(reply, Success):
        problem = result_problem(op, reply.result)
        if problem:
            return _Garbled(reply, problem)
    return reply


def _describe(reply: Heard) -> str:
    if isinstance(reply, _Garbled):
        return f"{_describe(reply.reply)} (violates its schema)"
    if isinstance(reply, Success):
        result = reply.result
        return f"{result.get('disposition')} {result.get('task_id')}"
    if isinstance(reply, Failure):
        return f"error {reply.code}: {reply.message}"
    return f"lost ({reply.reason})"


def _conflict_hint(result: Mapping[str, Any], expected: str) -> str:
    """Why a conflict answered to the same request came about, as far as its two
    digests show; a normalization hint only where a digest differs from write-task-v1."""
    answered = result.get("request_digest")
    conflict = result.get("conflict")
    bound = conflict.get("receipt_request_digest") if isinstance(conflict, Mapping) else None
    if answered == bound:
        return (
            f"both digests are {answered}, so the conflict does not come from the request digest: "
            "the runtime compares something else (the raw request, a stale receipt)"
        )
    if answered != expected:
        return (
            f"the runtime digested this request as {answered}, write-task-v1 gives {expected}: key order, "
            "null versus absent, line endings, Unicode composition and invocation data must not change the digest"
        )
    return f"this request's digest is the write-task-v1 one, but the id is bound to {bound}: the first request was digested differently"


class Driver:
    """Runs steps on one harness, checking after each.

    Steps name submission ids and tasks logically (``fz-a``, task 0); the driver
    puts them in its ``namespace``, so many histories can share one harness and one
    state directory without seeing each other's tasks (a fresh process per history
    would cost a start each), while a replay on a fresh state directory means the
    same. Tasks that existed before the driver began are outside its model.
    Every step is logged (``log``) with what the runtime answered.
    """

    def __init__(
        self,
        connection: Connection,
        namespace: str,
        call_timeout: float = CALL_TIMEOUT_S,
        after: Driver | None = None,
    ):
        self.connection = connection
        self.namespace = namespace
        self.call_timeout = call_timeout
        if not connection.alive:
            _restart(connection)
        self.hello = Hello.read(connection.hello or {})
        self.model = Model()
        self._digests: dict[str, str] = {}
        self.log: list[str] = []
        #: The write_task calls and the faults of this history, in order (``check_sets`` reads
        #: it), timed from ``began`` as a scenario's are (a burst's calls on lanes 1..n).
        self.history: list[HistoryEvent] = []
        self.began = time.perf_counter()
        self._invocations = 0
        #: The last ``list_tasks`` answer, until a call or a start may have changed the
        #: state: a step's own reading (a conflict's before and after, a retry's task)
        #: is then the check's too, and the check's the next step's before.
        self._listing: list[dict[str, Any]] | None = None
        #: A call went unanswered since the last start: the runtime may still be making
        #: its effect (a lost answer over a binding), so no listing is reused until a
        #: restart has ended it.
        self._in_doubt = False
        #: A restart step ended the process; the next step (or ``finish``) starts it.
        self._start_owed = False
        #: The failpoints the current process was started with for the step being
        #: applied, when a restart's start was armed for it.
        self._armed_for: Mapping[str, str] | None = None
        #: The process (``_process``) that gave ``_listing``.
        self._listed_by = -1
        # A history run right after another on the same connection (``after``) starts
        # from the state that one last listed, when nothing can have changed it since:
        # one ``list_tasks`` less per history.
        carried = after.current_listing() if after is not None and after.connection is connection else None
        if carried is not None:
            self._listing, self._listed_by = carried, self._process()
        self.baseline = self._tasks()

    def current_listing(self) -> list[dict[str, Any]] | None:
        """The state as this history last listed it, if no call, start or exit can have
        changed it since; else None."""
        if self._listing is None or not self.connection.alive or self._listed_by != self._process():
            return None
        return self._listing

    # -- what the harness offers ---------------------------------------------------

    @property
    def equal_variants(self) -> tuple[VariantKind, ...]:
        """The variants the runtime must answer as the same request: all of them when
        it compares by the write-task-v1 digest; else the ones JSON itself makes equal."""
        return EQUAL_VARIANTS if self.connection.normalizes else ("same", "key_order")

    @property
    def crash_failpoints(self) -> list[str]:
        return sorted(name for name in self.hello.failpoints if name.startswith(CRASH_FAILPOINT_PREFIX))

    # -- steps ---------------------------------------------------------------------

    def apply(self, step: Mapping[str, Any]) -> None:
        """Run one step (a JSON object of the step language) and check every
        invariant afterwards (a restart's check comes with its start: ``_start_owed``)."""
        self._start_after_restart(step)
        try:
            getattr(self, f"_step_{step['step']}")(**{k: v for k, v in step.items() if k != "step"})
            if not self._start_owed:
                self.check()
        except ModelViolation as violation:
            if not violation.questions:
                violation.questions = step_questions(step)
            raise
        finally:
            self._armed_for = None

    def finish(self) -> None:
        """End the history: a restart that was its last step starts the runtime again
        and is checked now."""
        self._start_after_restart(None)

    def _start_after_restart(self, next_step: Mapping[str, Any] | None) -> None:
        """Start the process a restart step ended, and check the state it starts on.
        When the next step is a crash, this one start is armed for it: a clean start
        in between would only answer that check, which the armed process answers as
        well (``list_tasks`` passes no ``write_task`` failpoint). One start fewer per
        restart followed by a crash; the steps and every check are the same."""
        if not self._start_owed:
            return
        self._start_owed = False
        crash = next_step is not None and next_step.get("step") == "crash"
        failpoints = {next_step["failpoint"]: "crash"} if next_step is not None and crash else None
        began = time.perf_counter()
        _restart(self.connection, failpoints, ended=True)
        self._fault("start", failpoints, began)
        self._armed_for = failpoints
        try:
            self.check()
        except ModelViolation as violation:
            violation.questions = violation.questions or step_questions({"step": "restart"})
            if failpoints:
                self._restart()  # no history is ever left on an armed harness
            raise

    def _write_args(self, submission_id: str | None, task: Mapping[str, Any]) -> dict[str, Any]:
        # Every call carries new invocation data, which must never change the request.
        self._invocations += 1
        args: dict[str, Any] = {
            "task": dict(task),
            "invocation": {"trace_id": f"trace-{self._invocations}", "retry_count": self._invocations},
        }
        if submission_id is not None:
            args["client_submission_id"] = submission_id
        return args

    def _sid(self, logical_id: str) -> str:
        return f"{self.namespace}.{logical_id}"

    def _task_for(self, submission_id: str, task_index: int) -> dict[str, Any]:
        self.model.intended.setdefault(submission_id, task_index)
        return self._task(self.model.intended[submission_id])

    def _intended_digest(self, submission_id: str) -> str:
        """The digest of the task an id was first sent with: fixed for the driver's
        life, and needed for every reply and every listed task."""
        if submission_id not in self._digests:
            self._digests[submission_id] = request_digest(self._task(self.model.intended[submission_id]))
        return self._digests[submission_id]

    def _task(self, index: int) -> dict[str, Any]:
        # Only the runtime's fields (a bound tool's task model). The namespace in the
        # first text field (the subject, for a harness) keeps a fuzzy matcher from
        # reaching into another history; inside one history a shared value stays shared.
        model = self.connection.task_model
        task = {name: value for name, value in TASKS[index].items() if name in model}
        mark = next((name for name in ("subject", *SCALAR_FIELDS) if name in model), None)
        if mark is not None:
            task[mark] = f"{task.get(mark, f'task {index}')} [{self.namespace}]"
        return task

    def _send(self, args: Mapping[str, Any]) -> _Sent:
        """Send one write_task, for ``_record``."""
        process, at = self._process(), time.perf_counter()
        self._listing = None
        sent = _Sent(args, process, at, self.connection.submit("write_task", args))
        sent.pending.add_done_callback(lambda _: sent.answered.append(time.perf_counter()))
        return sent

    def _record(self, sent: _Sent, lane: int = 0) -> Heard:
        """Wait for a sent call and record it, timed from its send to its answer (or
        to the end of the wait); a garbled success is recorded as ``info``, with what
        its schema refused as its message, and judged a violation (``_valid``)."""
        reply = self.connection.wait(sent.pending, self.call_timeout)
        ended = sent.answered[0] if sent.answered else time.perf_counter()
        heard = _checked("write_task", reply)
        call = classify("write_task", sent.args, reply, ended - sent.at, sent.process)
        if isinstance(heard, _Garbled):
            call = replace(call, kind="info", message=heard.problem)
        self._in_doubt = self._in_doubt or call.kind == "info"
        self.history.append(replace(call, start_s=sent.at - self.began, lane=lane))
        return self._heard(heard)

    def _heard(self, reply: Heard) -> Heard:
        """``reply``, unless the harness has missed a deadline: then exploring on would
        only send calls that are never answered (or, now, never sent)."""
        if isinstance(reply, Lost) and self.connection.missed_deadline:
            raise HarnessSilent(f"the harness stopped answering ({self.connection.missed_deadline})")
        return reply

    def _write(self, args: Mapping[str, Any]) -> Heard:
        return self._record(self._send(args))

    def _process(self) -> int:
        return len(self.connection.exit_statuses())

    def _restart(self, failpoints: Mapping[str, str] | None = None, graceful: bool = False) -> None:
        """Restart the harness, with the end and the start recorded as faults."""
        self._fault("shutdown" if graceful else "kill")  # the old process, as the restart begins
        self._listing, self._in_doubt = None, False  # a start may recover what a crash left
        began = time.perf_counter()
        _restart(self.connection, failpoints, graceful)
        self._fault("start", failpoints, began)

    def _fault(self, kind: FaultKind, failpoints: Mapping[str, str] | None = None, began: float | None = None) -> None:
        """Record a fault, timed from ``began`` (default: now) to now."""
        ended = time.perf_counter()
        start = ended if began is None else began
        fault = Fault(kind, self._process(), dict(failpoints or {}), start - self.began, ended - self.began)
        self.history.append(fault)

    def _step_submit(self, id: str, task: int, variant_kind: VariantKind = "same", burst: int = 1) -> None:
        id = self._sid(id)
        request = variant(self._task_for(id, task), variant_kind, self.connection.task_model)
        what = f"submit {id} ({variant_kind})" + (f" x{burst}" if burst > 1 else "")
        self._burst([(id, request, what)], burst)

    def _step_race(self, ids: int, burst: int) -> None:
        """``burst`` calls on each of ``ids`` ids at once (``race-1``, ...), each id's
        first use with task 0, one id's calls back to back: the ids' races overlap, as
        A4's do, so each meets a runtime busy inside its window."""
        races = []
        for number in range(1, ids + 1):
            submission_id = self._sid(f"race-{number}")
            races.append((submission_id, self._task_for(submission_id, 0), f"race {submission_id} x{burst}"))
        self._burst(races, burst)

    def _burst(self, races: Sequence[tuple[str, Mapping[str, Any], str]], burst: int) -> None:
        """Send ``burst`` calls for each race (id, request, what), pipelined, one
        race's calls back to back, then judge each id's answers as answers to the same
        request."""
        for submission_id, _, _ in races:
            self.model.attempted.add(submission_id)
        sent = [
            (submission_id, what, self._send(self._write_args(submission_id, request)))
            for submission_id, request, what in races
            for _ in range(burst)
        ]
        lanes = len(sent) > 1
        replies = [self._record(call, lane if lanes else 0) for lane, (_, _, call) in enumerate(sent, 1)]
        replies = self._settled([call.args for _, _, call in sent], replies, time.monotonic() + self.call_timeout)
        for submission_id, _, what in races:
            mine = [reply for (sid, _, _), reply in zip(sent, replies, strict=True) if sid == submission_id]
            self.log.append(f"{what}: " + ", ".join(_describe(r) for r in mine))
        for (submission_id, what, _), reply in zip(sent, replies, strict=True):
            self._judge_same_request(submission_id, reply, what)

    def _settled(self, args: Sequence[Mapping[str, Any]], replies: list[Heard], deadline: float) -> list[Heard]:
        """Where the runtime may answer ``in_flight`` (the IETF draft's 409, over a
        binding), that answer wrote nothing: retry such calls, in passes as the A4
        scenarios do, until they answer otherwise or ``deadline`` (``time.monotonic``)
        passes; only an ``in_flight`` that never settles is judged (a rejection of the
        same request)."""
        if not self.connection.settles_in_flight:
            return replies
        return settle_in_passes(replies, _in_flight, lambda index: self._write(args[index]), deadline)[0]

    def _judge_same_request(self, submission_id: str, reply: Heard, what: str) -> None:
        call = classify("write_task", {}, self._valid(reply, what), 0.0, 0)
        if call.kind == "info":
            return  # indeterminate (no answer, io_error, in_progress, ...): the invariants on state still apply
        if not isinstance(reply, Success):  # info returned above, so a Failure here is a rejection
            raise ModelViolation(f"{what}: the same request was rejected: {_describe(reply)}")
        result = reply.result
        disposition = result.get("disposition")
        if disposition == "conflict":
            reason = (result.get("conflict") or {}).get("reason")
            raise ModelViolation(
                f"{what}: the same request answered conflict ({reason}); "
                + _conflict_hint(result, self._intended_digest(submission_id)),
                # a digest that tells one request from itself breaks reuse (Q2), whatever the step
                ("Q2",) if reason in ("digest_mismatch", "digest_schema_mismatch") else (),
            )
        if disposition not in ("created", "reused"):
            raise ModelViolation(f"{what}: unknown disposition {json.dumps(disposition)}")
        problems = id_answer_problems(result, submission_id, self._intended_digest(submission_id))
        if problems:
            raise ModelViolation(f"{what}: {'; '.join(problems)}")
        if result.get("action_taken") is not (disposition == "created"):
            raise ModelViolation(f"{what}: {disposition} with action_taken {json.dumps(result.get('action_taken'))}")
        if disposition == "created":
            self.model.created[submission_id] = self.model.created.get(submission_id, 0) + 1

    def _step_conflict(self, id: str) -> None:
        id = self._sid(id)
        if not self._bound(id):
            # No answer ever bound the id to its request, so "different" is undefined.
            self.log.append(f"conflicting request for {id}: not sent, no ok result bound the id yet")
            return
        before = self._tasks()
        reply = self._write(self._write_args(id, changed(self._task_for(id, 0))))
        self.log.append(f"conflicting request for {id}: {_describe(reply)}")
        reply = self._valid(reply, f"conflicting request for {id}")
        after = self._tasks()
        if len(after) != len(before):
            raise ModelViolation(
                f"a conflicting request for {id} changed the task count from {len(before)} to {len(after)}"
            )
        if after != before:
            raise ModelViolation(f"a conflicting request for {id} changed the stored tasks")
        if isinstance(reply, Success) and reply.result.get("disposition") != "conflict":
            raise ModelViolation(
                f"a different request under {id} answered {reply.result.get('disposition')} instead of conflict digest_mismatch"
            )

    def _bound(self, submission_id: str) -> bool:
        """Whether an ok result in the history bound the id to its request."""
        return any(
            isinstance(event, Call) and event.kind == "ok" and event.args.get("client_submission_id") == submission_id
            for event in self.history
        )

    def _step_legacy(self) -> None:
        reply = self._write(self._write_args(None, self._task(0)))
        self.log.append(f"legacy call: {_describe(reply)}")
        reply = self._valid(reply, "legacy call")
        if isinstance(reply, Success):
            result = reply.result
            if result.get("idempotent") is not False:
                raise ModelViolation(
                    f"the legacy path answered idempotent {json.dumps(result.get('idempotent'))}; it must say false"
                )
            if result.get("disposition") != "created":
                raise ModelViolation(
                    f"a legacy call answered {result.get('disposition')}; every legacy call creates a task"
                )

    def _step_crash(self, failpoint: str, id: str, task: int) -> None:
        """Start with ``failpoint=crash``, call, restart clean, retry the same call."""
        if self._armed_for != {failpoint: "crash"}:
            self._restart({failpoint: "crash"})
        self._interrupted(self._sid(id), task, f"crash at {failpoint}", delay_s=None)

    def _step_kill(self, id: str, task: int, delay_ms: int) -> None:
        """SIGKILL the harness ``delay_ms`` after sending a call, restart, retry."""
        self._interrupted(self._sid(id), task, f"SIGKILL {delay_ms} ms into a call", delay_s=delay_ms / 1000)

    def _interrupted(self, submission_id: str, task_index: int, what: str, delay_s: float | None) -> None:
        request = self._task_for(submission_id, task_index)
        self.model.attempted.add(submission_id)
        sent = self._send(self._write_args(submission_id, request))
        if delay_s is not None:
            time.sleep(delay_s)
            began = time.perf_counter()
            self.connection.kill()
            self._fault("kill", began=began)
        first = self._record(sent)
        # Restart before judging, so no history is ever left on an armed harness.
        self._restart()
        if not (self.connection.settles_in_flight and isinstance(first, Failure) and first.code == "in_flight"):
            self._judge_same_request(submission_id, first, what)  # an in_flight one is settled by the retry
        retry_args = self._write_args(submission_id, request)
        # A key interrupted by the kill may stay in flight for the runtime's recovery time.
        [retry] = self._settled(
            [retry_args], [self._write(retry_args)], time.monotonic() + self.connection.recovery_s + self.call_timeout
        )
        self.log.append(f"{what} for {submission_id}: {_describe(first)}; after restart, retry: {_describe(retry)}")
        if isinstance(retry, Lost):
            raise HarnessSilent(f"{what}: the retry after restart got no answer ({retry.reason})")
        self._judge_same_request(submission_id, retry, f"{what}, then retry")
        if isinstance(retry, Success) and not self._tasks_of(submission_id):
            raise ModelViolation(
                f"{what}: the retry answered {_describe(retry)} but no task of {submission_id} is listed"
            )

    def _step_restart(self, graceful: bool) -> None:
        """End the process (shutdown, or SIGKILL); it starts with the next step."""
        self._fault("shutdown" if graceful else "kill")
        self._listing, self._in_doubt = None, False
        self.connection.stop() if graceful else self.connection.kill()
        self._start_owed = True
        self.log.append(f"restart ({'graceful' if graceful else 'SIGKILL'})")

    def _valid(self, reply: Heard, what: str) -> Reply:
        """``reply``, unless it is a garbled success: that is a violation."""
        if isinstance(reply, _Garbled):
            raise ModelViolation(f"{what}: {reply.problem}")
        return reply

    # -- authoritative state -------------------------------------------------------

    def _tasks(self) -> list[dict[str, Any]]:
        if self._listing is not None:
            return self._listing
        reply = self._valid(
            self._heard(_checked("list_tasks", self.connection.call("list_tasks", {}, self.call_timeout))), "list_tasks"
        )
        if not isinstance(reply, Success):
            if classify("list_tasks", {}, reply, 0.0, 0).kind == "info":
                raise HarnessSilent(f"list_tasks, the authoritative state, gave no usable answer: {_describe(reply)}")
            raise ModelViolation(f"list_tasks was rejected: {_describe(reply)}")
        listing = sorted(reply.result["tasks"], key=lambda t: json.dumps(t, sort_keys=True))
        self._listing, self._listed_by = (None if self._in_doubt else listing), self._process()
        return listing

    def _tasks_of(self, submission_id: str) -> list[dict[str, Any]]:
        return [task for task in self._tasks() if task.get("client_submission_id") == submission_id]

    def check(self) -> None:
        """Every invariant on the state ``list_tasks`` reports right now: the set
        checker on this history (tasks listed before the driver began are outside
        it), then what only the model knows (each id's request, created at most once)."""
        tasks = self._tasks()
        problems = check_sets(self.history, self.baseline, tasks).problems()
        if problems:
            raise ModelViolation(problems[0])
        for task in tasks:
            submission_id = task.get("client_submission_id")
            if submission_id not in self.model.intended:
                continue
            expected_digest = self._intended_digest(submission_id)
            if task.get("request_digest") != expected_digest:
                raise ModelViolation(
                    f"the task of {submission_id} has request_digest {task.get('request_digest')}, not {expected_digest}"
                )
        for submission_id, count in self.model.created.items():
            if count > 1:
                raise ModelViolation(f"{submission_id} was answered created {count} times")


def _restart(
    connection: Connection, failpoints: Mapping[str, str] | None = None, graceful: bool = False, ended: bool = False
) -> None:
    """Restart the harness (only start it, when ``ended``); one that does not start
    again leaves nothing to explore."""
    try:
        connection.start(failpoints) if ended else connection.restart(failpoints, graceful=graceful)
    except HarnessStartError as exc:
        raise HarnessSilent(f"the harness did not start again: {exc.message}") from None


def run_steps(
    connection: Connection,
    steps: Sequence[Mapping[str, Any]],
    namespace: str = "replay",
    call_timeout: float = CALL_TIMEOUT_S,
) -> tuple[ModelViolation | None, list[str]]:
    """Run ``steps`` as one history: ``(violation or None, log)``. Steps this harness
    cannot take raise ``StepError`` before any runs."""
    driver = Driver(connection, namespace, call_timeout)
    validate_steps(steps, driver.hello)
    for index, step in enumerate(steps):
        if step["step"] == "submit" and step.get("variant_kind", "same") not in driver.equal_variants:
            raise StepError(
                f"step {index} (submit): variant_kind: {step['variant_kind']} is another request to this runtime, "
                "which does not compare by write-task-v1; expected one of " + ", ".join(driver.equal_variants)
            )
    try:
        for step in steps:
            driver.apply(step)
        driver.finish()
    except ModelViolation as exc:
        exc.history, exc.began = tuple(driver.history), driver.began
        return exc, driver.log
    return None, driver.log


def run_probe(
    connection: Connection, width: int, call_timeout: float = CALL_TIMEOUT_S
) -> tuple[int, list[dict[str, Any]], ModelViolation | None, list[str]]:
    """The concurrency probe: ``PROBE_ROUNDS`` one-step histories, each a ``race`` of
    ``width`` (at most ``MAX_BURST``) calls on each of ``PROBE_IDS`` ids at once, each history in its own
    namespace (fresh ids), until one breaks an invariant. Returns ``(rounds run, steps,
    violation or None, log)``: a violating round is its own minimal history, kept as
    observed (a race that struck once is evidence even when a replay misses it)."""
    steps: list[dict[str, Any]] = [{"step": "race", "ids": PROBE_IDS, "burst": min(width, MAX_BURST)}]
    log: list[str] = []
    for round_number in range(1, PROBE_ROUNDS + 1):
        violation, log = run_steps(connection, steps, namespace=f"probe{round_number}", call_timeout=call_timeout)
        if violation is not None:
            return round_number, steps, violation, log
    return PROBE_ROUNDS, steps, None, log


def _in_flight(reply: Heard) -> bool:
    return isinstance(reply, Failure) and reply.code == "in_flight"
