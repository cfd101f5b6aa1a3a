"""The reference runtime through the harness protocol, next to an SQLite baseline
measured in the same run: create, reuse as receipts pile up, and a same-id burst.

    python benchmarks/bench_protocol.py [--rounds N] [--receipts 1000,100000] [--dir DIR]

The baseline is written here: a runtime that keeps receipts and tasks in SQLite (WAL,
``synchronous=FULL``, one transaction per creation, so every acknowledged creation is
durable, as the contract asks), served by the same ``retryproof.spec.protocol.serve`` as
the reference, started by the same process adapter. Both answer the same calls on the
same machine, alternately, so a machine shared with other work slows both alike: read
the ratios, not the milliseconds.

One transaction per creation is less than DUR-1 asks of the reference: each receipt state
(reserved, then the task written, task_created, committed) durable before the next step.
So the create row also has a *staged* SQLite runtime that commits those four steps as four
transactions (RECEIPT-R8's reading of DUR-1 for a database), and, where ``strace`` is
installed, the run counts the fsync and fdatasync calls of one creation of each runtime:
what a creation costs is mostly how many times it waits for the disk. A last line puts
each create beside one journal commit (a new file fsynced by this process) measured in
the same rounds, and takes off each create a no-op round trip (``hello``) of the same
rounds: what is left is the runtime's own part, since the kit's call, the pipes and the
harness's reading and answering cost every runtime alike.

Stored receipts are made before the measured harness starts (the reference's through
its own code with fsync switched off, SQLite's in one bulk transaction); the measured
calls then reuse ids chosen at random among them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from tabulate import tabulate

from retryproof.adapters.process import ProcessConnection
from retryproof.spec.digest import DIGEST_SCHEMA_VERSION, check_submission_id, request_digest
from retryproof.spec.protocol import PROTOCOL, Failure, hello_handler, serve

TASK = {"sender": "PM", "recipient": "DEV", "subject": "Fix login", "references": ["INC-17"]}
REFERENCE = (sys.executable, "-m", "retryproof.reference_impl")
BASELINE = (sys.executable, os.path.abspath(__file__), "--serve-sqlite")
STAGED = (*BASELINE, "--staged")
BURST = 64
#: Creations traced to count the syncs of one (the first, which opens files, is left out).
TRACED_CREATIONS = 6


# -- the baseline runtime ------------------------------------------------------------


class SqliteRuntime:
    """Receipts and tasks in one SQLite database: a creation is one transaction (the
    receipt, committed, and the task row), a reuse one indexed read."""

    SCHEMA = (
        "CREATE TABLE IF NOT EXISTS receipts (id TEXT PRIMARY KEY, digest TEXT NOT NULL, result TEXT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS tasks (task_id INTEGER PRIMARY KEY AUTOINCREMENT, submission_id TEXT, record TEXT)",
    )

    def __init__(self, path: str, synchronous: str = "FULL"):
        self.path = path
        self.synchronous = synchronous
        self._local = threading.local()
        with self.connection() as db:
            for statement in self.SCHEMA:
                db.execute(statement)

    def connection(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=10, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(f"PRAGMA synchronous={self.synchronous}")
            self._local.db = db
        return db

    def write_task(self, args: Mapping[str, Any]) -> Mapping[str, Any]:
        """A creation in one transaction: the receipt, committed, and the task row."""
        submission_id = check_submission_id(args["client_submission_id"])
        digest = request_digest(args["task"])
        db = self.connection()
        found = db.execute("SELECT digest, result FROM receipts WHERE id = ?", (submission_id,)).fetchone()
        if found is None:
            with transaction(db):  # one writer at a time: the same-id burst waits here
                found = db.execute("SELECT digest, result FROM receipts WHERE id = ?", (submission_id,)).fetchone()
                if found is None:
                    cursor = db.execute(
                        "INSERT INTO tasks (submission_id, record) VALUES (?, ?)",
                        (submission_id, json.dumps(args["task"])),
                    )
                    result = creation_result(submission_id, digest, cursor.lastrowid)
                    db.execute("INSERT INTO receipts VALUES (?, ?, ?)", (submission_id, digest, json.dumps(result)))
            if found is None:
                return result
        stored = json.loads(found[1])
        if found[0] != digest:
            return {**stored, "disposition": "conflict", "action_taken": False, "request_digest": digest}
        return {**stored, "disposition": "reused", "action_taken": False}

    def store(self, count: int) -> None:
        """``count`` committed receipts in one bulk transaction (setup, not measured)."""
        db = self.connection()
        db.execute("BEGIN")
        for index in range(count):
            task = {**TASK, "body": str(index)}
            cursor = db.execute("INSERT INTO tasks (submission_id, record) VALUES (?, ?)", (f"stored-{index}", "{}"))
            result = {"disposition": "created", "task_id": f"TASK-{cursor.lastrowid:06d}", "idempotent": True}
            db.execute(
                "INSERT INTO receipts VALUES (?, ?, ?)", (f"stored-{index}", request_digest(task), json.dumps(result))
            )
        db.execute("COMMIT")


def creation_result(submission_id: str, digest: str, number: int) -> dict[str, Any]:
    task_id = f"TASK-{number:06d}"
    return {
        "disposition": "created",
        "action_taken": True,
        "task_id": task_id,
        "task_path": f"tasks/{task_id}",
        "client_submission_id": submission_id,
        "request_digest": digest,
        "digest_schema_version": DIGEST_SCHEMA_VERSION,
        "idempotent": True,
    }


@contextlib.contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[None]:
    """One write transaction (the connection is in autocommit mode)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


