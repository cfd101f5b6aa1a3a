"""Where a full run's wall time goes: harness starts (spawn + handshake), calls,
kills/stops, and the rest (the kit itself).

    python benchmarks/bench_run.py [--skip IDS] [--harness CMD]

Wraps the process adapter's methods with timers and runs the catalogue in-process
against the bundled reference runtime (or ``--harness``), writing no report.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from collections import defaultdict

from tabulate import tabulate

from retryproof.adapters.process import ProcessConnection
from retryproof.conformance.events import ScenarioFinished
from retryproof.conformance.options import REFERENCE_COMMAND, Options
from retryproof.conformance.runner import probe, run

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
    def __init__(self):
        self.rows = []

    def handle(self, event) -> None:
        if isinstance(event, ScenarioFinished):
            self.rows.append((event.result.entry.id, event.result.status, f"{event.result.duration_s:.2f}"))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--skip", default="", help="comma-separated scenario ids")
    parser.add_argument("--harness", help="harness command line (default: the reference runtime)")
    args = parser.parse_args()
    command = tuple(shlex.split(args.harness)) if args.harness else REFERENCE_COMMAND
    options = Options(command=command, target="", seed=1, skip=tuple(filter(None, args.skip.split(","))))
    totals: dict[str, list[float]] = defaultdict(list)
    instrument(totals)
    began = time.perf_counter()
    hello = probe(options)
    durations = Durations()
    finished = run(options, hello, [durations])
    wall = time.perf_counter() - began
    # Nested waits (start waits for hello) are counted once: hello time is inside start.
    start_s = sum(totals["start"])
    rows = [(TIMED[name], len(totals[name]), f"{sum(totals[name]):.2f}") for name in TIMED]
    print(tabulate(durations.rows, headers=("scenario", "status", "seconds"), tablefmt="github"))
    print()
    print(tabulate(rows, headers=("where", "count", "seconds"), tablefmt="github"))
    print(
        f"\nwall {wall:.2f}s for {len(finished.results)} scenarios; starts {start_s:.2f}s "
        f"({start_s / wall:.0%}), mean start {start_s / max(1, len(totals['start'])) * 1000:.0f} ms; verdict: {finished.verdict.headline}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
