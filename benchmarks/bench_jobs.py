"""``retryproof run --jobs N`` next to ``--jobs 1``: the wall time of the catalogue
(without FUZZ-MODEL, whose budget is its own) against the bundled reference runtime
(or ``--harness``), as a ratio measured in one run.

    python benchmarks/bench_jobs.py [--jobs N] [--rounds R] [--harness CMD]

The two settings take turns round by round, so a machine shared with other work slows
both alike; the ratio of medians is the figure, and the spread of the rounds' own
ratios (each round's run against that round's ``--jobs 1``) says how far to trust it.
Every round must reach the same statuses, or the comparison is void and the script
says so.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import sys
import time

from tabulate import tabulate

from retryproof.conformance.options import REFERENCE_COMMAND, Options, available_cpus, default_jobs
from retryproof.conformance.runner import probe, run


def timed_run(options: Options) -> tuple[float, list[tuple[str, str]]]:
    began = time.perf_counter()
    finished = run(options, probe(options), [])
    return time.perf_counter() - began, [(result.entry.id, result.status) for result in finished.results]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=default_jobs())
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--harness", help="harness command line (default: the reference runtime)")
    parser.add_argument("--skip", default="FUZZ-MODEL", help="comma-separated scenario ids (default FUZZ-MODEL)")
    args = parser.parse_args()
    command = tuple(shlex.split(args.harness)) if args.harness else REFERENCE_COMMAND
    skip = tuple(filter(None, args.skip.split(",")))
    settings = {1: [], args.jobs: []}
    statuses = set()
    for _ in range(args.rounds):
        for jobs, samples in settings.items():
            seconds, outcome = timed_run(Options(command=command, target="", seed=1, skip=skip, jobs=jobs))
            samples.append(seconds)
            statuses.add(tuple(outcome))
    serial = statistics.median(settings[1])
    rows = []
    for jobs, samples in settings.items():
        rounds = [sample / serial_sample for sample, serial_sample in zip(samples, settings[1], strict=True)]
        spread = f"{min(rounds):.2f}-{max(rounds):.2f}x"
        rows.append(
            [
                f"--jobs {jobs}",
                f"{statistics.median(samples):.1f}",
                f"{statistics.median(samples) / serial:.2f}x",
                spread,
            ]
        )
    print(tabulate(rows, headers=["run", "median wall s", "vs --jobs 1", "rounds' ratios"], tablefmt="github"))
    print(
        f"\n{args.rounds} interleaved rounds, skipping {','.join(skip) or 'nothing'}; "
        f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs ({available_cpus()} usable)"
    )
    if len(statuses) != 1:
        print("the rounds disagree on statuses: the comparison is void", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
