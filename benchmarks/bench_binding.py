"""Where a binding run of the reference spends its time: per scenario, its wall time,
the servers it started and the CPU it cost (the kit's and its reaped servers').

    python benchmarks/bench_binding.py [--wires http,mcp-stdio,mcp-http] [--seed 1]
        [--jobs 1] [--skip IDS] [--only IDS]

Runs the catalogue in-process over each bundled reference binding (``reference-http``,
``reference-mcp``, ``reference-mcp-http``), counting ``BindingConnection.start`` calls.
With ``--jobs 1`` scenarios run one after another, so each start and each CPU-second
is that scenario's (rows in the order they ran: the shared server's turns take their
own order, ``schedule.shared_turns``); with more jobs only the run's totals are exact. A start shared by
``shares_server`` and ``takes_server`` scenarios is counted in the scenario that made
it; the handshake's (the run's first shared server) in the row ``(handshake)``. A
server's CPU is counted when it is reaped, so in the scenario that ends it: a shared
server's in its last user's turn (INVALID-KEY's CPU with no start of its own) or in the
turn of a ``takes_server`` scenario that kills it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter

from cpu import cpu_seconds
from tabulate import tabulate

from retryproof.adapters.binding.connection import BindingConnection
from retryproof.conformance.events import ScenarioResult
from retryproof.conformance.options import Options, load_binding
from retryproof.conformance.runner import Run, handshake, run

WIRES = {"http": "reference-http", "mcp-stdio": "reference-mcp", "mcp-http": "reference-mcp-http"}
#: The row of the handshake's start (kept running as the run's first shared server).
HANDSHAKE = "(handshake)"


class Counted:
    """Counts server starts, charged to the scenario computing (exact with one job)."""

    def __init__(self):
        self.current = HANDSHAKE
        self.starts: Counter[str] = Counter()
        self.rows: list[tuple] = []

    def computed(self, item, compute) -> ScenarioResult:
        """``compute()``, its starts, wall time and CPU charged to ``item``."""
        self.current = item.id
        began, cpu_began = time.perf_counter(), sum(cpu_seconds())
        result = compute()
        wall, cpu = time.perf_counter() - began, sum(cpu_seconds()) - cpu_began
        self.rows.append((item.id, result.status, f"{wall:.2f}", self.starts[item.id], f"{cpu:.2f}"))
        return result


#: The wire being measured (the last one appended).
COUNTING: list[Counted] = []


def install() -> None:
    original, original_compute = BindingConnection.start, Run.compute

    def start(connection, *args, **kwargs):
        counted = COUNTING[-1]
        counted.starts[counted.current] += 1
        return original(connection, *args, **kwargs)

    def compute(session, item, *args, **kwargs):
        return COUNTING[-1].computed(item, lambda: original_compute(session, item, *args, **kwargs))

    BindingConnection.start = start  # type: ignore[method-assign]
    Run.compute = compute  # type: ignore[method-assign]


def one_wire(wire: str, seed: int, jobs: int, only: tuple[str, ...], skip: tuple[str, ...]) -> tuple:
    binding = load_binding(WIRES[wire])
    options = Options(
        command=(), target=f"--binding {WIRES[wire]}", seed=seed, jobs=jobs, only=only, skip=skip, binding=binding
    )
    counted = Counted()
    COUNTING.append(counted)
    began, cpu_began = time.perf_counter(), sum(cpu_seconds())
    hello, kept = handshake(options)
    finished = run(options, hello, [], kept)
    wall, cpu = time.perf_counter() - began, sum(cpu_seconds()) - cpu_began
    if jobs == 1:
        print(f"\n## {wire} (seed {seed})")
        print(
            tabulate(
                [*counted.rows, (HANDSHAKE, "", "", counted.starts[HANDSHAKE], "")],
                headers=("scenario", "status", "wall s", "starts", "CPU s"),
                tablefmt="github",
            )
        )
    return wire, f"{wall:.2f}", sum(counted.starts.values()), f"{cpu:.2f}", finished.verdict.headline


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--wires", default=",".join(WIRES))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--only", default="")
    parser.add_argument("--skip", default="")
    args = parser.parse_args()
    only = tuple(filter(None, args.only.split(",")))
    skip = tuple(filter(None, args.skip.split(",")))
    install()
    totals = [one_wire(wire, args.seed, args.jobs, only, skip) for wire in args.wires.split(",")]
    print()
    print(tabulate(totals, headers=("wire", "wall s", "starts", "CPU s", "verdict"), tablefmt="github"))
    print(f"\nload average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