class StagedSqliteRuntime(SqliteRuntime):
    """The same database, a creation in the reference's four durable steps, one
    transaction each: reserve (the receipt, reserved, and the task number), write the
    task row, mark task_created, commit the result. Only the create row measures it; one
    creation runs at a time (a process-wide lock), which is all that row needs."""

    SCHEMA = (
        "CREATE TABLE IF NOT EXISTS receipts (id TEXT PRIMARY KEY, digest TEXT NOT NULL, "
        "task_number INTEGER NOT NULL, state TEXT NOT NULL, result TEXT)",
        "CREATE TABLE IF NOT EXISTS numbers (number INTEGER PRIMARY KEY AUTOINCREMENT)",
        "CREATE TABLE IF NOT EXISTS tasks (task_id INTEGER PRIMARY KEY, submission_id TEXT, record TEXT)",
    )

    def __init__(self, path: str):
        super().__init__(path)
        self._creating = threading.Lock()

    def write_task(self, args: Mapping[str, Any]) -> Mapping[str, Any]:
        """A creation in four transactions (a reuse of a committed receipt reads one row)."""
        submission_id = check_submission_id(args["client_submission_id"])
        digest = request_digest(args["task"])
        db = self.connection()
        with self._creating:
            found = db.execute("SELECT digest, result FROM receipts WHERE id = ?", (submission_id,)).fetchone()
            if found is None:
                with transaction(db):  # reserved, with its task number
                    number = db.execute("INSERT INTO numbers DEFAULT VALUES").lastrowid
                    db.execute(
                        "INSERT INTO receipts VALUES (?, ?, ?, 'reserved', NULL)", (submission_id, digest, number)
                    )
                with transaction(db):  # the task written
                    db.execute("INSERT INTO tasks VALUES (?, ?, ?)", (number, submission_id, json.dumps(args["task"])))
                with transaction(db):
                    db.execute("UPDATE receipts SET state = 'task_created' WHERE id = ?", (submission_id,))
                result = creation_result(submission_id, digest, number)
                with transaction(db):
                    db.execute(
                        "UPDATE receipts SET state = 'committed', result = ? WHERE id = ?",
                        (json.dumps(result), submission_id),
                    )
                return result
        if found[0] != digest:
            return {**json.loads(found[1]), "disposition": "conflict", "action_taken": False, "request_digest": digest}
        return {**json.loads(found[1]), "disposition": "reused", "action_taken": False}


def serve_sqlite(staged: bool) -> None:
    path = os.path.join(os.environ["RETRYPROOF_STATE_DIR"], "runtime.sqlite3")
    runtime = StagedSqliteRuntime(path) if staged else SqliteRuntime(path)
    name = "sqlite-wal-full-staged" if staged else "sqlite-wal-full"
    hello = hello_handler({"name": name, "version": "bench", "language": "python"}, ["write_task"], [])
    serve({"hello": hello, "write_task": runtime.write_task})


# -- measuring -----------------------------------------------------------------------


def store_reference(directory: str, count: int) -> None:
    from retryproof.reference_impl import Runtime

    # Setup only: the measured calls, in another process, sync for real.
    real = os.fsync, os.fdatasync
    os.fsync = os.fdatasync = lambda fd: None
    try:
        runtime = Runtime(directory)
        for index in range(count):
            runtime.write_task({**TASK, "body": str(index)}, f"stored-{index}")
    finally:
        os.fsync, os.fdatasync = real


