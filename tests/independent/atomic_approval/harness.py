#!/usr/bin/env python3
"""An approval-only runtime whose every step commits or rolls back with its audit row.

Written from the published contract alone, in the Python standard library, importing
nothing of the kit. It offers the ``approval`` capability and no ``write_task``: it has
no tasks to create. Each step (approve, start, completion, verification, stale) is one
SQLite transaction that sets the operation's state and inserts its audit row, so a
failed audit insert rolls the step back with it and the call answers
AUDIT_WRITE_FAILED: nothing is ever owed (``audit_pending`` is always false), and the
state shown is the state before the step (APPROVAL-R26). The executor's effect lives
outside the database (a marker file), so a completion that rolls back leaves its
effect made and unrecorded, and recovery decides from the effect evidence.

``--mode correct``
    Recovery treats an executing operation's effect as evidence says: a plain
    executor's marker is observed (reconciled, never re-run), a dedupe executor is
    called again under its key, an opaque one needs verification.

``--mode rerun-after-rollback``
    The field report's P3 chain, in a transactional store: when the completion rolls
    back, one shared ``except`` marks the operation ``failed`` in a transaction of its
    own, and recovery runs a failed operation again without consulting its effect.

``--mode rerun-interrupted``
    Recovery reads "executing" as "the execution did not happen": it calls every
    executor of an interrupted operation again and answers ``re_executed``.

``--mode audit-after-commit``
    The audit row gets a transaction of its own, after the step's commit: a failed
    insert is reported to the caller, but the step stands with no line and nothing
    owed, a step hidden from the audit.

A failpoint ``fail`` at an audit point is a real SQLite error: a TEMP trigger that
aborts the insert of that event's row, for the life of the process. ``crash`` SIGKILLs
the process at that point (before the step's commit, or right after the effect).
"""

import contextlib
import decimal
import hashlib
import json
import os
import signal
import sqlite3
import sys

PROTOCOL = "retryproof-harness/1"
EXECUTORS = ("plain", "dedupe", "opaque")
MODES = ("correct", "rerun-after-rollback", "rerun-interrupted", "audit-after-commit")
AUDIT_POINTS = {
    "approved": "approval.audit_approved",
    "execution_started": "approval.audit_started",
    "execution_completed": "approval.audit_completed",
}
FAILPOINTS = (*AUDIT_POINTS.values(), "approval.after_effect")
# The state each audit event's step sets (the audit row says it too).
STEP_STATES = {
    "approved": "approved",
    "execution_started": "executing",
    "execution_completed": "succeeded",
    "verification_required": "needs_verification",
    "marked_stale": "stale",
}
# op -> (required args, optional args)
ARGS = {
    "hello": ({"protocol"}, set()),
    "propose": ({"operation_key", "request", "executor"}, set()),
    "approve": ({"operation_id"}, set()),
    "execute": ({"operation_id"}, set()),
    "recover": ({"operation_id"}, {"request"}),
    "get_operation": ({"operation_id"}, set()),
    "list_effects": ({"operation_key"}, set()),
    "list_audit": ({"operation_id"}, set()),
    "shutdown": (set(), set()),
}
MAX_SAFE_INTEGER = 2**53 - 1
SHUTDOWN = {}  # shutdown's result, told apart by identity: the loop ends after answering it
SCHEMA = """
CREATE TABLE IF NOT EXISTS operations (
    operation_id TEXT PRIMARY KEY,
    operation_key TEXT NOT NULL UNIQUE,
    executor TEXT NOT NULL,
    request_digest TEXT NOT NULL,
    state TEXT NOT NULL,
    started INTEGER NOT NULL DEFAULT 0,
    effect_id TEXT
);
CREATE TABLE IF NOT EXISTS audit (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    operation_id TEXT NOT NULL,
    event TEXT NOT NULL,
    state TEXT NOT NULL,
    repaired INTEGER NOT NULL
);
"""


