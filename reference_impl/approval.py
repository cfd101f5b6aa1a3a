"""The reference approval service: approved operations that execute once, and
recovery that decides from evidence.

``failed``, "the effect is absent" and "a retry is allowed" are three different
facts (the second field report). So the record never infers one from another:

- ``dispatched`` is written *before* the executor is called, so a record without it
  proves the effect absent;
- ``effect_id`` is written as soon as the executor answers, so an audit failure
  afterwards leaves a record that still says the effect happened;
- ``audit_pending`` lists audit events the record owes, which recovery appends. An
  event is owed in the same save that makes its step happen, and cleared only once
  appended (write-ahead): a crash in between repeats a line, never loses one.

Recovery then combines request identity, effect evidence and the executor's dedupe
capability (``spec/retryproof.yaml``, ``approval``).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import re
import time
from collections.abc import Iterator, Mapping

from retryproof.reference_impl import durable
from retryproof.reference_impl.approval_effects import EXECUTORS, EffectsDir, key_slug
from retryproof.reference_impl.approval_names import CAPABILITY, FAILPOINTS
from retryproof.reference_impl.approval_store import AuditLog, OperationStore
from retryproof.reference_impl.arguments import take
from retryproof.spec import schema
from retryproof.spec.digest import ContractError
from retryproof.spec.jcs import CanonicalizationError, canonical_bytes
from retryproof.spec.protocol import ProtocolError, crash_now

# Not typing's TYPE_CHECKING, and no pathlib in the approval modules: each import would
# be paid by every harness start that serves an approval op (some 15 a run).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from retryproof.spec.protocol import Handler

__all__ = ["CAPABILITY", "FAILPOINTS", "ApprovalService", "op_group", "request_digest"]

# Which failpoint governs each audit event's append (repairs included).
_AUDIT_FAILPOINT = {
    "approved": "approval.audit_approved",
    "execution_started": "approval.audit_started",
    "execution_completed": "approval.audit_completed",
}
# The state each audit event's step set: a repaired line says the same as the one that failed.
_STEP_STATE = {
    "approved": "approved",
    "execution_started": "executing",
    "execution_completed": "succeeded",
    "verification_required": "needs_verification",
    "marked_stale": "stale",
}
# States in which an execution was begun and did not finish: only these need evidence.
_INTERRUPTED = ("executing", "failed", "needs_verification")
_OPERATION_ID = re.compile(r"op-[0-9a-f]{32}")


def request_digest(request: Any) -> str:
    """``sha256:`` + hex SHA-256 of the request's RFC 8785 bytes."""
    if not isinstance(request, dict):
        raise ContractError("invalid_request", "request", "must be a JSON object")
    try:
        import hashlib  # on first use: see spec.digest.request_digest

        return "sha256:" + hashlib.sha256(canonical_bytes(request)).hexdigest()
    except CanonicalizationError as exc:
        raise ContractError("invalid_request", "request", str(exc)) from None


def _text(args: Mapping[str, Any], name: str) -> str:
    value = args.get(name)
    if not isinstance(value, str) or not value:
        raise ContractError("invalid_request", name, "must be a non-empty string")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ContractError("invalid_request", name, "is not valid Unicode (lone surrogate)") from None
    return value