def syncs_per_creation(command: tuple[str, ...], state_dir: str) -> int | None:
    """The fsync and fdatasync calls of one creation, counted by strace between the
    answers of consecutive creations (the median); ``None`` without a working strace."""
    strace = shutil.which("strace")
    if strace is None:
        return None
    trace = os.path.join(state_dir, ".trace")
    options = ("-f", "-qq", "-y", "-e", "trace=fsync,fdatasync,write", "-o", trace, "--")
    try:
        connection = started((strace, *options, *command), state_dir)
    except Exception:  # strace cannot trace here (no ptrace in this container, say)
        return None
    try:
        for index in range(TRACED_CREATIONS):
            call(connection, f"traced-{index}", TASK)
    finally:
        connection.stop()
    counts, syncs = [], 0
    with open(trace, encoding="utf-8", errors="replace") as lines:
        for line in lines:
            call_name = line.split(None, 1)[1] if " " in line else ""
            if call_name.startswith(("fsync(", "fdatasync(")):
                syncs += 1
            elif call_name.startswith("write(1<"):  # an answer: hello, then each creation
                counts.append(syncs)
                syncs = 0
    return int(statistics.median(counts[2:])) if len(counts) > 2 else None


def journal_commit(scratch: str, index: int) -> None:
    """The unit a creation is made of: a new 300-byte file, fsynced (on ext4 this commits
    the file-system journal, as a directory fsync after a new name does)."""
    fd = os.open(os.path.join(scratch, f"commit-{index}"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, b"x" * 300)
        os.fsync(fd)
    finally:
        os.close(fd)


def started(command: tuple[str, ...], state_dir: str) -> ProcessConnection:
    connection = ProcessConnection(command, state_dir, call_timeout=30, start_timeout=30)
    connection.start()
    return connection


def call(connection: ProcessConnection, submission_id: str, task: Mapping[str, Any]) -> Mapping[str, Any]:
    reply = connection.call("write_task", {"client_submission_id": submission_id, "task": dict(task)})
    if isinstance(reply, Failure) or not hasattr(reply, "result"):
        raise SystemExit(f"write_task failed: {reply}")
    return reply.result


def burst(connection: ProcessConnection, submission_id: str) -> float:
    """Seconds until all of BURST pipelined calls with one new id are answered."""
    began = time.perf_counter()
    pending = [
        connection.submit("write_task", {"client_submission_id": submission_id, "task": TASK}) for _ in range(BURST)
    ]
    replies = [connection.wait(future, 30) for future in pending]
    seconds = time.perf_counter() - began
    created = sum(getattr(reply, "result", {}).get("disposition") == "created" for reply in replies)
    if created != 1:
        raise SystemExit(f"{connection.command}: a burst of {BURST} created {created} tasks")
    return seconds


def alternately(measures: dict[str, Callable[[int], float]], rounds: int) -> dict[str, float]:
    """The median of each measure, the measures taking turns round by round."""
    samples: dict[str, list[float]] = {name: [] for name in measures}
    for index in range(rounds):
        for name, measure in measures.items():
            samples[name].append(measure(index))
    return {name: statistics.median(values) for name, values in samples.items()}


def timed(action: Callable[[], object]) -> float:
    began = time.perf_counter()
    action()
    return time.perf_counter() - began


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=100, help="measured calls per row (default 100)")
    parser.add_argument("--receipts", default="1000,100000", help="stored receipts for the reuse rows")
    parser.add_argument("--dir", help="where the scratch state directories go (default: the temp directory)")
    parser.add_argument("--serve-sqlite", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--staged", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", help="print the figures (ms, counts) as one JSON object")
    options = parser.parse_args()
    if options.serve_sqlite:
        serve_sqlite(options.staged)
        return 0
    sizes = [int(text) for text in options.receipts.split(",") if text]
    scratch = tempfile.mkdtemp(prefix="bench-protocol-", dir=options.dir)
    rows: list[list[Any]] = []
    connections: list[ProcessConnection] = []
    commands = {"reference": REFERENCE, "sqlite": BASELINE, "staged": STAGED}
    syncs: dict[str, int | None] = {}
    try:
        for name, command in commands.items():
            os.mkdir(traced := os.path.join(scratch, f"{name}-traced"))
            syncs[name] = syncs_per_creation(command, traced)
        fresh = {name: os.path.join(scratch, f"{name}-fresh") for name in commands}
        for directory in fresh.values():
            os.mkdir(directory)
        reference = started(REFERENCE, fresh["reference"])
        baseline = started(BASELINE, fresh["sqlite"])
        staged = started(STAGED, fresh["staged"])
        connections += [reference, baseline, staged]
        create = alternately(
            {
                "reference": lambda index: timed(lambda: call(reference, f"new-{index}", TASK)),
                "sqlite": lambda index: timed(lambda: call(baseline, f"new-{index}", TASK)),
                "staged": lambda index: timed(lambda: call(staged, f"new-{index}", TASK)),
                "commit": lambda index: timed(lambda: journal_commit(scratch, index)),
                "floor": lambda index: timed(lambda: reference.call("hello", {"protocol": PROTOCOL})),
            },
            options.rounds,
        )
        rows.append(["create (new id)", create["reference"] * 1e3, create["sqlite"] * 1e3, create["staged"] * 1e3])
        bursts = alternately(
            {
                "reference": lambda index: burst(reference, f"burst-{index}"),
                "sqlite": lambda index: burst(baseline, f"burst-{index}"),
            },
            max(5, options.rounds // 10),
        )
        rows.append([f"{BURST}-way same-id burst (all answered)", bursts["reference"] * 1e3, bursts["sqlite"] * 1e3])
        for count in sizes:
            directories = {name: os.path.join(scratch, f"{name}-{count}") for name in ("reference", "sqlite")}
            for directory in directories.values():
                os.mkdir(directory)
            store_reference(directories["reference"], count)
            SqliteRuntime(os.path.join(directories["sqlite"], "runtime.sqlite3"), "OFF").store(count)
            stored_reference = started(REFERENCE, directories["reference"])
            stored_baseline = started(BASELINE, directories["sqlite"])
            connections += [stored_reference, stored_baseline]
            chosen = random.Random(count).choices(range(count), k=options.rounds)

            def reuse(connection: ProcessConnection, index: int, chosen: list[int] = chosen) -> float:
                number = chosen[index]
                return timed(lambda: call(connection, f"stored-{number}", {**TASK, "body": str(number)}))

            reused = alternately(
                {
                    "reference": lambda index, c=stored_reference: reuse(c, index),
                    "sqlite": lambda index, c=stored_baseline: reuse(c, index),
                },
                options.rounds,
            )
            rows.append([f"reuse, {count:,} receipts stored", reused["reference"] * 1e3, reused["sqlite"] * 1e3])
    finally:
        for connection in connections:
            connection.kill()
        shutil.rmtree(scratch, ignore_errors=True)
    if options.json:
        figures = {row[0]: row[1:] for row in rows}
        print(json.dumps({"rows_ms": figures, "syncs": syncs, "create_ms": {k: v * 1e3 for k, v in create.items()}}))
        return 0
    table = [
        [
            name,
            f"{ours:.2f}",
            f"{theirs:.2f}",
            f"{ours / theirs:.2f}x",
            *([f"{staged_ms[0]:.2f}", f"{ours / staged_ms[0]:.2f}x"] if staged_ms else ["", ""]),
        ]
        for name, ours, theirs, *staged_ms in rows
    ]
    print(
        tabulate(
            table,
            headers=[
                "median per call",
                "reference ms",
                "SQLite WAL FULL ms",
                "reference / SQLite",
                "SQLite staged (DUR-1) ms",
                "reference / staged",
            ],
            tablefmt="github",
        )
    )
    if all(count is not None for count in syncs.values()):
        print(
            f"\nfsync + fdatasync calls per creation (strace): reference {syncs['reference']}, "
            f"SQLite WAL FULL {syncs['sqlite']}, SQLite staged {syncs['staged']}"
        )
    else:
        print("\nfsync + fdatasync calls per creation: not counted (strace is missing or cannot trace here)")
    print(
        f"one journal commit (a new file fsynced, in this process, same rounds): {create['commit'] * 1e3:.2f} ms; "
        f"create per commit: reference {create['reference'] / create['commit']:.1f}, "
        f"SQLite WAL FULL {create['sqlite'] / create['commit']:.1f}, staged {create['staged'] / create['commit']:.1f}"
    )
    own = {name: (create[name] - create["floor"]) * 1e3 for name in ("reference", "sqlite", "staged")}
    print(
        f"a no-op round trip (hello, same rounds): {create['floor'] * 1e3:.2f} ms; a creation less that: "
        f"reference {own['reference']:.2f} ms, SQLite WAL FULL {own['sqlite']:.2f} ms "
        f"({own['reference'] / own['sqlite']:.2f}x), staged {own['staged']:.2f} ms "
        f"({own['reference'] / own['staged']:.2f}x)"
    )
    reuse_rows = [row for row in rows if row[0].startswith("reuse")]
    if len(reuse_rows) > 1:
        print(f"\nreuse, most vs fewest receipts stored: {reuse_rows[-1][1] / reuse_rows[0][1]:.2f}x (flat is 1.00x)")
    print(
        f"{options.rounds} rounds; scratch in {options.dir or tempfile.gettempdir()}; "
        f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