class OpError(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class AuditFailed(Exception):
    """The audit row's insert failed inside the step's transaction."""


# --------------------------------------------------------------------------- RFC 8785


def _number(value):
    """ECMAScript's Number.prototype.toString of a double, from its shortest digits."""
    if value != value or value in (float("inf"), float("-inf")):
        raise OpError("invalid_request", "request: NaN and Infinity are not JSON")
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    digits, exponent = decimal.Decimal(repr(abs(value))).normalize().as_tuple()[1:]
    text = "".join(map(str, digits))
    k, n = len(text), exponent + len(text)
    if k <= n <= 21:
        body = text + "0" * (n - k)
    elif 0 < n <= 21:
        body = text[:n] + "." + text[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * -n + text
    else:
        mantissa = text[0] + ("." + text[1:] if k > 1 else "")
        body = f"{mantissa}e{'+' if n - 1 >= 0 else '-'}{abs(n - 1)}"
    return sign + body


def canonical(value):
    """RFC 8785 text of a parsed JSON value."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, int):
        if abs(value) > MAX_SAFE_INTEGER:
            raise OpError("invalid_request", "request: an integer beyond 2**53 - 1 has no RFC 8785 form")
        return str(value)
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise OpError("invalid_request", "request: a string holds a lone surrogate") from None
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ",".join(canonical(item) for item in value) + "]"
    keys = sorted(value, key=lambda key: key.encode("utf-16-be"))  # UTF-16 code unit order
    return "{" + ",".join(f"{canonical(key)}:{canonical(value[key])}" for key in keys) + "}"


def request_digest(request):
    if not isinstance(request, dict):
        raise OpError("invalid_request", "request: must be a JSON object")
    return "sha256:" + hashlib.sha256(canonical(request).encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- files


def _fsync_dir(path):
    descriptor = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _exclusive(directory, prefix):
    """Create the next ``<prefix><n>`` file in ``directory`` exclusively, durably; its name."""
    os.makedirs(directory, exist_ok=True)
    number = len(os.listdir(directory)) + 1
    while True:
        name = f"{prefix}{number}"
        try:
            descriptor = os.open(os.path.join(directory, name), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            number += 1
            continue
        os.fsync(descriptor)
        os.close(descriptor)
        _fsync_dir(directory)
        return name


def _listed(directory):
    try:
        return sorted(os.listdir(directory), key=lambda name: int(name[1:]))
    except FileNotFoundError:
        return []


# --------------------------------------------------------------------------- runtime


class Runtime:
    def __init__(self, state_dir, failpoints, mode):
        self.state_dir = state_dir
        self.failpoints = failpoints
        self.mode = mode
        self.db = sqlite3.connect(os.path.join(state_dir, "approval.db"), isolation_level=None)
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.executescript(SCHEMA)
        for event, point in AUDIT_POINTS.items():
            if failpoints.get(point) == "fail":
                # The audit destination refuses this event's row, every time, in this process.
                self.db.execute(
                    f"CREATE TEMP TRIGGER fail_{event} BEFORE INSERT ON main.audit WHEN NEW.event = '{event}' "
                    f"BEGIN SELECT RAISE(ABORT, 'failpoint {point}'); END"
                )

    # -- store ------------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self):
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def load(self, args):
        operation_id = args["operation_id"]
        if not isinstance(operation_id, str):
            raise OpError("invalid_request", "operation_id: must be a string")
        row = self.db.execute("SELECT * FROM operations WHERE operation_id = ?", (operation_id,)).fetchone()
        if row is None:
            raise OpError("not_found", f"no operation {operation_id!r}")
        return dict(row)

    def step(self, operation, event, repaired=False, **columns):
        """Set the step's state (and ``columns``) and insert its audit row in one
        transaction: a failed insert rolls both back, and the caller is told."""
        point = AUDIT_POINTS.get(event)
        if point and self.failpoints.get(point) == "crash":
            crash()
        state = STEP_STATES[event]
        columns = {"state": state, **columns}
        try:
            with self.transaction():
                assignments = ", ".join(f"{name} = ?" for name in columns)
                self.db.execute(
                    f"UPDATE operations SET {assignments} WHERE operation_id = ?",
                    (*columns.values(), operation["operation_id"]),
                )
                if self.mode == "audit-after-commit":
                    operation.update(columns)
                    self.db.execute("COMMIT")
                    self.db.execute("BEGIN IMMEDIATE")
                try:
                    self.db.execute(
                        "INSERT INTO audit (operation_id, event, state, repaired) VALUES (?, ?, ?, ?)",
                        (operation["operation_id"], event, state, int(repaired)),
                    )
                except sqlite3.Error as exc:
                    raise AuditFailed(str(exc)) from None
        except AuditFailed as exc:
            raise OpError(
                "AUDIT_WRITE_FAILED",
                f"the {event} audit row failed ({exc}); the step rolled back with it, "
                f"operation {operation['operation_id']} is still {operation['state']}",
            ) from None
        operation.update(columns)

    # -- effects (outside the database: an effect does not roll back) ------------

    def _effects_dir(self, key, kind):
        return os.path.join(self.state_dir, kind, hashlib.sha256(key.encode("utf-8")).hexdigest())

    def markers(self, key):
        return _listed(self._effects_dir(key, "effects"))

    def run_executor(self, operation):
        """Call the executor once; ``(effect_id, deduplicated)``. The call is counted first."""
        key = operation["operation_key"]
        _exclusive(self._effects_dir(key, "calls"), "C")
        existing = self.markers(key)
        if operation["executor"] == "dedupe" and existing:
            return existing[0], True
        return _exclusive(self._effects_dir(key, "effects"), "E"), False

    def evidence(self, operation):
        if operation["effect_id"] is not None:
            return "present"
        if not operation["started"]:
            return "absent"
        if operation["executor"] == "plain":
            return "present" if self.markers(operation["operation_key"]) else "absent"
        return "unknown"  # dedupe keeps its deduplication to itself; opaque is not observable

    # -- ops --------------------------------------------------------------------

    def hello(self, args):
        if args["protocol"] != PROTOCOL:
            raise OpError("invalid_request", f"protocol: this harness speaks {PROTOCOL}")
        return {
            "protocol": PROTOCOL,
            "implementation": {"name": f"independent-atomic-{self.mode}", "version": "1.0.0", "language": "python"},
            "capabilities": ["approval"],
            "failpoints": list(FAILPOINTS),
            "digest_schema_version": "write-task-v1",
        }

    def propose(self, args):
        key, executor = args["operation_key"], args["executor"]
        if not isinstance(key, str) or not key:
            raise OpError("invalid_request", "operation_key: must be a non-empty string")
        if executor not in EXECUTORS:
            raise OpError("invalid_request", f"executor: must be one of {', '.join(EXECUTORS)}")
        canonical(key)  # a lone surrogate is invalid_request
        digest = request_digest(args["request"])
        operation_id = "op-" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]
        with self.transaction():
            self.db.execute(
                "INSERT OR IGNORE INTO operations (operation_id, operation_key, executor, request_digest, state) "
                "VALUES (?, ?, ?, ?, 'proposed')",
                (operation_id, key, executor, digest),
            )
            row = dict(self.db.execute("SELECT * FROM operations WHERE operation_id = ?", (operation_id,)).fetchone())
        if (row["request_digest"], row["executor"]) != (digest, executor):
            raise OpError("invalid_request", "operation_key: bound to another request or executor")
        return {"operation_id": operation_id, "state": row["state"], "request_digest": digest}

    def approve(self, args):
        operation = self.load(args)
        if operation["state"] == "proposed":
            self.step(operation, "approved")
        return {"state": operation["state"]}

    def execute(self, args):
        operation = self.load(args)
        if operation["state"] == "succeeded":
            raise OpError("APPROVAL_ALREADY_CONSUMED", f"operation {operation['operation_id']} already succeeded")
        if operation["state"] != "approved":
            raise OpError("NOT_APPROVED", f"operation {operation['operation_id']} is {operation['state']}")
        self.step(operation, "execution_started", started=1)
        effect_id, _ = self.run_executor(operation)
        if self.failpoints.get("approval.after_effect") == "crash":
            crash()
        if self.failpoints.get("approval.after_effect") == "fail":
            raise OpError("io_error", "failpoint approval.after_effect: the effect is made, nothing records it")
        self.complete(operation, effect_id)
        return {"state": operation["state"]}

    def complete(self, operation, effect_id, repaired=False):
        try:
            self.step(operation, "execution_completed", repaired=repaired, effect_id=effect_id)
        except OpError:
            if self.mode == "rerun-after-rollback":
                # The shared catch: the rolled-back completion reads as a failed execution.
                with self.transaction():
                    self.db.execute(
                        "UPDATE operations SET state = 'failed' WHERE operation_id = ?", (operation["operation_id"],)
                    )
            raise

    def recover(self, args):
        recalculated = request_digest(args["request"]) if "request" in args else None
        operation = self.load(args)
        state = operation["state"]
        interrupted = state in ("executing", "failed")
        if state == "needs_verification":
            outcome = "needs_verification"
        elif recalculated not in (None, operation["request_digest"]) or state == "stale":
            if interrupted and self.evidence(operation) == "unknown":
                # stale would say nothing ran while something may have
                self.step(operation, "verification_required")
                outcome = "needs_verification"
            else:
                if state not in ("stale", "succeeded"):
                    self.step(operation, "marked_stale")
                outcome = "stale"
        elif state == "failed" and self.mode == "rerun-after-rollback":
            self.complete(operation, self.run_executor(operation)[0])
            outcome = "re_executed"
        elif interrupted:
            outcome = self.resume(operation)
        else:
            outcome = "nothing_to_do"
        return {"outcome": outcome, "state": operation["state"]}

    def resume(self, operation):
        if self.mode == "rerun-interrupted":
            self.complete(operation, self.run_executor(operation)[0])
            return "re_executed"
        evidence = self.evidence(operation)
        if evidence == "present":
            # The earlier attempt's effect exists and its completion row is missing: repair it.
            self.complete(operation, self.markers(operation["operation_key"])[0], repaired=True)
            return "reconciled"
        if evidence == "absent":
            self.complete(operation, self.run_executor(operation)[0])
            return "re_executed"
        if operation["executor"] == "dedupe":
            effect_id, deduplicated = self.run_executor(operation)
            self.complete(operation, effect_id)
            return "reconciled" if deduplicated else "re_executed"
        self.step(operation, "verification_required")
        return "needs_verification"

    def get_operation(self, args):
        operation = self.load(args)
        return {
            "operation_id": operation["operation_id"],
            "state": operation["state"],
            "audit_pending": False,  # a step and its row commit together: nothing is ever owed
            "effect_evidence": self.evidence(operation),
            "request_digest": operation["request_digest"],
        }

    def list_effects(self, args):
        key = args["operation_key"]
        if not isinstance(key, str):
            raise OpError("invalid_request", "operation_key: must be a string")
        return {
            "effects": [{"effect_id": marker} for marker in self.markers(key)],
            "executor_calls": len(_listed(self._effects_dir(key, "calls"))),
        }

    def list_audit(self, args):
        operation = self.load(args)
        rows = self.db.execute(
            "SELECT event, state, repaired FROM audit WHERE operation_id = ? ORDER BY seq",
            (operation["operation_id"],),
        )
        return {"events": [{"event": e, "state": s, "repaired": bool(r)} for e, s, r in rows]}


def crash():
    os.kill(os.getpid(), signal.SIGKILL)


# --------------------------------------------------------------------------- protocol


class _Duplicate(dict):
    pass


def _pairs(pairs):
    keys = [key for key, _ in pairs]
    return (_Duplicate if len(set(keys)) != len(keys) else dict)(pairs)


def _has_duplicate(value):
    if isinstance(value, _Duplicate):
        return True
    if isinstance(value, dict):
        return any(_has_duplicate(item) for item in value.values())
    if isinstance(value, list):
        return any(_has_duplicate(item) for item in value)
    return False


def _no_constant(name):
    raise ValueError(f"{name} is not JSON")


def answer(runtime, line):
    """The response to one request line, or None when the line asks for none."""
    try:
        message = json.loads(line, object_pairs_hook=_pairs, parse_constant=_no_constant)
    except ValueError as exc:
        return {"id": None, "ok": False, "error": {"code": "bad_message", "message": f"not a JSON line: {exc}"}}
    request_id = message.get("id") if isinstance(message, dict) else None
    if not isinstance(request_id, int) or isinstance(request_id, bool):
        request_id = None
    try:
        if (
            request_id is None
            or isinstance(message, _Duplicate)
            or set(message) != {"id", "op", "args"}
            or not isinstance(message["op"], str)
            or not isinstance(message["args"], dict)
        ):
            raise OpError("bad_message", "a request is exactly {id: int, op: str, args: {...}}")
        op, args = message["op"], message["args"]
        if op not in ARGS:
            raise OpError("unknown_op", f"unknown op {op!r}")
        if _has_duplicate(args):
            raise OpError("invalid_request", "args: a key is named twice")
        required, optional = ARGS[op]
        if not required <= set(args) <= required | optional:
            raise OpError("invalid_request", f"args: {op} takes {sorted(required)} and optionally {sorted(optional)}")
        if op == "shutdown":
            return {"id": request_id, "ok": True, "result": SHUTDOWN}
        return {"id": request_id, "ok": True, "result": getattr(runtime, op)(args)}
    except OpError as exc:
        return {"id": request_id, "ok": False, "error": {"code": exc.code, "message": str(exc)}}
    except (OSError, sqlite3.Error) as exc:
        return {"id": request_id, "ok": False, "error": {"code": "io_error", "message": f"{type(exc).__name__}: {exc}"}}
    except Exception as exc:  # answer every request, even on this runtime's own bug
        error = {"code": "internal_error", "message": f"{type(exc).__name__}: {exc}"}
        return {"id": request_id, "ok": False, "error": error}


def armed_failpoints(text):
    """Parse RETRYPROOF_FAILPOINTS; exit 2 on an entry this runtime cannot honour (PROTOCOL-R18)."""
    armed = {}
    for item in filter(None, (part.strip() for part in (text or "").split(","))):
        name, _, action = item.partition("=")
        if name not in FAILPOINTS or action not in ("crash", "fail"):
            print(f"cannot honour failpoint {item}", file=sys.stderr)
            sys.exit(2)
        armed[name] = action
    return armed


def main(argv):
    # Read by hand: importing argparse was a fifth of a start's CPU, and the kit starts
    # this runtime tens of times a run.
    if argv not in ([], *(["--mode", mode] for mode in MODES)):
        print(f"usage: harness.py [--mode {{{','.join(MODES)}}}]", file=sys.stderr)
        return 2
    mode = argv[1] if argv else "correct"
    failpoints = armed_failpoints(os.environ.get("RETRYPROOF_FAILPOINTS"))
    runtime = Runtime(os.environ["RETRYPROOF_STATE_DIR"], failpoints, mode)
    for line in sys.stdin.buffer:
        if not line.strip(b" \t\r\n"):
            continue
        response = answer(runtime, line)
        sys.stdout.write(json.dumps(response, ensure_ascii=False) + "\n")
        sys.stdout.flush()
        if response.get("result") is SHUTDOWN:
            return


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
