#!/usr/bin/env python3
"""An approval runtime written by an outside vendor from the published contract alone.

It speaks retryproof-harness/1 on stdin/stdout and uses nothing but the Python standard
library: the RFC 8785 canonical form, the write-task-v1 digest, the receipts and the
approval state machine are all implemented here, from the spec's prose and schemas.

Two behaviours, chosen with ``--mode``:

``correct``
    Recovery decides from evidence. The record keeps the state, the effect evidence
    (``dispatched`` before the executor is called, ``effect_id`` after it answered) and
    the audit events still owed apart, so a failed completion audit leaves
    "succeeded, audit pending", never a retry-eligible state.

``p3-defect``
    The defect of the field report (probe P3): one ``except`` wraps the executor and the
    completion audit and turns any error into ``failed``; recovery of a failed operation
    whose approval still stands calls the executor again.

Durable state lives under ``RETRYPROOF_STATE_DIR``; every file step is made durable the
POSIX way (exclusive create or temp + rename, fsync of the file and of its directory).
"""

import errno
import hashlib
import json
import math
import os
import re
import signal
import sys
import time
import unicodedata

PROTOCOL = "retryproof-harness/1"
DIGEST_SCHEMA = "write-task-v1"
SUBMISSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
OPERATION_ID = re.compile(r"^op-[0-9a-f]{32}$")
SCALAR_FIELDS = ("sender", "recipient", "subject", "body", "priority", "thread_key", "parent", "risk_level")
ARRAY_FIELDS = ("references", "depends_on")
EXECUTORS = ("plain", "dedupe", "opaque")
FAILPOINTS = ("approval.audit_approved", "approval.audit_started", "approval.audit_completed", "approval.after_effect")
# Which audit event each audit failpoint guards.
AUDIT_POINTS = {
    "approved": "approval.audit_approved",
    "execution_started": "approval.audit_started",
    "execution_completed": "approval.audit_completed",
}
# The state each audit event's step set; a repaired line carries it too.
STEP_STATES = {
    "approved": "approved",
    "execution_started": "executing",
    "execution_completed": "succeeded",
    "verification_required": "needs_verification",
    "marked_stale": "stale",
}
MAX_SAFE_INTEGER = 2**53 - 1


class OpError(Exception):
    """A typed protocol error: the response carries ``code`` and the message."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class AuditWriteFailed(Exception):
    """An audit append failed; the step it records may already have happened."""


# --------------------------------------------------------------------------- JSON in


class _DuplicateKeys(dict):
    """A parsed object whose JSON text named some key twice (the last value is kept)."""


def _pairs(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) == len(keys):
        return dict(pairs)
    marked = _DuplicateKeys(pairs)
    marked.repeated = next(k for i, k in enumerate(keys) if k in keys[:i])
    return marked


def _no_constant(name):
    raise ValueError(f"{name} is not JSON")


def parse_json(text):
    """Parse JSON text, refusing NaN/Infinity and marking objects with duplicate keys."""
    return json.loads(text, object_pairs_hook=_pairs, parse_constant=_no_constant)


def has_duplicates(value):
    if isinstance(value, _DuplicateKeys):
        return True
    if isinstance(value, dict):
        return any(has_duplicates(v) for v in value.values())
    if isinstance(value, list):
        return any(has_duplicates(v) for v in value)
    return False


# --------------------------------------------------------------------------- RFC 8785


# JSON.stringify's short escapes; other control characters become \u00xx, the rest is literal.
_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _jcs_string(s):
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("a string holds a lone surrogate") from None
    escaped = (_SHORT_ESCAPES.get(ch) or (f"\\u{ord(ch):04x}" if ord(ch) < 0x20 else ch) for ch in s)
    return '"' + "".join(escaped) + '"'


def _jcs_number(x):
    """ECMAScript Number::toString of a double (RFC 8785 section 3.2.2.3)."""
    if isinstance(x, int):
        if abs(x) > MAX_SAFE_INTEGER:
            raise ValueError(f"integer {x} is outside the I-JSON range")
        x = float(x)
    if math.isnan(x) or math.isinf(x):
        raise ValueError("NaN and Infinity have no JSON form")
    if x == 0:
        return "0"
    sign = "-" if x < 0 else ""
    # repr gives the shortest digits that round-trip; read them as 0.<digits> x 10**point.
    mantissa, _, exp = repr(abs(x)).partition("e")
    whole, _, frac = mantissa.partition(".")
    all_digits = whole + frac
    digits = all_digits.lstrip("0")
    point = len(whole) + int(exp or 0) - (len(all_digits) - len(digits))
    digits = digits.rstrip("0")
    k, n = len(digits), point
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        body = digits[0] + ("." + digits[1:] if k > 1 else "") + "e" + ("+" if e >= 0 else "-") + str(abs(e))
    return sign + body


def canonical(value):
    """The RFC 8785 text of a parsed JSON value (ValueError when it has none)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        return _jcs_number(value)
    if isinstance(value, str):
        return _jcs_string(value)
    if isinstance(value, list):
        return "[" + ",".join(canonical(v) for v in value) + "]"
    if isinstance(value, dict):
        for key in value:
            _jcs_string(key)  # refuses lone surrogates in keys
        keys = sorted(value, key=lambda k: k.encode("utf-16-be", "surrogatepass"))
        return "{" + ",".join(_jcs_string(k) + ":" + canonical(value[k]) for k in keys) + "}"
    raise ValueError(f"{type(value).__name__} is not a JSON value")


