"""The Restate behaviours behind the failing cells, shown without retryproof's runner.

Starts the runtime of this folder (``serve.py``: the Restate server and the service)
on a scratch directory, then calls the ingress with plain HTTP requests, the way an
application's client does, and counts the task files (the effect).

    part 1: the same idempotency-key with another body -> the first answer, one task
    part 2: a task file removed, the key sent again -> the vanished task's answer
    part 3: the key first sent with an invalid body (400), then with a valid one ->
            the recorded 400 again, and no task ever

Run: .venv/bin/python experiment.py   (this folder's environment, see ./setup)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))


def free_ports(count: int) -> list[int]:
    import socket

    sockets = [socket.socket() for _ in range(count)]
    for each in sockets:
        each.bind(("127.0.0.1", 0))
    ports = [each.getsockname()[1] for each in sockets]
    for each in sockets:
        each.close()
    return ports


def call(port: int, key: str, body: object) -> tuple[int, dict]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/tasks/create",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "idempotency-key": key},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=20) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)


def tasks(state_dir: str) -> list[str]:
    return sorted(name for name in os.listdir(os.path.join(state_dir, "tasks")) if not name.startswith("."))


def main() -> None:
    with tempfile.TemporaryDirectory() as state_dir:
        ingress, admin, node, service = free_ports(4)
        environment = dict(
            os.environ,
            RETRYPROOF_STATE_DIR=state_dir,
            INGRESS_PORT=str(ingress),
            ADMIN_PORT=str(admin),
            NODE_PORT=str(node),
            SERVICE_PORT=str(service),
        )
        runtime = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "serve.py")], env=environment, stderr=subprocess.DEVNULL
        )
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{admin}/services/tasks", timeout=2).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise SystemExit("the Restate runtime did not start") from None
                    time.sleep(0.2)

            first = call(ingress, "order-1", {"subject": "first"})
            second = call(ingress, "order-1", {"subject": "second"})
            print(f"part 1: key order-1 with subject 'first' -> {first}")
            print(f"        key order-1 with subject 'second' -> {second}")
            print(f"        task files: {len(tasks(state_dir))} (a conflict would say so; the second body is dropped)")

            os.unlink(os.path.join(state_dir, first[1]["task_path"]))
            again = call(ingress, "order-1", {"subject": "first"})
            print(f"part 2: task file removed; key order-1 again -> {again}; task files: {len(tasks(state_dir))}")

            invalid = call(ingress, "order-2", {"title": "not a task field"})
            valid = call(ingress, "order-2", {"subject": "valid"})
            print(f"part 3: key order-2 with an invalid body -> {invalid}")
            print(f"        key order-2 with a valid body -> {valid}; task files: {len(tasks(state_dir))}")
        finally:
            runtime.send_signal(signal.SIGTERM)
            runtime.wait(60)


if __name__ == "__main__":
    main()
