"""Where CRASH-POINTS' time goes over a binding: what one start of the server costs
untraced and under each strace CRASH-POINTS runs it with, and what the write, the kill
and the restart cost beside it.

    python benchmarks/bench_crash_points.py [--binding reference-mcp] [--rounds N]

A point is two starts of the server (one under strace, killed at its parked durable
call; one untraced, on that state, to retry the key) plus a write, a kill and a retry;
the recording is one more start under strace. Each start row is timed from spawn until
the wire is ready (MCP: ``initialize`` answered), and its CPU seconds are those of the
server and of strace, counted once the server has been stopped and reaped (its input
closed, as a caller leaving does). The rows of one round are interleaved, so a machine
shared with other work slows them alike: read the ratios to the untraced start, not the
seconds. The traced rows are the recording's strace (every durable call's syscall, with
timestamps and paths), a point's on ``openat`` counted on a path (the SDK's imports open
hundreds of files, and each stops at strace) and a point's on ``pwrite64``; where strace
has ``--seccomp-bpf`` only the traced syscall stops the server.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from typing import NamedTuple

from cpu import cpu_seconds
from tabulate import tabulate

from retryproof.adapters.binding.connection import BindingConnection
from retryproof.adapters.process_groups import Scratch
from retryproof.conformance.options import load_binding
from retryproof.conformance.scenarios.crash_points import TRACED, Point
from retryproof.conformance.strace import tracing_options

#: A park longer than any round: a point's call is never reached here (no write is sent).
PARK_US = 600_000_000


class Sample(NamedTuple):
    wall: float
    cpu: float


def starts(strace: str) -> dict[str, Callable[[Scratch], tuple[str, ...]]]:
    """Each kind of start, as the command prefix CRASH-POINTS runs the server under."""
    seccomp = tracing_options(strace)

    def record(scratch: Scratch) -> tuple[str, ...]:
        trace = os.path.join(scratch.root, "trace")
        return (strace, *seccomp, "-ttt", "-y", "-yy", "-e", "trace=" + ",".join(TRACED), "-o", trace, "--")

    def point(syscall: str, path: str | None) -> Callable[[Scratch], tuple[str, ...]]:
        def prefix(scratch: Scratch) -> tuple[str, ...]:
            options = Point(syscall, 1, path or "", path).strace_options(scratch.state, park_us=PARK_US)
            return (strace, *seccomp, "-y", "-yy", *options, "-o", os.path.join(scratch.root, "trace"), "--")

        return prefix

    return {
        "untraced": lambda scratch: (),
        "recording (all durable syscalls)": record,
        "point: openat on a path": point("openat", "receipts.journal.lock"),
        "point: pwrite64": point("pwrite64", None),
    }


def one_start(binding, prefix: tuple[str, ...], scratch: Scratch) -> Sample:
    before = sum(cpu_seconds())
    began = time.perf_counter()
    connection = BindingConnection(binding, scratch.state, start_timeout=120, wrap=prefix)
    connection.start()
    ready = time.perf_counter() - began
    connection.stop()
    return Sample(ready, sum(cpu_seconds()) - before)


def one_point(binding) -> dict[str, float]:
    """A write on an untraced server, its kill, and the restart on its state."""
    with Scratch("bench-crash-points-") as scratch:
        connection = BindingConnection(binding, scratch.state, start_timeout=120)
        connection.start()
        began = time.perf_counter()
        connection.call("write_task", {"client_submission_id": "bench-1", "task": {"subject": "Fix login"}})
        wrote = time.perf_counter()
        connection.kill()
        killed = time.perf_counter()
        connection.start()
        restarted = time.perf_counter()
        connection.kill()
    return {"write": wrote - began, "kill": killed - wrote, "restart": restarted - killed}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binding", default="reference-mcp", help="a bundled binding's name or a binding file")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    strace = shutil.which("strace")
    if strace is None:
        raise SystemExit("strace is not on PATH")
    binding = load_binding(args.binding)
    kinds = starts(strace)
    samples: dict[str, list[Sample]] = {kind: [] for kind in kinds}
    phases: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        for kind, prefix in kinds.items():
            with Scratch("bench-crash-points-") as scratch:
                samples[kind].append(one_start(binding, prefix(scratch), scratch))
        for phase, seconds in one_point(binding).items():
            phases.setdefault(phase, []).append(seconds)
    base = Sample(*(statistics.median(getattr(s, field) for s in samples["untraced"]) for field in Sample._fields))
    rows = []
    for kind, taken in samples.items():
        wall = statistics.median(s.wall for s in taken)
        cpu = statistics.median(s.cpu for s in taken)
        rows.append([kind, f"{wall:.2f}", f"{wall / base.wall:.2f}x", f"{cpu:.2f}", f"{cpu / base.cpu:.2f}x"])
    for phase, seconds in phases.items():
        rows.append([f"{phase} (untraced server)", f"{statistics.median(seconds):.3f}", "", "", ""])
    print(tabulate(rows, headers=["start to ready, or phase", "wall s", "ratio", "CPU s", "ratio"], tablefmt="github"))
    print(
        f"\n{args.rounds} interleaved rounds, binding {args.binding}, strace {' '.join(tracing_options(strace))}; "
        f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; interpreter {sys.executable}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
