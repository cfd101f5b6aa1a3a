"""Start-up next to the floor, each as a ratio to a bare interpreter measured in the
same run:

- the reference harness: from spawn to its ``hello`` answer, started as the kit starts
  it (``REFERENCE_COMMAND``, its own process group, pipes, ``RETRYPROOF_STATE_DIR``).
  A run starts a harness per scenario and more for restarts (about ninety), and this
  span is what each start costs the run; its floor is what any Python harness of the
  protocol pays, a bare interpreter that imports ``json`` and ``threading`` and then
  reads one line and answers it, measured over the same span (that floor's own ratio
  to a bare interpreter is its row's).
- the reference as an HTTP API (``--http``, as the kit starts it for a binding run):
  from spawn to the end of its answer to one ``GET /tasks``, the connection tried every
  5 ms until the port accepts. Its floor is a bare interpreter that imports ``json`` and
  ``threading``, listens, and answers one request on a socket with nothing but ``socket``.
- the kit's own ``retryproof list`` and ``retryproof digest``, through the installed
  ``retryproof`` script as a user starts them: from spawn to exit, next to a bare
  ``python -c pass``, spawn to exit.

    python benchmarks/bench_start.py [--rounds N]

Run it with the interpreter of the environment to measure. A wheel install is what a
user gets, and the figure to quote: pip compiles its modules to bytecode as it installs
them. An editable install (``pip install -e``) loads its import hook at every
interpreter start, so its floor and starts differ from a wheel's; and it runs the
modules from the source tree, where an interpreter that may not write bytecode
(``PYTHONDONTWRITEBYTECODE``, a read-only tree) compiles every module at every start.
The benchmark measures what is installed and does not compile it; it says how many of
the kit's modules have no current bytecode, which ``python -m compileall -q spec
conformance adapters reference_impl`` in the source tree provides (as CI does). The
rounds of the commands are interleaved, so a machine shared with other work slows them
all alike; the ratio of medians is the figure to read, the milliseconds only describe
this machine at this moment. The CPU columns are each started process's own user and
system seconds (``cpu.py``), the figure the load changes least: what the README's test
command pays for each of the hundreds of starts it makes.

The reference answers ``hello`` having imported, besides its own modules, the
standard library's ``json`` (with ``re``, ``enum`` and ``functools``) and ``threading``,
which any Python harness of the protocol needs: on their own, in a bare interpreter
that reads one line, they are most of the way to 2x (the ``json`` row shows it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import selectors
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator

import bytecode
from cpu import cpu_seconds
from tabulate import tabulate

from retryproof.adapters.loopback import free_port
from retryproof.conformance.options import REFERENCE_COMMAND

HELLO = (json.dumps({"id": 1, "op": "hello", "args": {"protocol": "retryproof-harness/1"}}) + "\n").encode()
TASK = json.dumps({"subject": "Fix login"})
ECHO_LINE = "import sys; sys.stdout.write(sys.stdin.readline()); sys.stdout.flush()"
LISTING = b"GET /tasks HTTP/1.0\r\n\r\n"
HTTP_FLOOR = (
    "import json, os, socket, threading\n"
    "server = socket.create_server(('127.0.0.1', int(os.environ['RETRYPROOF_PORT'])))\n"
    "connection, _ = server.accept()\n"
    "connection.recv(65536)\n"
    "connection.sendall(b'HTTP/1.0 200 OK\\r\\nContent-Length: 2\\r\\n\\r\\n{}')\n"
    "connection.close()"
)
TIMEOUT_S = 60.0


@contextlib.contextmanager
def _killed_at_end(popen: subprocess.Popen[bytes]) -> Iterator[None]:
    """Whatever the measurement raised, no started process outlives it."""
    try:
        yield
    finally:
        if popen.poll() is None:
            popen.kill()
            popen.wait()


def to_answer(command: list[str], env: dict[str, str]) -> float:
    """Seconds from spawn until the first line of stdout (the answer to ``HELLO``) is read."""
    began = time.perf_counter()
    popen = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,
    )
    with _killed_at_end(popen):
        assert popen.stdin is not None and popen.stdout is not None
        popen.stdin.write(HELLO)
        popen.stdin.flush()
        with selectors.DefaultSelector() as selector:
            selector.register(popen.stdout, selectors.EVENT_READ)
            if not selector.select(TIMEOUT_S):
                raise SystemExit(f"{command}: no answer within {TIMEOUT_S} s")
            answer = popen.stdout.readline()
        seconds = time.perf_counter() - began
        popen.stdin.close()
        stderr = popen.stderr.read() if popen.stderr else b""
        if popen.wait(TIMEOUT_S) != 0 or not answer.endswith(b"\n"):
            raise SystemExit(f"{command} exited {popen.returncode}: {stderr[-500:]!r}")
        if json.loads(answer).get("ok") is False:
            raise SystemExit(f"{command} refused hello: {answer!r}")
        return seconds


def to_http_answer(command: list[str], env: dict[str, str]) -> float:
    """Seconds from spawn until the answer to ``LISTING`` has been read to its end (the
    connection tried every 5 ms until the port accepts); then the service is ended by
    SIGTERM, as the kit ends it."""
    port = free_port()
    began = time.perf_counter()
    popen = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, env={**env, "RETRYPROOF_PORT": str(port)}, start_new_session=True
    )
    with _killed_at_end(popen):
        while True:
            try:
                connection = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S)
                break
            except ConnectionRefusedError:
                if popen.poll() is not None or time.perf_counter() - began > TIMEOUT_S:
                    raise SystemExit(f"{command}: not listening on {port} ({popen.returncode})") from None
                time.sleep(0.005)
        with connection:
            connection.sendall(LISTING)
            answer = b"".join(iter(lambda: connection.recv(65536), b""))
        seconds = time.perf_counter() - began
        if not answer.startswith((b"HTTP/1.0 200 ", b"HTTP/1.1 200 ")):
            raise SystemExit(f"{command} answered {answer[:200]!r}")
        if popen.poll() is None:
            os.killpg(popen.pid, signal.SIGTERM)
        if popen.wait(TIMEOUT_S) not in (0, -signal.SIGTERM):  # the floor has no handler
            raise SystemExit(f"{command} exited {popen.returncode}")
        return seconds


def to_exit(command: list[str], stdin: str, env: dict[str, str]) -> float:
    """Seconds from spawn until the process has exited, having read ``stdin``."""
    began = time.perf_counter()
    done = subprocess.run(command, input=stdin, capture_output=True, text=True, env=env, timeout=TIMEOUT_S)
    seconds = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"{command} exited {done.returncode}: {done.stderr[-500:]}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--json", action="store_true", help="print the medians (seconds) as one JSON object")
    args = parser.parse_args()
    script = os.path.join(os.path.dirname(sys.executable), "retryproof")
    kit = [script] if os.access(script, os.X_OK) else [sys.executable, "-m", "retryproof.conformance.cli"]
    bare_echo = "bare interpreter, spawn to answering one line"
    json_echo = "bare interpreter importing json and threading, to one line"
    bare_exit = "bare interpreter (python -c pass), spawn to exit"
    http_floor = "bare interpreter with json, threading and a socket, to one HTTP answer"
    with tempfile.TemporaryDirectory() as state_dir:
        env = {**os.environ, "RETRYPROOF_STATE_DIR": state_dir}
        # (case, its floor, how it is timed)
        cases = {
            bare_echo: (bare_echo, lambda: to_answer([sys.executable, "-c", ECHO_LINE], env)),
            json_echo: (
                bare_echo,
                lambda: to_answer([sys.executable, "-c", f"import json, threading; {ECHO_LINE}"], env),
            ),
            "reference harness, spawn to hello answer": (json_echo, lambda: to_answer(list(REFERENCE_COMMAND), env)),
            http_floor: (http_floor, lambda: to_http_answer([sys.executable, "-c", HTTP_FLOOR], env)),
            "reference --http, spawn to one listing answered": (
                http_floor,
                lambda: to_http_answer([*REFERENCE_COMMAND, "--http"], env),
            ),
            bare_exit: (bare_exit, lambda: to_exit([sys.executable, "-c", "pass"], "", env)),
            "retryproof list, spawn to exit": (bare_exit, lambda: to_exit([*kit, "list"], "", env)),
            "retryproof digest, spawn to exit": (bare_exit, lambda: to_exit([*kit, "digest"], TASK, env)),
        }
        samples: dict[str, list[float]] = {name: [] for name in cases}
        cpu: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.rounds):
            for name, (_, measure) in cases.items():
                reaped = cpu_seconds()[1]
                samples[name].append(measure())
                cpu[name].append(cpu_seconds()[1] - reaped)  # the one process measure() started
    medians = {name: statistics.median(values) for name, values in samples.items()}
    if args.json:
        print(json.dumps(medians))
        return 0
    cpu_medians = {name: statistics.median(values) for name, values in cpu.items()}
    rows = [
        (
            name,
            f"{medians[name] * 1000:.0f}",
            f"{medians[name] / medians[floor]:.2f}x",
            f"{cpu_medians[name] * 1000:.1f}",
            f"{cpu_medians[name] / cpu_medians[floor]:.2f}x",
        )
        for name, (floor, _) in cases.items()
    ]
    headers = ("start", "median ms", "vs its floor", "CPU ms (median)", "CPU vs its floor")
    print(tabulate(rows, headers=headers, tablefmt="github"))
    print(f"\n{args.rounds} interleaved rounds; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print(f"interpreter: {sys.executable}; the kit started as: {' '.join(kit)}")
    stale = bytecode.warning()
    if stale:
        print(f"\n{stale}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
