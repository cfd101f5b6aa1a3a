"""Where a full run's wall time goes: harness starts (spawn + handshake), calls,
kills/stops, and the rest (the kit itself); and each scenario's CPU seconds, the kit's
own and its harness processes', the figure a loaded machine changes least (a run on N
CPUs takes at least its CPU seconds over N).

    python benchmarks/bench_run.py [--skip IDS] [--harness CMD]

Wraps the process adapter's methods with timers and runs the catalogue in-process, one
scenario at a time (so a scenario's CPU is what the process and its reaped children spent
while it was computed), against the bundled reference runtime (or ``--harness``),
writing no report.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from collections import defaultdict

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


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--skip", default="", help="comma-separated scenario ids")
    parser.add_argument("--harness", help="harness command line (default: the reference runtime)")
    args = parser.parse_args()
    command = tuple(shlex.split(args.harness)) if args.harness else REFERENCE_COMMAND
    options = Options(command=command, target="", seed=1, skip=tuple(filter(None, args.skip.split(","))))
    totals: dict[str, list[float]] = defaultdict(list)
    instrument(totals)
    began, cpu_began = time.perf_counter(), cpu_seconds()
    hello, kept = handshake(options)  # as `retryproof run` does: its harness is the first sharing scenario's
    durations = Durations(totals)
    durations.instrument()
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
