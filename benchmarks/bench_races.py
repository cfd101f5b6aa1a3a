"""How often an A4 race meets a narrow check-then-set window on this machine's storage:
the power of the race probes (A4-CONCURRENT, A4-MULTIPROCESS, FUZZ-MODEL's probe).

    python benchmarks/bench_races.py [--races 200] [--dirs /tmp,/dev/shm] [--harness CMD]

Races the kit's own ``narrowly-unlocked`` runtime (tests/conformance/broken_runtimes.py:
no lock between its receipt check and its reservation) as A4 does: rounds of
``A4_IDS_PER_ROUND`` fresh ids, eight pipelined calls per id, one id's callers back to
back, every call sent before any answer is read. A race is *hit* when ``list_tasks``
holds more than one task for its id. The window is the runtime's own code between the
two steps, so it narrows with the storage: a free fsync (tmpfs) leaves less time for a
second caller to slip in. For each state directory's parent, the hit rate ``p`` and
the chance that all of a scenario's ``A4_ROUNDS x A4_IDS_PER_ROUND`` races miss,
``(1 - p) ** races`` (and with one or two rounds more). The directories take turns round by round, so a shared machine
loads them alike.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path

from tabulate import tabulate

from retryproof.adapters.connection import Success
from retryproof.adapters.process import ProcessConnection
from retryproof.conformance.scenarios.retries import A4_IDS_PER_ROUND, A4_ROUNDS

BROKEN = Path(__file__).resolve().parents[1] / "tests" / "conformance" / "broken_runtimes.py"
CALLERS = 8


def race_round(connection: ProcessConnection, prefix: str) -> int:
    """One A4 round on fresh ids; how many of its ids ended with more than one task."""
    ids = [f"{prefix}-{n}" for n in range(A4_IDS_PER_ROUND)]
    task = {"subject": "race", "recipient": "bench"}
    pending = [
        connection.submit(
            "write_task", {"client_submission_id": submission_id, "task": {**task, "body": submission_id}}
        )
        for submission_id in ids
        for _ in range(CALLERS)
    ]
    for future in pending:
        connection.wait(future)
    listing = connection.call("list_tasks")
    if not isinstance(listing, Success):
        raise SystemExit(f"list_tasks failed: {listing}")
    per_id = Counter(task["client_submission_id"] for task in listing.result["tasks"])
    return sum(1 for submission_id in ids if per_id[submission_id] > 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--races", type=int, default=200, help="races per directory (rounded up to whole rounds)")
    parser.add_argument("--dirs", default=f"{tempfile.gettempdir()},/dev/shm", help="comma-separated parents")
    parser.add_argument("--harness", default=f"{sys.executable} -S {BROKEN} narrowly-unlocked")
    args = parser.parse_args()
    parents = [parent for parent in args.dirs.split(",") if parent]
    rounds = -(-args.races // A4_IDS_PER_ROUND)
    hits: Counter = Counter()
    states = {parent: tempfile.mkdtemp(prefix="retryproof-races-", dir=parent) for parent in parents}
    connections = {
        parent: ProcessConnection(tuple(shlex.split(args.harness)), state, call_timeout=30, start_timeout=30)
        for parent, state in states.items()
    }
    try:
        for connection in connections.values():
            connection.start()
        for number in range(rounds):
            for parent, connection in connections.items():
                hits[parent] += race_round(connection, f"r{number}")
    finally:
        for connection in connections.values():
            connection.stop()
        for state in states.values():
            shutil.rmtree(state, ignore_errors=True)
    races = rounds * A4_IDS_PER_ROUND
    judged = [n * A4_IDS_PER_ROUND for n in range(A4_ROUNDS, A4_ROUNDS + 3)]  # today's rounds, and one or two more
    rows = [
        [parent, races, hits[parent], f"{hits[parent] / races:.3f}"]
        + [f"{(1 - hits[parent] / races) ** n:.1e}" for n in judged]
        for parent in parents
    ]
    print(f"load average {os.getloadavg()[0]:.1f}; a scenario judges {A4_ROUNDS} rounds of {A4_IDS_PER_ROUND} races")
    print(tabulate(rows, headers=["state under", "races", "hit", "p", *(f"P(all {n} miss)" for n in judged)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
