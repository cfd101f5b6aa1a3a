"""What one write_task costs in the reference runtime, next to a bare fsync.

A creation makes each receipt stage durable, so it should cost a handful of fsyncs; a
reuse reads one journal line found by the id and stats one task, so it should cost no fsync
and stay flat however many receipts exist. This prints medians for: a bare fsync
(write + fsync of a small new file), one creation, and one reuse with 10 and with 10,000
receipts already stored. Storing the 10,000 takes most of its minute or two.

    python benchmarks/bench_reference.py [--dir DIR] [--rounds N]

``--dir`` picks the file system to measure (default: the system temp directory); the
stored receipts are made through the same code path with fsync switched off, since
only the measured calls need to be durable.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator

from tabulate import tabulate

from retryproof.reference_impl import Runtime

TASK = {"sender": "PM", "recipient": "DEV", "subject": "Fix login", "references": ["INC-17"]}


@contextlib.contextmanager
def counting_fsyncs(enabled: bool = True) -> Iterator[list[int]]:
    """Count os.fsync and os.fdatasync calls; with ``enabled=False`` skip them (for fast setup)."""
    real, count = {name: getattr(os, name) for name in ("fsync", "fdatasync")}, [0]

    def counted(sync: Callable[[int], None]) -> Callable[[int], None]:
        def sync_counted(fd: int) -> None:
            count[0] += 1
            if enabled:
                sync(fd)

        return sync_counted

    for name, sync in real.items():
        setattr(os, name, counted(sync))
    try:
        yield count
    finally:
        for name, sync in real.items():
            setattr(os, name, sync)


def median_us(action: Callable[[int], object], rounds: int) -> float:
    samples = []
    for index in range(rounds):
        started = time.perf_counter()
        action(index)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1e6


def bare_fsync(directory: str, rounds: int) -> float:
    def write_and_sync(index: int) -> None:
        fd = os.open(os.path.join(directory, f"bare-{index}"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(fd, b'{"state":"reserved"}\n')
            os.fsync(fd)
        finally:
            os.close(fd)

    return median_us(write_and_sync, rounds)


def stored_runtime(directory: str, receipts: int) -> Runtime:
    runtime = Runtime(directory)
    with counting_fsyncs(enabled=False):
        for index in range(receipts):
            runtime.write_task({**TASK, "body": str(index)}, f"stored-{index}")
    return runtime


def reuse(runtime: Runtime, receipts: int, rounds: int) -> tuple[float, int]:
    chosen = random.Random(receipts).choices(range(receipts), k=rounds)
    with counting_fsyncs() as fsyncs:
        median = median_us(
            lambda index: runtime.write_task({**TASK, "body": str(chosen[index])}, f"stored-{chosen[index]}"), rounds
        )
    return median, fsyncs[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", help="where to create the scratch state directories")
    parser.add_argument("--rounds", type=int, default=200, help="measured calls per row (default 200)")
    options = parser.parse_args()
    scratch = tempfile.mkdtemp(prefix="bench-reference-", dir=options.dir)
    try:
        fsync_us = bare_fsync(scratch, options.rounds)

        create_dir = os.path.join(scratch, "create")
        os.mkdir(create_dir)
        creator = Runtime(create_dir)
        with counting_fsyncs() as create_fsyncs:
            create_us = median_us(lambda index: creator.write_task(TASK, f"new-{index}"), options.rounds)

        rows = [
            ["bare fsync (write + fsync, small new file)", fsync_us, 1, 1.0],
            ["create (new id)", create_us, create_fsyncs[0] / options.rounds, create_us / fsync_us],
        ]
        for receipts in (10, 10_000):
            directory = os.path.join(scratch, f"reuse-{receipts}")
            os.mkdir(directory)
            reuse_us, reuse_fsyncs = reuse(stored_runtime(directory, receipts), receipts, options.rounds * 5)
            rows.append(
                [
                    f"reuse, {receipts:,} receipts stored",
                    reuse_us,
                    reuse_fsyncs / (options.rounds * 5),
                    reuse_us / fsync_us,
                ]
            )
        print(
            f"scratch: {options.dir or tempfile.gettempdir()}  rounds: {options.rounds} (reuse: {options.rounds * 5})"
        )
        print(
            tabulate(
                rows,
                headers=["operation", "median µs", "fsyncs/call", "× bare fsync"],
                floatfmt=("", ".1f", ".1f", ".3f"),
            )
        )
    finally:
        shutil.rmtree(scratch)


if __name__ == "__main__":
    main()
