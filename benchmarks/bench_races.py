"""How often an A4 race meets a narrow check-then-set window on this machine's storage:
the power of the race probes (A4-CONCURRENT, A4-MULTIPROCESS, FUZZ-MODEL's probe).

    python benchmarks/bench_races.py [--rounds 50] [--dirs /tmp,/dev/shm] [--harness CMD]

Races the kit's own ``narrowly-unlocked`` runtime (tests/conformance/broken_runtimes.py:
no lock between its receipt check and its reservation) as A4 does: rounds of
``A4_IDS_PER_ROUND`` fresh ids, eight pipelined calls per id, one id's callers back to
back, every call sent before any answer is read. A race is *hit* when ``list_tasks``
holds more than one task for its id; a round is *missed* when none of its races was
hit, and a scenario fails such a runtime unless all of its ``A4_ROUNDS`` rounds miss.
The window is the runtime's own code between the two steps, so it narrows with the
storage: a free fsync (tmpfs) leaves less time for a second caller to slip in. For
each state directory's parent: races hit, rounds missed, and the longest run of missed
rounds in a row. No chance is derived from the races' hit rate: the races of one round
run together and miss together, so they are not independent trials. The directories
take turns round by round, so a shared machine loads them alike.
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

from retryproof.adapters.connection import HarnessStartError, Success
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
    parser.add_argument("--rounds", type=int, default=50, help="rounds per directory")
    parser.add_argument("--dirs", default=f"{tempfile.gettempdir()},/dev/shm", help="comma-separated parents")
    parser.add_argument("--harness", default=f"{sys.executable} -S {BROKEN} narrowly-unlocked")
    args = parser.parse_args()
    parents = [parent for parent in args.dirs.split(",") if parent]
    if args.rounds < 1 or not parents:
        parser.error("--rounds must be at least 1 and --dirs must name a directory")
    hits: Counter = Counter()
    missed: dict[str, list[bool]] = {parent: [] for parent in parents}
    states: dict[str, str] = {}
    connections: dict[str, ProcessConnection] = {}
    try:
        for parent in parents:
            states[parent] = tempfile.mkdtemp(prefix="retryproof-races-", dir=parent)
            connections[parent] = ProcessConnection(
                tuple(shlex.split(args.harness)), states[parent], call_timeout=30, start_timeout=30
            )
            connections[parent].start()
        for number in range(args.rounds):
            for parent, connection in connections.items():
                hit = race_round(connection, f"r{number}")
                hits[parent] += hit
                missed[parent].append(hit == 0)
    except (OSError, HarnessStartError) as error:
        print(f"bench_races: {error}", file=sys.stderr)
        return 2
    finally:
        for connection in connections.values():
            connection.stop()
        for state in states.values():
            shutil.rmtree(state, ignore_errors=True)
    races = args.rounds * A4_IDS_PER_ROUND
    rows = [
        [
            parent,
            races,
            f"{hits[parent]} ({hits[parent] / races:.2f})",
            args.rounds,
            sum(missed[parent]),
            max((len(run) for run in "".join("x" if m else " " for m in missed[parent]).split()), default=0),
        ]
        for parent in parents
    ]
    print(
        f"load average {os.getloadavg()[0]:.1f}; a scenario judges {A4_ROUNDS} rounds of "
        f"{A4_IDS_PER_ROUND} races and misses only if all its rounds miss"
    )
    print(tabulate(rows, headers=["state under", "races", "hit", "rounds", "missed", "most missed in a row"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
