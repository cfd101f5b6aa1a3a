"""Deliberately misbehaving harnesses for the kit's own tests: ``python fake_harness.py MODE``.

``honest`` is a small file-backed runtime that gets the basics right (the control:
it must pass WT-CREATE and A2-RESPONSE-LOSS, so a failure of another mode is caused by
its defect, not by the fake). Every other mode breaks one thing.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

import kit_from_source  # noqa: F401  (the kit's modules, under python -S too)

from retryproof.spec.digest import (
    DIGEST_SCHEMA_VERSION,
    check_submission_id,
    request_digest,
)
from retryproof.spec.protocol import PROTOCOL, serve

MODE = sys.argv[1]
if MODE == "shared-state":  # ignores RETRYPROOF_STATE_DIR: one file for every scenario
    STATE = os.environ["FAKE_SHARED_STATE"]
elif MODE == "cwd-state":  # keeps its state in whatever directory it was started in
    STATE = "fake.json"
else:
    STATE = os.path.join(os.environ["RETRYPROOF_STATE_DIR"], "fake.json")


def load() -> dict:
    try:
        with open(STATE) as handle:
            return json.load(handle)
    except FileNotFoundError:
        return {"tasks": [], "receipts": {}}


def save(state: dict) -> None:
    with open(STATE + ".tmp", "w") as handle:
        json.dump(state, handle)
    os.replace(STATE + ".tmp", STATE)


def hello(args):
    return {
        "protocol": PROTOCOL,
        # FAKE_IMPLEMENTATION_NAME: a hostile name, for the reports' escaping tests.
        "implementation": {
            "name": os.environ.get("FAKE_IMPLEMENTATION_NAME", f"fake-{MODE}"),
            "version": "0",
            "language": "python",
        },
        "capabilities": ["write_task"],
        "failpoints": [],
        "digest_schema_version": DIGEST_SCHEMA_VERSION,
    }


#: serial-delay, serial-double-create: one write_task at a time, each taking this long, so pipelined calls
#: answer one after another at known intervals (the timeline tests' known timing).
SERIAL_DELAY_S = 0.04
SERIAL = threading.Lock()
#: One writer of the state file at a time: ``serve`` answers pipelined calls on threads,
#: and two of them writing ``fake.json.tmp`` at once corrupt it, a defect of the fake
#: rather than the one its mode is for (a race of 64 calls made it answer list_tasks
#: with a JSONDecodeError).
STATE_LOCK = threading.Lock()


def write_task(args):
    if MODE == "hang-on-write":
        time.sleep(3600)
    if MODE.startswith("serial-"):
        with SERIAL:
            time.sleep(SERIAL_DELAY_S)
            return _write_task(args)
    with STATE_LOCK:
        return _write_task(args)


def _write_task(args):
    submission_id = check_submission_id(args["client_submission_id"])
    digest = request_digest(args["task"])
    state = load()
    receipt = state["receipts"].get(submission_id)
    if receipt and not MODE.endswith("double-create"):
        return {**receipt, "disposition": "reused", "action_taken": False}
    task_id = f"T-{len(state['tasks']) + 1}"
    result = {
        "disposition": "created",
        "action_taken": True,
        "task_id": task_id,
        "task_path": f"tasks/{task_id}.json",
        "client_submission_id": submission_id,
        "request_digest": digest,
        "digest_schema_version": DIGEST_SCHEMA_VERSION,
        "idempotent": True,
    }
    state["tasks"].append(
        {
            "task_id": task_id,
            "task_path": result["task_path"],
            "client_submission_id": submission_id,
            "request_digest": digest,
            "task": args["task"],
        }
    )
    state["receipts"][submission_id] = result
    save(state)
    return result


def list_tasks(args):
    tasks = [
        {key: task[key] for key in ("task_id", "task_path", "client_submission_id", "request_digest")}
        for task in load()["tasks"]
    ]
    return {"tasks": [] if MODE == "liar" else tasks}


def read_task(args):
    task = next(task for task in load()["tasks"] if task["task_id"] == args["task_id"])
    return {
        "task_id": task["task_id"],
        "task": task["task"],
        "client_submission_id": task["client_submission_id"],
        "request_digest": task["request_digest"],
    }


def leave_a_survivor() -> None:
    """Double-fork a setsid process that keeps stdout and stderr open for a while; its
    pid is appended to ``FAKE_SURVIVOR_PIDS`` (a file) when set, for the test to end it."""
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            if os.environ.get("FAKE_SURVIVOR_PIDS"):
                with open(os.environ["FAKE_SURVIVOR_PIDS"], "a") as pids:
                    pids.write(f"{os.getpid()}\n")
            time.sleep(float(os.environ.get("FAKE_SURVIVOR_S", "20")))
        os._exit(0)
    os.wait()


def main() -> None:
    if MODE == "leaves-survivor":
        leave_a_survivor()
    if MODE == "crash-at-start":
        print("fake: cannot open the database", file=sys.stderr)
        sys.exit(3)
    if MODE == "hang":
        if os.environ.get("FAKE_STARTED"):  # a file holding its pid once started, for a test to wait on
            with open(os.environ["FAKE_STARTED"] + ".tmp", "w") as pid:
                pid.write(str(os.getpid()))
            os.rename(os.environ["FAKE_STARTED"] + ".tmp", os.environ["FAKE_STARTED"])
        time.sleep(3600)
    if MODE in ("garbage", "wrong-ids", "wrong-ids-on-write"):
        for line in sys.stdin:
            request = json.loads(line)
            if request["op"] == "hello":
                reply = {"id": request["id"], "ok": True, "result": hello({})}
            elif MODE == "wrong-ids-on-write" and request["op"] == "list_tasks":
                reply = {"id": request["id"], "ok": True, "result": list_tasks({})}
            elif MODE == "garbage":
                print("<b>|not json| `rm -rf`</b>", flush=True)
                continue
            else:
                reply = {"id": request["id"] + 1000, "ok": True, "result": {}}
            print(json.dumps(reply), flush=True)
        return
    stdin = sys.stdin.buffer
    if MODE == "lenient-lines":
        stdin = _lenient(stdin)
    if MODE == "trims-lines":  # str.strip(): also a vertical tab and a form feed (PROTOCOL-R7 says bad_message)
        stdin = (line.decode().strip().encode() + b"\n" for line in stdin)
    if MODE == "answers-blank-lines":
        stdin = (b"[]\n" if not line.strip() else line for line in stdin)  # a blank line becomes bad_message
    serve({"hello": hello, "write_task": write_task, "list_tasks": list_tasks, "read_task": read_task}, stdin)


def _lenient(lines):
    """Serve a line without args, or with extra top-level keys, as a request (PROTOCOL-R6 says bad_message)."""
    for line in lines:
        try:
            message = json.loads(line)
        except ValueError:
            yield line
            continue
        if isinstance(message, dict) and isinstance(message.get("id"), int) and "op" in message:
            message = {"id": message["id"], "op": message["op"], "args": message.get("args", {})}
            line = json.dumps(message).encode() + b"\n"
        yield line


main()
