"""Where FUZZ-MODEL's time goes: harness starts (spawn + hello), ends (SIGKILL or
shutdown, and the reap), the calls it waits for (writes and listings), the concurrency
probe, and the rest (Hypothesis and the model's checks, in the kit); with its CPU
seconds, the kit's and its harness processes'.

    python benchmarks/bench_fuzz.py [--seeds 1,3,7] [--profile retryproof-dev] [--harness CMD]

Runs FUZZ-MODEL's engine in-process (``fuzz.run_fuzz``) once per seed, against the
bundled reference runtime (or ``--harness``), on a fresh state directory, writing no
report. The probe's seconds are also counted in its starts and calls.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable

import bytecode
from cpu import cpu_seconds
from tabulate import tabulate

from retryproof.adapters.process import ProcessConnection
from retryproof.conformance.fuzz import machine, private_storage, run_fuzz
from retryproof.conformance.fuzz.profiles import DEV
from retryproof.conformance.options import REFERENCE_COMMAND

COLUMNS = ("start", "end", "write_task", "list_tasks", "probe")


class Timers:
    """Seconds and counts per column; a call's wait counts under its op, except the
    hello a start waits for (counted in the start)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.count: Counter = Counter()
        self._starting = threading.local()

    def timed(self, name: str | Callable[..., str], original: Callable) -> Callable:
        def wrapper(*args, **kwargs):
            column = name if isinstance(name, str) else name(*args, **kwargs)
            if column == "start":
                self._starting.active = True
            began = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                if column == "start":
                    self._starting.active = False
                if column and not (column != "start" and getattr(self._starting, "active", False)):
                    self.seconds[column] += time.perf_counter() - began
                    self.count[column] += 1

        return wrapper


def instrument(timers: Timers) -> None:
    ProcessConnection.start = timers.timed("start", ProcessConnection.start)  # type: ignore[method-assign]
    ProcessConnection.kill = timers.timed("end", ProcessConnection.kill)  # type: ignore[method-assign]
    ProcessConnection.stop = timers.timed("end", ProcessConnection.stop)  # type: ignore[method-assign]
    ops: dict[int, str] = {}
    submit, wait = ProcessConnection.submit, ProcessConnection.wait

    def noted_submit(self, op, args=None, **kwargs):
        future = submit(self, op, args, **kwargs)
        ops[id(future)] = op
        return future

    ProcessConnection.submit = noted_submit  # type: ignore[method-assign]
    op_of = lambda self, pending, *a, **k: ops.get(id(pending), "")  # noqa: E731
    ProcessConnection.wait = timers.timed(op_of, wait)  # type: ignore[method-assign]
    machine.run_probe = timers.timed("probe", machine.run_probe)  # type: ignore[assignment]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", default="1,3,7", help="comma-separated seeds")
    parser.add_argument("--profile", default=DEV, help="the fuzz profile (default %(default)s)")
    parser.add_argument("--harness", help="harness command line (default: the reference runtime)")
    args = parser.parse_args()
    command = tuple(shlex.split(args.harness)) if args.harness else REFERENCE_COMMAND
    timers = Timers()
    instrument(timers)
    rows = []
    for seed in (int(seed) for seed in args.seeds.split(",")):
        timers.seconds.clear()
        timers.count.clear()
        with tempfile.TemporaryDirectory(prefix="bench-fuzz-") as state:
            connection = ProcessConnection(command, state)
            try:
                connection.start()
                timers.seconds.clear()
                timers.count.clear()
                began, cpu_began = time.perf_counter(), cpu_seconds()
                with private_storage():
                    outcome = run_fuzz(connection, seed=seed, profile=args.profile)
                wall = time.perf_counter() - began
                kit, children = (now - then for now, then in zip(cpu_seconds(), cpu_began, strict=True))
            finally:
                connection.kill()
        seconds, count = timers.seconds, timers.count
        rest = wall - sum(seconds[column] for column in COLUMNS if column != "probe")
        rows.append(
            (
                seed,
                "failed" if outcome.failed else "passed",
                f"{outcome.examples} ({outcome.repeated})",
                f"{wall:.2f}",
                f"{kit:.2f} + {children:.2f}",
                *(f"{seconds[column]:.2f} ({count[column]})" for column in COLUMNS),
                f"{rest:.2f}",
            )
        )
    headers = (
        "seed",
        "outcome",
        "examples (repeated)",
        "wall s",
        "CPU s kit + harness",
        "starts s (n)",
        "ends s (n)",
        "writes s (n)",
        "listings s (n)",
        "probe s",
        "rest s",
    )
    print(tabulate(rows, headers=headers, tablefmt="github"))
    stale = bytecode.warning()  # without bytecode, every harness start compiles the reference
    if stale:
        print(f"\n{stale}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