def sha256_digest(text):
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- write-task-v1


def _normal(s, field):
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        raise OpError("invalid_request", f"{field}: a lone surrogate is not Unicode") from None
    return unicodedata.normalize("NFC", s.replace("\r\n", "\n").replace("\r", "\n"))


def canonical_task(task):
    """Validate a task and return its canonical object (all ten keys)."""
    if isinstance(task, _DuplicateKeys):
        raise OpError("invalid_request", f"task.{task.repeated}: the key appears twice")
    if not isinstance(task, dict):
        raise OpError("invalid_request", "task: must be an object")
    for key in task:
        if key not in SCALAR_FIELDS and key not in ARRAY_FIELDS:
            raise OpError("invalid_request", f"task.{key}: not a task field")
    out = {}
    for key in SCALAR_FIELDS:
        value = task.get(key)
        if value is not None and not isinstance(value, str):
            raise OpError("invalid_request", f"task.{key}: must be a string or null")
        out[key] = None if value is None else _normal(value, f"task.{key}")
    for key in ARRAY_FIELDS:
        value = task.get(key)
        if value is None:
            out[key] = []
            continue
        if not isinstance(value, list):
            raise OpError("invalid_request", f"task.{key}: must be an array of strings or null")
        items = []
        for i, item in enumerate(value):
            if not isinstance(item, str):
                raise OpError("invalid_request", f"task.{key}[{i}]: must be a string")
            items.append(_normal(item, f"task.{key}[{i}]"))
        out[key] = items
    return out


def task_digest(task):
    return sha256_digest(canonical(canonical_task(task)))


# --------------------------------------------------------------------------- durable files


def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def ensure_dir(path):
    if not os.path.isdir(path):
        os.makedirs(path, exist_ok=True)
        fsync_dir(os.path.dirname(path))


def replace_json(path, value):
    """Replace a file atomically: temp, fsync, rename, fsync of the directory."""
    directory = os.path.dirname(path)
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, json.dumps(value, sort_keys=True).encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(directory)


