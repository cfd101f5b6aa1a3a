"""Where a full run's wall time goes: harness starts (spawn + handshake), calls,
kills/stops, and the rest (the kit itself); and each scenario's CPU seconds, the kit's
own and its harness processes', the figure a loaded machine changes least (a run on N
CPUs takes at least its CPU seconds over N).

    python benchmarks/bench_run.py [--skip IDS] [--harness CMD] [--profile FILE] [--jobs N]

Wraps the process adapter's methods with timers and runs the catalogue in-process, one
scenario at a time (so a scenario's CPU is what the process and its reaped children spent
while it was computed), against the bundled reference runtime (or ``--harness``),
writing no report.

``--jobs N`` (``retryproof run``'s default is CPUs + 1) runs it as ``retryproof run
--jobs N`` does and shows the schedule instead of each scenario's CPU, which threads
side by side cannot tell apart: when each scenario started and ended (seconds from the
run's start), on which worker, when an alone part asked for the machine and got it, and
the worker-seconds no scenario ran (the run waiting on nothing but its own order).

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
from retryproof.conformance import schedule
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


class Schedule:
    """Under ``--jobs``: each scenario's start and end and its worker, and each alone
    part's asking and getting the machine, in seconds from ``began``."""

    def __init__(self, began: float):
        self.began = began
        self.rows: list[tuple[str, str, float, float, str]] = []
        self.alone: list[tuple[str, float, float]] = []

    def instrument(self) -> None:
        compute, alone = Run.compute, schedule.Overlap.alone

        def timed(run, item, *args, **kwargs):
            start = time.perf_counter() - self.began
            result = compute(run, item, *args, **kwargs)
            worker = threading.current_thread().name.rsplit("-", 1)[-1]
            self.rows.append((result.entry.id, result.status, start, time.perf_counter() - self.began, worker))
            return result

        @contextmanager
        def timed_alone(overlap):
            asked = time.perf_counter() - self.began
            with alone(overlap):
                self.alone.append((threading.current_thread().name, asked, time.perf_counter() - self.began))
                yield

        Run.compute = timed
        schedule.Overlap.alone = timed_alone

    def print(self, jobs: int, wall: float) -> None:
        rows = sorted(self.rows, key=lambda row: row[2])
        table = [
            (i, status, worker, f"{start:.2f}", f"{end:.2f}", f"{end - start:.2f}")
            for i, status, start, end, worker in rows
        ]
        print(tabulate(table, headers=("scenario", "status", "worker", "start", "end", "seconds"), tablefmt="github"))
        for _, asked, got in self.alone:
            print(f"an alone part asked at {asked:.2f} s, ran from {got:.2f} s")
        busy = sum(end - start for _, _, start, end, _ in rows)
        first = min(start for _, _, start, _, _ in rows)
        print(
            f"first scenario at {first:.2f} s; worker-seconds with no scenario after it: {jobs * (wall - first) - busy:.2f}"
        )


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
    parser.add_argument("--jobs", type=int, default=1, help="scenarios at once; above 1, show the schedule")
    args = parser.parse_args()
    if args.profile and sys.version_info >= (3, 12):
        parser.error("--profile needs a profiler per thread: Python 3.11 or older")
    command = tuple(shlex.split(args.harness)) if args.harness else REFERENCE_COMMAND
    options = Options(
        command=command, target="", seed=1, skip=tuple(filter(None, args.skip.split(","))), jobs=args.jobs
    )
    totals: dict[str, list[float]] = defaultdict(list)
    instrument(totals)
    began, cpu_began = time.perf_counter(), cpu_seconds()
    durations, timeline = Durations(totals), Schedule(began)
    durations.instrument() if args.jobs == 1 else timeline.instrument()
    with profiled(args.profile):
        hello, kept = handshake(options)  # as `retryproof run` does: its harness is the first sharing scenario's
        finished = run(options, hello, [], kept)
    wall = time.perf_counter() - began
    kit, children = (now - then for now, then in zip(cpu_seconds(), cpu_began, strict=True))
    # Nested waits (start waits for hello) are counted once: hello time is inside start.
    start_s = sum(totals["start"])
    rows = [(TIMED[name], len(totals[name]), f"{sum(totals[name]):.2f}") for name in TIMED]
    if args.jobs == 1:
        durations.rows.sort(key=lambda row: -(float(row[3]) + float(row[4])))
        headers = ("scenario", "status", "seconds", "kit CPU s", "harness CPU s", "starts")
        print(tabulate(durations.rows, headers=headers, tablefmt="github"))
    else:
        timeline.print(args.jobs, wall)
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