@functools.cache
def _arg_names(op: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The required and the optional args of ``op``, as the shipped request schema
    names them (``$defs/<op>_args``). Only the names are read from it: each value is
    checked where the service uses it (``_text``, the executor, ``request_digest``),
    and a JSON Schema validator would cost every harness that serves an approval op
    more CPU at its first call (importing jsonschema) than its whole start."""
    definition = schema("harness-request")["$defs"][f"{op}_args"]
    required = tuple(definition.get("required", ()))
    return required, tuple(name for name in definition.get("properties", {}) if name not in required)


def _checked(op: str, method: Handler) -> Handler:
    def handler(args: Mapping[str, Any]) -> Mapping[str, Any]:
        return method(take(args, *_arg_names(op)))

    return handler


class ApprovalService:
    """Approved operations under ``<state_dir>/approval/``."""

    def __init__(self, state_dir: str | os.PathLike[str], failpoints: Mapping[str, str] | None = None):
        root = os.path.join(state_dir, "approval")
        durable.make_directory(root)
        self.store = OperationStore(root)
        self.audit = AuditLog(root)
        self.effects = EffectsDir(root)
        self.armed_failpoints = dict(failpoints or {})

    def handlers(self) -> dict[str, Handler]:
        """The protocol ops this service serves, for the harness's op table. Arg names
        are checked against the shipped request schema first: a misspelt or extra arg
        is invalid_request, never silently ignored."""
        ops = {
            "propose": self.propose,
            "approve": self.approve,
            "execute": self.execute,
            "recover": self.recover,
            "get_operation": self.get_operation,
            "list_effects": self.list_effects,
            "list_audit": self.list_audit,
        }
        return {op: _checked(op, method) for op, method in ops.items()}

    # -- ops ---------------------------------------------------------------------

    def propose(self, args: Mapping[str, Any]) -> dict[str, Any]:
        key = _text(args, "operation_key")
        executor = args.get("executor")
        if executor not in EXECUTORS:
            raise ContractError("invalid_request", "executor", f"must be one of {', '.join(EXECUTORS)}")
        digest = request_digest(args.get("request"))
        operation_id = "op-" + key_slug(key)
        with self.store.locked(operation_id):
            record = self.store.load(operation_id)
            if record is None:
                now = time.time()
                record = {
                    "operation_id": operation_id,
                    "operation_key": key,
                    "executor": executor,
                    "request": args["request"],
                    "request_digest": digest,
                    "state": "proposed",
                    "dispatched": False,
                    "effect_id": None,
                    "audit_pending": [],
                    "proposed_at": now,
                    "updated_at": now,
                }
                self.store.save(record)
        # Raised outside the lock: a frozen ContractError cannot pass through a
        # contextmanager, which sets __traceback__ on what it re-raises.
        if (record["request_digest"], record["executor"]) != (digest, executor):
            raise ContractError("invalid_request", "operation_key", "is bound to another request or executor")
        return {"operation_id": operation_id, "state": record["state"], "request_digest": digest}

    def approve(self, args: Mapping[str, Any]) -> dict[str, Any]:
        with self._locked_record(args) as record:
            if record["state"] == "proposed":
                self._step(record, "approved", state="approved")
            elif record["state"] == "approved":
                # A caller retrying after AUDIT_WRITE_FAILED: the approval stands; its audit
                # is appended now if it is still owed.
                self._repair_audit(record)
            return {"state": record["state"]}

    def execute(self, args: Mapping[str, Any]) -> dict[str, Any]:
        with self._locked_record(args) as record:
            if record["state"] == "succeeded":
                raise ProtocolError(
                    "APPROVAL_ALREADY_CONSUMED", f"operation {record['operation_id']} already succeeded"
                )
            if record["state"] != "approved":
                raise ProtocolError(
                    "NOT_APPROVED",
                    f"operation {record['operation_id']} is {record['state']}; only an approved operation executes"
                    + ("; an interrupted one is resumed by recover" if record["state"] in _INTERRUPTED else ""),
                )
            # An approval audit still owed goes first, so the log keeps the order of the steps.
            self._repair_audit(record)
            self._run(record)
            return {"state": record["state"]}

    def recover(self, args: Mapping[str, Any]) -> dict[str, Any]:
        recalculated = request_digest(args["request"]) if "request" in args else None
        with self._locked_record(args) as record:
            repaired = self._repair_audit(record)
            if record["state"] == "needs_verification":
                # Persists: no protocol op records a human's verification.
                outcome = "needs_verification"
            elif recalculated not in (None, record["request_digest"]) or record["state"] == "stale":
                # While the effect is unknown, stale would say nothing ran when something may have.
                unknown = record["state"] in _INTERRUPTED and self._evidence(record) == "unknown"
                outcome = self._require_verification(record) if unknown else self._mark_stale(record)
            elif record["state"] in _INTERRUPTED:
                outcome = self._resume(record)
            elif record["state"] == "succeeded" and repaired:
                outcome = "reconciled"
            else:
                # Not begun (proposed, approved) or finished consistently: executing an
                # approved operation stays the caller's decision, never recovery's.
                outcome = "nothing_to_do"
            return {"outcome": outcome, "state": record["state"]}

    def get_operation(self, args: Mapping[str, Any]) -> dict[str, Any]:
        with self._locked_record(args) as record:
            return {
                "operation_id": record["operation_id"],
                "state": record["state"],
                "audit_pending": bool(record["audit_pending"]),
                "effect_evidence": self._evidence(record),
                "request_digest": record["request_digest"],
            }

    def list_effects(self, args: Mapping[str, Any]) -> dict[str, Any]:
        key = _text(args, "operation_key")
        return {
            "effects": [{"effect_id": effect_id} for effect_id in self.effects.effects(key)],
            "executor_calls": self.effects.calls(key),
        }

    def list_audit(self, args: Mapping[str, Any]) -> dict[str, Any]:
        # Under the operation's lock, so no step of it is half-way between its save and its line.
        with self._locked_record(args) as record:
            return {
                "events": [
                    {"event": line["event"], "state": line["state"], "repaired": line["repaired"]}
                    for line in self.audit.events()
                    if line["operation_id"] == record["operation_id"]
                ]
            }

    # -- steps -------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked_record(self, args: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
        """Hold one operation for a whole step and yield its record."""
        operation_id = _text(args, "operation_id")
        # Checked before it names a lock file: an id of another shape cannot exist.
        if not _OPERATION_ID.fullmatch(operation_id):
            raise ProtocolError("not_found", f"no operation {operation_id!r}")
        with self.store.locked(operation_id):
            record = self.store.load(operation_id)
            if record is None:
                raise ProtocolError("not_found", f"no operation {operation_id!r}")
            yield record

    def _run(self, record: dict[str, Any]) -> bool:
        """One execution attempt; answers whether the executor deduplicated."""
        self._step(record, "execution_started", state="executing", dispatched=False)
        # Write-ahead: from here on the effect may exist, so "absent" needs evidence.
        record["dispatched"] = True
        self.store.save(record)
        effect_id, deduplicated = self.effects.run(
            EXECUTORS[record["executor"]], record["operation_key"], record["operation_id"]
        )
        if self._failpoint("approval.after_effect") == "fail":
            # The effect exists and nothing says so yet, exactly as after a crash.
            raise OSError(errno.EIO, "failpoint approval.after_effect")
        self._complete(record, effect_id)
        return deduplicated

    def _complete(self, record: dict[str, Any], effect_id: str, repaired: bool = False) -> None:
        # The effect is recorded before its audit: an audit failure from here on
        # leaves a record that says "succeeded, audit pending", never "failed".
        self._step(record, "execution_completed", repaired=repaired, state="succeeded", effect_id=effect_id)

    def _resume(self, record: dict[str, Any]) -> str:
        evidence = self._evidence(record)
        executor = EXECUTORS[record["executor"]]
        if evidence == "present":
            self._complete(
                record, record["effect_id"] or self.effects.effects(record["operation_key"])[0], repaired=True
            )
            return "reconciled"
        if evidence == "absent":
            self._run(record)
            return "re_executed"
        if executor.dedupes:
            # Unknown, but the stable operation key makes another call harmless: the
            # executor itself says whether the effect already existed.
            return "reconciled" if self._run(record) else "re_executed"
        return self._require_verification(record)

    def _require_verification(self, record: dict[str, Any]) -> str:
        self._step(record, "verification_required", state="needs_verification")
        return "needs_verification"

    def _mark_stale(self, record: dict[str, Any]) -> str:
        # A succeeded operation keeps its state: its effect is a fact, and a consumed
        # approval cannot run again anyway.
        if record["state"] not in ("stale", "succeeded"):
            self._step(record, "marked_stale", state="stale")
        return "stale"

    def _evidence(self, record: dict[str, Any]) -> str:
        if record["effect_id"] is not None:
            return "present"
        if not record["dispatched"]:
            return "absent"
        return self.effects.observe(EXECUTORS[record["executor"]], record["operation_key"])

    # -- audit -------------------------------------------------------------------

    def _step(self, record: dict[str, Any], event: str, repaired: bool = False, **changes: Any) -> None:
        """Make one step durable together with the audit event it owes, then append it.

        Write-ahead: the save that changes the state also lists ``event`` as owed, so
        a SIGKILL before the append leaves it pending for the next repair. On an append
        failure the record keeps owing it and the caller is told.
        """
        record.update(changes)
        if event not in record["audit_pending"]:
            record["audit_pending"].append(event)
        self.store.save(record)
        try:
            self._append(record, event, repaired)
        except OSError as exc:
            raise ProtocolError(
                "AUDIT_WRITE_FAILED",
                f"the {event} audit append failed ({type(exc).__name__}: {exc.strerror}); "
                f"operation {record['operation_id']} is {record['state']} and the event is pending",
            ) from None
        self._settle(record, event)

    def _settle(self, record: dict[str, Any], event: str) -> None:
        """The appended ``event`` is owed no more; a crash before this save repeats the line."""
        record["audit_pending"].remove(event)
        self.store.save(record)

    def _repair_audit(self, record: dict[str, Any]) -> bool:
        """Append the events the record owes; answers whether there were any."""
        owed = list(record["audit_pending"])
        for event in owed:
            try:
                self._append(record, event, repaired=True)
            except OSError as exc:
                raise ProtocolError(
                    "AUDIT_WRITE_FAILED",
                    f"repairing the {event} audit failed ({type(exc).__name__}: {exc.strerror}); still pending",
                ) from None
            self._settle(record, event)
        return bool(owed)

    def _failpoint(self, name: str) -> str | None:
        """Crash here if asked to; otherwise answer the action (``fail`` or None)."""
        action = self.armed_failpoints.get(name)
        if action == "crash":
            crash_now()
        return action

    def _append(self, record: dict[str, Any], event: str, repaired: bool) -> None:
        fail = event in _AUDIT_FAILPOINT and self._failpoint(_AUDIT_FAILPOINT[event]) == "fail"
        self.audit.append(
            {
                "event": event,
                "operation_id": record["operation_id"],
                "operation_key": record["operation_key"],
                "request_digest": record["request_digest"],
                "state": _STEP_STATE[event],
                "repaired": repaired,
                "at": time.time(),
            },
            fail=fail,
        )


def op_group(runtime: Any) -> dict[str, Any]:
    """The harness's approval op group for ``runtime`` (its state dir and armed failpoints).

    A runtime class may name another service class in ``approval_service``: that is
    how a bundled faulty variant swaps in its defect.
    """
    service = getattr(runtime, "approval_service", ApprovalService)(runtime.state_dir, runtime.armed_failpoints)
    return {"handlers": service.handlers(), "capabilities": (CAPABILITY,), "failpoints": FAILPOINTS}
