"""Where a full run's wall time goes: harness starts (spawn + handshake), calls,
kills/stops, and the rest (the kit itself); and each scenario's CPU seconds, the kit's
own and its harness processes', the figure a loaded machine changes least (a run on N
CPUs takes at least its CPU seconds over N).

    python benchmarks/bench_run.py [--skip IDS] [--harness CMD] [--profile FILE]

Wraps the process adapter's methods with timers and runs the catalogue in-process, one
scenario at a time (so a scenario's CPU is what the process and its reaped children spent
while it was computed), against the bundled reference runtime (or ``--harness``),
writing no report.

``--profile FILE`` also writes a cProfile of every thread that ended (pstats format; read
it with ``python -m pstats FILE``): the kit's work is mostly in its reader and caller threads,
while the main thread waits. Each thread gets a profiler of its own timed by its own CPU
clock (``time.thread_time``), so a wait counts for nothing; Python 3.12 and later allow
one profiler per process, so there it is refused. cProfile makes Python code several
times slower than C, so it ranks the costs; time a suspect function alone for its figure.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import shlex
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager

import bytecode
from cpu import cpu_seconds
from tabulate import tabulate

from retryproof.adapters.process import ProcessConnection
from retryproof.conformance.options import REFERENCE_COMMAND, Options
from retryproof.conformance.runner import Run, handshake, run

TIMED = {
    "start": "harness starts (spawn + hello)",
    "wait": "waiting for answers",
    "kill": "SIGKILL + reap",
    "stop": "graceful shutdown",
}


def instrument(totals: dict[str, list[float]]) -> None:
    for name in TIMED:
        original = getattr(ProcessConnection, name)

        def timed(self, *args, _original=original, _name=name, **kwargs):
            began = time.perf_counter()
            try:
                return _original(self, *args, **kwargs)
            finally:
                totals[_name].append(time.perf_counter() - began)

        setattr(ProcessConnection, name, timed)


class Durations:
    """Each scenario's wall, CPU and harness starts (``totals["start"]`` grows by one
    per start), measured around ``Run.compute``: with one job the scenarios are
    computed one after another, and their events are emitted only after each is."""

    def __init__(self, totals: dict[str, list[float]]):
        self.rows = []
        self._totals = totals

    def instrument(self) -> None:
        compute = Run.compute

        def timed(run, item, *args, **kwargs):
            began, (kit_before, children_before) = time.perf_counter(), cpu_seconds()
            starts_before = len(self._totals["start"])
            result = compute(run, item, *args, **kwargs)
            kit, children = cpu_seconds()
            self.rows.append(
                (
                    result.entry.id,
                    result.status,
                    f"{time.perf_counter() - began:.2f}",
                    f"{kit - kit_before:.2f}",
                    f"{children - children_before:.2f}",
                    len(self._totals["start"]) - starts_before,
                )
            )
            return result

        Run.compute = timed


@contextmanager
def profiled(path: str | None) -> Iterator[None]:
    """Profile every thread that runs meanwhile (this one and each one started) into
    ``path``; nothing when ``path`` is None. A thread still running at the end (the
    scratch remover, a daemon) is left out: its profiler can only be read from another
    thread, whose CPU clock would time the calls it is in."""
    if path is None:
        yield
        return
    main = cProfile.Profile(time.thread_time)
    started: list[tuple[int, cProfile.Profile]] = []

    def start(*_: object) -> None:  # a new thread's first profile event: its own profiler from here on
        started.append((threading.get_ident(), cProfile.Profile(time.thread_time)))
        started[-1][1].enable()

    threading.setprofile(start)
    main.enable()
    try:
        yield
    finally:
        main.disable()
        threading.setprofile(None)
        running = {thread.ident for thread in threading.enumerate()}
        stats = pstats.Stats(main)
        for ident, profile in started:
            if ident not in running:
                profile.create_stats()
                if profile.stats:  # a thread that made no call has nothing to add
                    stats.add(profile)
        stats.dump_stats(path)
        left = sum(ident in running for ident, _ in started)
        print(f"profile of {len(started) + 1 - left} threads (left out {left} still running): {path}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--skip", default="", help="comma-separated scenario ids")
    parser.add_argument("--harness", help="harness command line (default: the reference runtime)")
    parser.add_argument("--profile", metavar="FILE", help="also write a cProfile of every thread to FILE")
    args = parser.parse_args()
    if args.profile and sys.version_info >= (3, 12):
        parser.error("--profile needs a profiler per thread: Python 3.11 or older")
    command = tuple(shlex.split(args.harness)) if args.harness else REFERENCE_COMMAND
    options = Options(command=command, target="", seed=1, skip=tuple(filter(None, args.skip.split(","))))
    totals: dict[str, list[float]] = defaultdict(list)
    instrument(totals)
    durations = Durations(totals)
    durations.instrument()
    began, cpu_began = time.perf_counter(), cpu_seconds()
    with profiled(args.profile):
        hello, kept = handshake(options)  # as `retryproof run` does: its harness is the first sharing scenario's
        finished = run(options, hello, [], kept)
    wall = time.perf_counter() - began
    kit, children = (now - then for now, then in zip(cpu_seconds(), cpu_began, strict=True))
    # Nested waits (start waits for hello) are counted once: hello time is inside start.
    start_s = sum(totals["start"])
    rows = [(TIMED[name], len(totals[name]), f"{sum(totals[name]):.2f}") for name in TIMED]
    durations.rows.sort(key=lambda row: -(float(row[3]) + float(row[4])))
    headers = ("scenario", "status", "seconds", "kit CPU s", "harness CPU s", "starts")
    print(tabulate(durations.rows, headers=headers, tablefmt="github"))
    print()
    print(tabulate(rows, headers=("where", "count", "seconds"), tablefmt="github"))
    print(
        f"\nwall {wall:.2f}s for {len(finished.results)} scenarios; starts {start_s:.2f}s "
        f"({start_s / wall:.0%}), mean start {start_s / max(1, len(totals['start'])) * 1000:.0f} ms; "
        f"CPU {kit + children:.2f}s (kit {kit:.2f}s, harness processes {children:.2f}s); verdict: {finished.verdict.headline}"
    )
    stale = bytecode.warning()
    if stale:
        print(f"\n{stale}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
