#!/usr/bin/env python3
"""A write_task runtime on SQLite, written by an outside vendor from the contract alone.

It speaks retryproof-harness/1 on stdin/stdout and uses only the Python standard
library; the write-task-v1 digest (validation, normalization, RFC 8785 form) is
implemented here from spec/retryproof.yaml, as a vendor would. State is one SQLite
database in RETRYPROOF_STATE_DIR, in WAL mode: a receipt and its task are written in
one transaction, so a receipt is committed exactly when its task exists.

``--synchronous full`` (the default) makes every commit durable before the answer
leaves: SQLite fsyncs the WAL, and the directory when it creates the WAL file; the
harness fsyncs the state directory itself after creating the database file.
``--synchronous off`` is the defect: SQLite never syncs, so a power cut can lose a
committed creation whose answer was already sent (DUR-1; only DURABILITY-TRACE sees it).
"""

import argparse
import hashlib
import json
import os
import re
import sqlite3
import sys
import unicodedata

PROTOCOL = "retryproof-harness/1"
DIGEST_SCHEMA = "write-task-v1"
SUBMISSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
SCALARS = ("sender", "recipient", "subject", "body", "priority", "thread_key", "parent", "risk_level")
ARRAYS = ("references", "depends_on")
# The tamper actions this runtime can perform, declared in hello: a task row can be
# deleted, but a receipt here has no digest-schema column to rewrite, and a task path is
# a row, so no foreign object can sit at it.
TAMPER_ACTIONS = ("remove_task",)