def create_json(path, value):
    """Create a file exclusively and durably; FileExistsError if it exists."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        os.write(fd, json.dumps(value, sort_keys=True).encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(os.path.dirname(path))


def read_json(path):
    with open(path, "rb") as f:
        return json.loads(f.read().decode("utf-8"))


def create_numbered(directory, prefix, value_for):
    """Create the next free <prefix><n> exclusively; return its name."""
    n = len(os.listdir(directory)) + 1
    while True:
        name = f"{prefix}{n}"
        try:
            create_json(os.path.join(directory, name), value_for(name))
            return name
        except FileExistsError:
            n += 1


# --------------------------------------------------------------------------- the runtime


class Runtime:
    def __init__(self, state_dir, failpoints, mode):
        self.root = state_dir
        self.failpoints = failpoints
        self.mode = mode
        self.dirs = {
            name: os.path.join(state_dir, name) for name in ("receipts", "tasks", "ids", "operations", "effects")
        }
        for path in self.dirs.values():
            ensure_dir(path)
        self.audit_path = os.path.join(state_dir, "audit.jsonl")

    # ---- failpoints

    def reach(self, point):
        action = self.failpoints.get(point)
        if action == "crash":
            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        elif action == "fail":
            raise OSError(errno.EIO, f"failpoint {point}")

    # ---- handshake

    def op_hello(self, protocol):
        if protocol != PROTOCOL:
            raise OpError("invalid_request", f"protocol {protocol!r} is not {PROTOCOL}")
        return {
            "protocol": PROTOCOL,
            "implementation": {"name": f"independent-approval-{self.mode}", "version": "0.1.0", "language": "python"},
            "capabilities": ["write_task", "approval"],
            "failpoints": list(FAILPOINTS),
            "digest_schema_version": DIGEST_SCHEMA,
        }

    # ---- write_task

    def _allocate_task_id(self):
        return create_numbered(self.dirs["ids"], "TASK-", lambda name: {})

    def _task_file(self, task_path):
        return os.path.join(self.root, task_path)

    def _read_task_object(self, task_path):
        try:
            return read_json(self._task_file(task_path))
        except FileNotFoundError:
            return None

    def _result(self, disposition, receipt, digest, conflict=None):
        result = {
            "disposition": disposition,
            "action_taken": disposition == "created",
            "task_id": receipt["task_id"],
            "task_path": receipt["task_path"],
            "client_submission_id": receipt["client_submission_id"],
            "request_digest": digest,
            "digest_schema_version": DIGEST_SCHEMA,
            "idempotent": True,
        }
        if conflict:
            result["conflict"] = {
                "reason": conflict,
                "receipt_request_digest": receipt["request_digest"],
                "receipt_digest_schema_version": receipt["digest_schema_version"],
            }
        return result

    def _set_receipt(self, path, receipt, state, result=None):
        receipt = dict(receipt, state=state, updated_at=time.time())
        if result is not None:
            receipt["result"] = result
        replace_json(path, receipt)
        return receipt

    def op_write_task(self, task, client_submission_id=..., invocation=None):
        if client_submission_id is not ... and (
            not isinstance(client_submission_id, str) or not SUBMISSION_ID.match(client_submission_id)
        ):
            raise OpError("invalid_submission_id", "client_submission_id does not match the pattern")
        if invocation is not None and not isinstance(invocation, dict):
            raise OpError("invalid_request", "invocation: must be an object")
        digest = task_digest(task)
        if client_submission_id is ...:
            # The legacy capability is not declared: a call without an id is refused, writing nothing.
            raise OpError("invalid_request", "client_submission_id is required (this runtime has no legacy path)")
        receipt_path = os.path.join(self.dirs["receipts"], client_submission_id + ".json")
        try:
            receipt = read_json(receipt_path)
        except FileNotFoundError:
            task_id = self._allocate_task_id()
            receipt = {
                "client_submission_id": client_submission_id,
                "digest_schema_version": DIGEST_SCHEMA,
                "request_digest": digest,
                "task_id": task_id,
                "task_path": f"tasks/{task_id}.json",
                "reserved_at": time.time(),
            }
            receipt = self._set_receipt(receipt_path, receipt, "reserved")
        if receipt["digest_schema_version"] != DIGEST_SCHEMA:
            return self._result("conflict", receipt, digest, "digest_schema_mismatch")
        if receipt["request_digest"] != digest:
            return self._result("conflict", receipt, digest, "digest_mismatch")
        disposition = "reused"
        if receipt["state"] == "reserved":
            existing = self._read_task_object(receipt["task_path"])
            if existing is None:
                try:
                    create_json(
                        self._task_file(receipt["task_path"]),
                        {
                            "task_id": receipt["task_id"],
                            "task_path": receipt["task_path"],
                            "client_submission_id": client_submission_id,
                            "request_digest": digest,
                            "task": canonical_task(task),
                        },
                    )
                    disposition = "created"
                except FileExistsError:
                    existing = self._read_task_object(receipt["task_path"])
            if disposition != "created" and (
                not isinstance(existing, dict)
                or existing.get("request_digest") != digest
                or existing.get("client_submission_id") != client_submission_id
            ):
                return self._result("conflict", receipt, digest, "task_path_occupied")
            receipt = self._set_receipt(receipt_path, receipt, "task_created")
        if self._read_task_object(receipt["task_path"]) is None:
            return self._result("conflict", receipt, digest, "task_missing")
        if receipt["state"] == "task_created":
            result = self._result(disposition, receipt, digest)
            receipt = self._set_receipt(receipt_path, receipt, "committed", result)
            return result
        return self._result(disposition, receipt, digest)

    def op_list_tasks(self):
        tasks = []
        for name in sorted(os.listdir(self.dirs["tasks"])):
            if not name.endswith(".json"):
                continue
            obj = read_json(os.path.join(self.dirs["tasks"], name))
            tasks.append({k: obj[k] for k in ("task_id", "task_path", "client_submission_id", "request_digest")})
        return {"tasks": tasks}

    def op_read_task(self, task_id):
        if not isinstance(task_id, str) or not re.match(r"^TASK-[0-9]+$", task_id):
            raise OpError("not_found", f"no task {task_id!r}")
        obj = self._read_task_object(f"tasks/{task_id}.json")
        if obj is None:
            raise OpError("not_found", f"no task {task_id!r}")
        return {k: obj[k] for k in ("task_id", "task", "client_submission_id", "request_digest")}

    # ---- approval: records, audit, effects

    def _op_path(self, operation_id):
        if not isinstance(operation_id, str) or not OPERATION_ID.match(operation_id):
            raise OpError("not_found", f"no operation {operation_id!r}")
        return os.path.join(self.dirs["operations"], operation_id + ".json")

    def _load(self, operation_id):
        try:
            return read_json(self._op_path(operation_id))
        except FileNotFoundError:
            raise OpError("not_found", f"no operation {operation_id!r}") from None

    def _save(self, op, **changes):
        op.update(changes, updated_at=time.time())
        replace_json(self._op_path(op["operation_id"]), op)
        return op

    def _effects_dir(self, operation_key, kind):
        """markers/ holds one file per effect, calls/ one per executor call (a key is hashed: any string is allowed)."""
        return os.path.join(self.dirs["effects"], hashlib.sha256(operation_key.encode("utf-8")).hexdigest(), kind)

    def _listing(self, operation_key, kind):
        try:
            return sorted(os.listdir(self._effects_dir(operation_key, kind)), key=lambda name: int(name[1:]))
        except FileNotFoundError:
            return []

    def _markers(self, operation_key):
        return self._listing(operation_key, "markers")

    def _append_audit(self, op, event, repaired):
        """Append one audit line durably; AuditWriteFailed when the append fails."""
        line = (
            json.dumps(
                {
                    "event": event,
                    "operation_id": op["operation_id"],
                    "operation_key": op["operation_key"],
                    "request_digest": op["request_digest"],
                    "state": STEP_STATES[event],
                    "repaired": repaired,
                    "at": time.time(),
                },
                sort_keys=True,
            )
            + "\n"
        )
        try:
            if event in AUDIT_POINTS:
                self.reach(AUDIT_POINTS[event])
            new = not os.path.exists(self.audit_path)
            fd = os.open(self.audit_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line.encode("utf-8"))
                os.fsync(fd)
            finally:
                os.close(fd)
            if new:
                fsync_dir(self.root)
        except OSError as exc:
            raise AuditWriteFailed(f"audit append of {event} failed: {exc}") from exc

    def _audit(self, op, event):
        """Owe the event durably, append it, then drop it from the debt."""
        if event not in op["audit_pending"]:
            self._save(op, audit_pending=op["audit_pending"] + [event])
        self._append_audit(op, event, repaired=False)
        self._save(op, audit_pending=[e for e in op["audit_pending"] if e != event])

    def _repair_audits(self, op):
        """Append every audit event the record owes; True when any was owed."""
        owed = list(op["audit_pending"])
        for event in owed:
            self._append_audit(op, event, repaired=True)
            self._save(op, audit_pending=[e for e in op["audit_pending"] if e != event])
        return bool(owed)

    def _run_executor(self, op):
        """Call the executor once; return (effect_id, already_existed). Every call is logged first."""
        calls, markers = (self._effects_dir(op["operation_key"], kind) for kind in ("calls", "markers"))
        for path in (os.path.dirname(calls), calls, markers):
            ensure_dir(path)
        create_numbered(calls, "C", lambda name: {"operation_id": op["operation_id"], "at": time.time()})
        if op["executor"] == "dedupe":
            existing = self._markers(op["operation_key"])
            if existing:
                return existing[0], True
        effect_id = create_numbered(
            markers,
            "E",
            lambda name: {
                "effect_id": name,
                "operation_id": op["operation_id"],
                "operation_key": op["operation_key"],
                "at": time.time(),
            },
        )
        return effect_id, False

    def _effect_evidence(self, op):
        if op["effect_id"]:
            return "present"
        if not op["dispatched"]:
            return "absent"
        if op["executor"] == "plain":
            markers = self._markers(op["operation_key"])
            return "present" if markers else "absent"
        return "unknown"  # opaque cannot be observed; dedupe keeps its dedupe to itself

    def _dispatch(self, op):
        """From executing (start audited): mark dispatched, run the executor, complete."""
        self._save(op, dispatched=True)
        effect_id, already = self._run_executor(op)
        self.reach("approval.after_effect")
        self._save(
            op, state="succeeded", effect_id=effect_id, audit_pending=op["audit_pending"] + ["execution_completed"]
        )
        self._audit(op, "execution_completed")
        return already

    def _dispatch_defective(self, op):
        """P3: one catch around the executor and the completion audit turns any error into failed."""
        try:
            self._save(op, dispatched=True)
            effect_id, _ = self._run_executor(op)
            op["effect_id"] = effect_id
            self.reach("approval.after_effect")
            self._save(op, state="succeeded")
            self._append_audit(op, "execution_completed", repaired=False)
        except (OSError, AuditWriteFailed):
            self._save(op, state="failed")
            raise

    # ---- approval: ops

    def op_propose(self, operation_key, request, executor):
        if not isinstance(operation_key, str) or not operation_key:
            raise OpError("invalid_request", "operation_key: must be a non-empty string")
        if not isinstance(request, dict) or has_duplicates(request):
            raise OpError("invalid_request", "request: must be an object without duplicate keys")
        if executor not in EXECUTORS:
            raise OpError("invalid_request", f"executor: must be one of {', '.join(EXECUTORS)}")
        try:
            digest = sha256_digest(canonical(request))
        except ValueError as exc:
            raise OpError("invalid_request", f"request: {exc}") from None
        operation_id = "op-" + hashlib.sha256(operation_key.encode("utf-8")).hexdigest()[:32]
        path = self._op_path(operation_id)
        try:
            op = read_json(path)
        except FileNotFoundError:
            now = time.time()
            op = {
                "operation_id": operation_id,
                "operation_key": operation_key,
                "executor": executor,
                "request": request,
                "request_digest": digest,
                "state": "proposed",
                "dispatched": False,
                "effect_id": None,
                "audit_pending": [],
                "proposed_at": now,
                "updated_at": now,
            }
            try:
                create_json(path, op)
            except FileExistsError:
                op = read_json(path)
        if op["request_digest"] != digest or op["executor"] != executor:
            raise OpError("invalid_request", f"operation_key {operation_key!r} names another request or executor")
        return {"operation_id": operation_id, "state": op["state"], "request_digest": op["request_digest"]}

    def op_approve(self, operation_id):
        op = self._load(operation_id)
        if op["state"] == "proposed":
            self._save(op, state="approved", audit_pending=op["audit_pending"] + ["approved"])
            self._append_audit(op, "approved", repaired=False)
            self._save(op, audit_pending=[e for e in op["audit_pending"] if e != "approved"])
        elif op["state"] == "approved":
            self._repair_audits(op)
        return {"state": op["state"]}

    def op_execute(self, operation_id):
        op = self._load(operation_id)
        if op["state"] == "succeeded":
            raise OpError("APPROVAL_ALREADY_CONSUMED", f"{operation_id} already succeeded")
        if op["state"] != "approved":
            raise OpError("NOT_APPROVED", f"{operation_id} is {op['state']}, not approved")
        # Owed audit events (a failed approval audit) go first so the log keeps the order of steps.
        self._repair_audits(op)
        self._save(op, state="executing", audit_pending=["execution_started"])
        self._audit(op, "execution_started")
        if self.mode == "p3-defect":
            self._dispatch_defective(op)
        else:
            self._dispatch(op)
        return {"state": op["state"]}

    def op_recover(self, operation_id, request=...):
        op = self._load(operation_id)
        if request is not ...:
            if not isinstance(request, dict) or has_duplicates(request):
                raise OpError("invalid_request", "request: must be an object without duplicate keys")
            try:
                recalculated = sha256_digest(canonical(request))
            except ValueError as exc:
                raise OpError("invalid_request", f"request: {exc}") from None
        else:
            recalculated = op["request_digest"]
        repaired = self._repair_audits(op)
        state = op["state"]
        if state == "needs_verification":
            return {"outcome": "needs_verification", "state": state}
        if (
            state in ("executing", "failed")
            and self._effect_evidence(op) == "unknown"
            and recalculated != op["request_digest"]
        ):
            # needs_verification wins over stale while the effect is unknown.
            return self._verification_required(op)
        if state == "stale" or recalculated != op["request_digest"]:
            if state not in ("stale", "succeeded"):
                self._save(op, state="stale")
                self._audit(op, "marked_stale")
            return {"outcome": "stale", "state": op["state"]}
        if state in ("proposed", "approved"):
            return {"outcome": "nothing_to_do", "state": state}
        if state == "succeeded":
            return {"outcome": "reconciled" if repaired else "nothing_to_do", "state": state}
        if state == "failed" and self.mode == "p3-defect":
            # The defect: a failed operation whose approval still stands is run again.
            self._save(op, state="executing")
            self._dispatch_defective(op)
            return {"outcome": "re_executed", "state": op["state"]}
        # executing (or failed): decide from the effect evidence, never from the state.
        evidence = self._effect_evidence(op)
        if evidence == "absent":
            self._dispatch(op)
            return {"outcome": "re_executed", "state": op["state"]}
        if evidence == "present":
            effect_id = op["effect_id"] or self._markers(op["operation_key"])[0]
            self._save(op, state="succeeded", effect_id=effect_id)
            self._audit(op, "execution_completed")
            return {"outcome": "reconciled", "state": op["state"]}
        if op["executor"] == "dedupe":
            already = self._dispatch(op)
            return {"outcome": "reconciled" if already else "re_executed", "state": op["state"]}
        return self._verification_required(op)

    def _verification_required(self, op):
        self._save(op, state="needs_verification")
        self._audit(op, "verification_required")
        return {"outcome": "needs_verification", "state": op["state"]}

    def op_get_operation(self, operation_id):
        op = self._load(operation_id)
        return {
            "state": op["state"],
            "audit_pending": bool(op["audit_pending"]),
            "effect_evidence": self._effect_evidence(op),
            "request_digest": op["request_digest"],
        }

    def op_list_audit(self, operation_id):
        op = self._load(operation_id)
        try:
            with open(self.audit_path, "rb") as handle:
                lines = [json.loads(line) for line in handle.read().splitlines() if line.strip()]
        except FileNotFoundError:
            lines = []
        return {
            "events": [
                {"event": line["event"], "state": line["state"], "repaired": line["repaired"]}
                for line in lines
                if line["operation_id"] == op["operation_id"]
            ]
        }

    def op_list_effects(self, operation_key):
        if not isinstance(operation_key, str) or not operation_key:
            raise OpError("invalid_request", "operation_key: must be a non-empty string")
        return {
            "effects": [{"effect_id": name} for name in self._markers(operation_key)],
            "executor_calls": len(self._listing(operation_key, "calls")),
        }


# --------------------------------------------------------------------------- the protocol


# Each op's required and optional args; any other key is invalid_request.
OP_ARGS = {
    "hello": ({"protocol"}, set()),
    "write_task": ({"task"}, {"client_submission_id", "invocation"}),
    "list_tasks": (set(), set()),
    "read_task": ({"task_id"}, set()),
    "propose": ({"operation_key", "request", "executor"}, set()),
    "approve": ({"operation_id"}, set()),
    "execute": ({"operation_id"}, set()),
    "recover": ({"operation_id"}, {"request"}),
    "get_operation": ({"operation_id"}, set()),
    "list_effects": ({"operation_key"}, set()),
    "list_audit": ({"operation_id"}, set()),
    "shutdown": (set(), set()),
}


def parse_failpoints(text):
    """The armed failpoints; ValueError for an entry this runtime cannot honour (the
    spec: refuse to start rather than leave a window untested)."""
    armed = {}
    for item in filter(None, (text or "").split(",")):
        name, _, action = item.partition("=")
        if name not in FAILPOINTS or action not in ("crash", "fail"):
            raise ValueError(f"RETRYPROOF_FAILPOINTS entry {item!r}: not a failpoint and action this runtime declares")
        armed[name] = action
    return armed


def parse_request(line):
    """Return (id, op, args) or raise OpError with the id to answer under."""
    try:
        message = parse_json(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise OpError("bad_message", "not a JSON line") from None
    if (
        not isinstance(message, dict)
        or isinstance(message, _DuplicateKeys)
        or set(message) != {"id", "op", "args"}
        or type(message["id"]) is not int
        or not isinstance(message["op"], str)
        or not isinstance(message["args"], dict)
    ):
        raise OpError("bad_message", "not a request {id, op, args}")
    return message["id"], message["op"], message["args"]


def handle(runtime, op, args):
    if op not in OP_ARGS:
        raise OpError("unknown_op", f"{op!r} is not served by this harness")
    if has_duplicates(args):
        raise OpError("invalid_request", "args: a key appears twice")
    required, optional = OP_ARGS[op]
    missing = required - set(args)
    extra = set(args) - required - optional
    if missing or extra:
        raise OpError("invalid_request", f"args: missing {sorted(missing)}, unknown {sorted(extra)}")
    if op == "shutdown":
        return {}
    return getattr(runtime, "op_" + op)(**args)


def respond(message):
    sys.stdout.write(json.dumps(message, ensure_ascii=True) + "\n")
    sys.stdout.flush()


def main(argv):
    # Read by hand: importing argparse was a fifth of a start's CPU, and the kit starts
    # this runtime tens of times a run.
    if len(argv) != 2 or argv[0] != "--mode" or argv[1] not in ("correct", "p3-defect"):
        print("usage: harness.py --mode {correct,p3-defect}", file=sys.stderr)
        return 2
    state_dir = os.environ.get("RETRYPROOF_STATE_DIR")
    if not state_dir or not os.path.isdir(state_dir):
        print("RETRYPROOF_STATE_DIR must name an existing directory", file=sys.stderr)
        return 2
    try:
        failpoints = parse_failpoints(os.environ.get("RETRYPROOF_FAILPOINTS"))
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    runtime = Runtime(os.path.abspath(state_dir), failpoints, argv[1])
    for line in sys.stdin.buffer:
        if not line.strip(b" \t\r\n"):  # only JSON whitespace is ignored (PROTOCOL-R7)
            continue
        request_id = None
        try:
            request_id, op, args = parse_request(line)
            result = handle(runtime, op, args)
            respond({"id": request_id, "ok": True, "result": result})
            if op == "shutdown":
                return 0
        except OpError as exc:
            respond({"id": request_id, "ok": False, "error": {"code": exc.code, "message": str(exc)}})
        except AuditWriteFailed as exc:
            respond({"id": request_id, "ok": False, "error": {"code": "AUDIT_WRITE_FAILED", "message": str(exc)}})
        except OSError as exc:
            respond({"id": request_id, "ok": False, "error": {"code": "io_error", "message": str(exc)}})
        except Exception as exc:  # noqa: BLE001 - any other fault is indeterminate, and serving goes on
            print(f"internal error: {exc!r}", file=sys.stderr)
            respond({"id": request_id, "ok": False, "error": {"code": "internal_error", "message": repr(exc)}})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