class OpError(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


# ---------------------------------------------------------------- write-task-v1 digest


class _Duplicated(dict):
    """An object whose JSON text named a key twice."""


def _pairs(pairs):
    keys = [key for key, _ in pairs]
    return (_Duplicated if len(keys) != len(set(keys)) else dict)(pairs)


def _has_duplicates(value):
    if isinstance(value, _Duplicated):
        return True
    if isinstance(value, dict):
        return any(_has_duplicates(item) for item in value.values())
    if isinstance(value, list):
        return any(_has_duplicates(item) for item in value)
    return False


def _normal(text, where):
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise OpError("invalid_request", f"{where}: a lone surrogate is not Unicode") from None
    return unicodedata.normalize("NFC", text.replace("\r\n", "\n").replace("\r", "\n"))


def canonical_task(task):
    if not isinstance(task, dict):
        raise OpError("invalid_request", "task: must be an object")
    if _has_duplicates(task):
        raise OpError("invalid_request", "task: a key is given twice")
    unknown = sorted(set(task) - set(SCALARS) - set(ARRAYS))
    if unknown:
        raise OpError("invalid_request", f"task.{unknown[0]}: not a task field")
    canonical = {}
    for name in SCALARS:
        value = task.get(name)
        if value is not None and not isinstance(value, str):
            raise OpError("invalid_request", f"task.{name}: must be a string or null")
        canonical[name] = None if value is None else _normal(value, f"task.{name}")
    for name in ARRAYS:
        value = task.get(name)
        if value is not None and not isinstance(value, list):
            raise OpError("invalid_request", f"task.{name}: must be an array of strings or null")
        items = []
        for index, item in enumerate(value or []):
            if not isinstance(item, str):
                raise OpError("invalid_request", f"task.{name}[{index}]: must be a string")
            items.append(_normal(item, f"task.{name}[{index}]"))
        canonical[name] = items
    return canonical


def digest(canonical):
    # Keys are ASCII field names and values strings or null, so sorted keys and
    # Python's minimal escapes are the RFC 8785 form.
    text = json.dumps(canonical, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


# ---------------------------------------------------------------- the runtime


class Runtime:
    def __init__(self, state_dir, synchronous):
        path = os.path.join(state_dir, "tasks.db")
        new = not os.path.exists(path)
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute(f"PRAGMA synchronous={synchronous}")
        self.db.executescript(
            """
            CREATE TABLE IF NOT EXISTS tasks (
                number INTEGER PRIMARY KEY AUTOINCREMENT,
                task_id TEXT UNIQUE NOT NULL, client_submission_id TEXT, request_digest TEXT NOT NULL,
                task TEXT NOT NULL);
            CREATE TABLE IF NOT EXISTS receipts (
                client_submission_id TEXT PRIMARY KEY, request_digest TEXT NOT NULL,
                task_id TEXT NOT NULL, task_path TEXT NOT NULL);
            """
        )
        if new and synchronous != "OFF":
            # SQLite never syncs the directory of the main database file it creates.
            descriptor = os.open(state_dir, os.O_RDONLY)
            try:
                os.fsync(descriptor)
            finally:
                os.close(descriptor)

    def write_task(self, args):
        allowed = {"task", "client_submission_id", "invocation"}
        if set(args) - allowed or "task" not in args:
            raise OpError("invalid_request", "args: write_task takes task, client_submission_id?, invocation?")
        if "invocation" in args and not isinstance(args["invocation"], dict):
            raise OpError("invalid_request", "invocation: must be an object")
        legacy = "client_submission_id" not in args
        submission_id = args.get("client_submission_id")
        if not legacy and not (isinstance(submission_id, str) and SUBMISSION_ID.fullmatch(submission_id)):
            raise OpError("invalid_submission_id", "client_submission_id does not match the pattern")
        canonical = canonical_task(args["task"])
        request_digest = digest(canonical)
        self.db.execute("BEGIN IMMEDIATE")
        try:
            result = self._write(submission_id, legacy, canonical, request_digest)
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        return result

    def _write(self, submission_id, legacy, canonical, request_digest):
        result = {
            "client_submission_id": submission_id,
            "request_digest": request_digest,
            "digest_schema_version": DIGEST_SCHEMA,
            "idempotent": not legacy,
        }
        if not legacy:
            receipt = self.db.execute(
                "SELECT request_digest, task_id, task_path FROM receipts WHERE client_submission_id = ?",
                (submission_id,),
            ).fetchone()
            if receipt is not None:
                bound_digest, task_id, task_path = receipt
                result.update(task_id=task_id, task_path=task_path, action_taken=False)
                reason = None
                if bound_digest != request_digest:
                    reason = "digest_mismatch"
                elif self.db.execute("SELECT 1 FROM tasks WHERE task_id = ?", (task_id,)).fetchone() is None:
                    reason = "task_missing"
                if reason is None:
                    return {**result, "disposition": "reused"}
                conflict = {
                    "reason": reason,
                    "receipt_request_digest": bound_digest,
                    "receipt_digest_schema_version": DIGEST_SCHEMA,
                }
                return {**result, "disposition": "conflict", "conflict": conflict}
        cursor = self.db.execute(
            "INSERT INTO tasks (task_id, client_submission_id, request_digest, task) VALUES ('', ?, ?, ?)",
            (submission_id, request_digest, json.dumps(canonical, ensure_ascii=False)),
        )
        task_id = f"SQ-{cursor.lastrowid:05d}"
        task_path = f"tasks.db/tasks/{task_id}"
        self.db.execute("UPDATE tasks SET task_id = ? WHERE number = ?", (task_id, cursor.lastrowid))
        if not legacy:
            self.db.execute(
                "INSERT INTO receipts VALUES (?, ?, ?, ?)", (submission_id, request_digest, task_id, task_path)
            )
        return {**result, "disposition": "created", "action_taken": True, "task_id": task_id, "task_path": task_path}

    def list_tasks(self, args):
        rows = self.db.execute("SELECT task_id, client_submission_id, request_digest FROM tasks ORDER BY number")
        return {
            "tasks": [
                {"task_id": t, "task_path": f"tasks.db/tasks/{t}", "client_submission_id": s, "request_digest": d}
                for t, s, d in rows
            ]
        }

    def read_task(self, args):
        row = self.db.execute(
            "SELECT task_id, client_submission_id, request_digest, task FROM tasks WHERE task_id = ?",
            (args.get("task_id"),),
        ).fetchone()
        if row is None:
            raise OpError("not_found", "no such task")
        return {"task_id": row[0], "client_submission_id": row[1], "request_digest": row[2], "task": json.loads(row[3])}

    def tamper(self, args):
        if args.get("action") not in TAMPER_ACTIONS or set(args) != {"action", "task_id"}:
            raise OpError("invalid_request", f"tamper performs only {', '.join(TAMPER_ACTIONS)}")
        if self.db.execute("DELETE FROM tasks WHERE task_id = ?", (args["task_id"],)).rowcount == 0:
            raise OpError("not_found", "no such task")
        return {}


# ---------------------------------------------------------------- the protocol


def hello(args):
    if args != {"protocol": PROTOCOL}:
        raise OpError("invalid_request", f"this harness speaks {PROTOCOL}")
    return {
        "protocol": PROTOCOL,
        "implementation": {"name": "sqlite-vendor", "version": "1.0", "language": "python"},
        "capabilities": ["write_task", "legacy", "tamper"],
        "tamper_actions": list(TAMPER_ACTIONS),
        "failpoints": [],
        "digest_schema_version": DIGEST_SCHEMA,
    }


def answer(request_id, ok, body):
    message = {"id": request_id, "ok": ok, ("result" if ok else "error"): body}
    sys.stdout.write(json.dumps(message, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--synchronous", choices=("full", "off"), default="full")
    options = parser.parse_args(argv)
    runtime = Runtime(os.environ["RETRYPROOF_STATE_DIR"], options.synchronous.upper())
    ops = {
        "hello": hello,
        "write_task": runtime.write_task,
        "list_tasks": runtime.list_tasks,
        "read_task": runtime.read_task,
        "tamper": runtime.tamper,
        "shutdown": lambda args: {},
    }
    for raw in sys.stdin.buffer:
        if not raw.strip(b" \t\r\n"):  # only JSON whitespace: ignored, never answered
            continue
        try:
            request = json.loads(raw.decode("utf-8", "surrogatepass"), object_pairs_hook=_pairs)
        except ValueError:
            request = None
        request_id = request.get("id") if isinstance(request, dict) else None
        if not isinstance(request_id, int) or isinstance(request_id, bool):
            request_id = None
        if (
            request_id is None
            or not isinstance(request.get("op"), str)
            or not isinstance(request.get("args"), dict)
            or set(request) != {"id", "op", "args"}
            or isinstance(request, _Duplicated)
        ):
            answer(request_id, False, {"code": "bad_message", "message": "not a request"})
            continue
        op, args = request["op"], request["args"]
        if op not in ops:
            answer(request_id, False, {"code": "unknown_op", "message": f"{op} is not served"})
            continue
        try:
            if _has_duplicates(args):
                raise OpError("invalid_request", "args: a key is given twice")
            answer(request_id, True, ops[op](args))
        except OpError as error:
            answer(request_id, False, {"code": error.code, "message": str(error)})
        if op == "shutdown":
            runtime.db.close()
            return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
